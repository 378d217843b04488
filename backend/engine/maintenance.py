"""Periodic memory maintenance: the decay pass and the vector backfill, for every namespace.

The app runs ``maintenance_loop`` in its lifespan (memory-model.md: "A decay pass
(scheduled by the app, not by callers)"). Failure policy: a failing pass is logged and
retried at the next interval; it never stops the app.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from backend.stores.long_term import LongTermMemory

log = logging.getLogger(__name__)


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


async def maintenance_loop(long_term: LongTermMemory, interval_hours: float) -> None:
    """Run maintenance shortly after start, then every ``interval_hours``, until cancelled."""
    if interval_hours <= 0:
        return
    await asyncio.sleep(FIRST_PASS_DELAY_S)
    while True:
        try:
            report = await asyncio.to_thread(run_maintenance, long_term)
            log.info(
                "maintenance: %d namespaces, %d faded, %d backfilled",
                report.namespaces,
                report.faded,
                report.backfilled,
            )
        except Exception:
            log.exception("maintenance pass failed; retrying at the next interval")
        await asyncio.sleep(interval_hours * 3600)
