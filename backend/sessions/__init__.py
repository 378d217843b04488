"""Sessions: the SQL session store (SQLite, or PostgreSQL for a cluster).

- ``store``: ``SessionStore``, the sessions themselves; it mixes in ``transcript``
  (messages, pending and partial replies) and ``derived_state`` (the hippocampus's
  state and the turn reports) and ``entity_edits`` (the user's edits of the people
  and pets of their life);
- ``db``, ``schema``, ``records``: the database handle, its migrations, row types;
- ``locks``: per-session locks across processes;
- ``cluster_jobs``: jobs that exactly one process of a cluster runs.
"""
