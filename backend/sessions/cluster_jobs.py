"""Periodic jobs that run once per cluster, not once per app process.

Every process wakes up now and then and tries to *claim* the job: one atomic ``UPDATE``
moves the job's ``due_at`` one interval ahead, on the condition that it is due. Exactly
one claimant's update matches (PostgreSQL re-checks the condition on the row the winner
wrote; SQLite serialises writers), and only that process runs the pass. Nothing is held
while the pass runs, so a process that dies mid-pass blocks nobody: the next pass comes
one interval later, as it would after a failed pass. Times are the database's clock.

Failure policy: database errors propagate (the maintenance loop logs and retries).
"""

from __future__ import annotations

from sqlalchemy import text

from backend.sessions.db import SessionDatabase


def claim_job(db: SessionDatabase, name: str, owner: str, interval_s: float) -> bool:
    """True when the job ``name`` was due and this caller claimed its next run."""
    now = db.dialect.now_s
    with db.write() as conn:
        conn.execute(
            text(
                "INSERT INTO cluster_jobs (name, owner, due_at) VALUES (:name, NULL, 0)"
                " ON CONFLICT (name) DO NOTHING"
            ),
            {"name": name},
        )
        result = conn.execute(
            text(
                f"UPDATE cluster_jobs SET owner = :owner, due_at = {now} + :interval"
                f" WHERE name = :name AND due_at <= {now}"
            ),
            {"name": name, "owner": owner, "interval": float(interval_s)},
        )
    return result.rowcount == 1


def job_owner(db: SessionDatabase, name: str) -> str | None:
    """The process that claimed the job's latest run (None: never claimed)."""
    rows = db.read("SELECT owner FROM cluster_jobs WHERE name = :name", {"name": name})
    return rows[0][0] if rows else None
