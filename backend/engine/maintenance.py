"""Periodic memory maintenance: the decay pass and the vector backfill, for every namespace.

The app runs ``maintenance_loop`` in its lifespan (docs/memory-model.md: "A decay pass
(scheduled by the app, not by callers)"). With several app processes on one session
database, each pass runs in one process only: the loop claims it in the database first
(``backend.sessions.cluster_jobs``), and prunes the change log the processes' lexical
indexes follow (``backend.stores.change_feed``). Failure policy: a failing pass is logged
and retried at the next interval; it never stops the app.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass

from backend.longterm.memory import LongTermMemory
from backend.sessions.cluster_jobs import claim_job
from backend.sessions.db import SessionDatabase
from backend.stores.change_feed import ChangeFeed

log = logging.getLogger(__name__)

JOB_NAME = "maintenance"


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    namespaces: int = 0
    faded: int = 0
    backfilled: int = 0


def run_maintenance(long_term: LongTermMemory) -> MaintenanceReport:
    """One decay pass and one backfill over every namespace (blocking; run it in a thread)."""
    namespaces = long_term.store.namespaces()
    faded = backfilled = 0
    for ns in namespaces:
        faded += long_term.decay_pass(ns).faded
        backfilled += long_term.backfill(ns)
    return MaintenanceReport(len(namespaces), faded, backfilled)


# The first pass waits a little so that start-up (and model loading) comes first.
FIRST_PASS_DELAY_S = 60.0
# How often a process asks whether a claimed pass is due: a pass starts at most this
# late (the default interval is 24 hours).
MAX_CLAIM_POLL_S = 300.0


def process_owner() -> str:
    """An id for this process in the job table (host, pid and a nonce: pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def maintenance_loop(
    long_term: LongTermMemory,
    interval_hours: float,
    *,
    jobs: SessionDatabase | None = None,
    owner: str | None = None,
    first_delay_s: float = FIRST_PASS_DELAY_S,
) -> None:
    """Run maintenance shortly after start, then every ``interval_hours``, until cancelled.

    ``jobs``: the shared session database; the pass then runs only when this process
    claims it (once per interval in the whole cluster). ``None``: every interval here.
    """
    if interval_hours <= 0:
        return
    interval_s = interval_hours * 3600
    owner = owner or process_owner()
    await asyncio.sleep(first_delay_s)
    while True:
        try:
            due = jobs is None or await asyncio.to_thread(
                claim_job, jobs, JOB_NAME, owner, interval_s
            )
            if due:
                report = await asyncio.to_thread(run_maintenance, long_term)
                if jobs is not None:  # the cluster's change log (change_feed.py)
                    await asyncio.to_thread(ChangeFeed(jobs).prune)
                log.info(
                    "maintenance: %d namespaces, %d faded, %d backfilled",
                    report.namespaces,
                    report.faded,
                    report.backfilled,
                )
        except Exception:
            log.exception("maintenance pass failed; retrying at the next interval")
        await asyncio.sleep(interval_s if jobs is None else min(interval_s, MAX_CLAIM_POLL_S))
