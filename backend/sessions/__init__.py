"""Sessions: the SQL session store (SQLite, or PostgreSQL for a cluster).

- ``store``: ``SessionStore``, transcripts, short-term memory, pending replies;
- ``db``, ``schema``, ``records``: the database handle, its migrations, row types;
- ``locks``: per-session locks across processes;
- ``cluster_jobs``: jobs that exactly one process of a cluster runs.
"""
