"""Replay of the writes that waited for the vector store (``docs/reliability.md``).

``LongTermMemory.write_or_queue`` (``backend.longterm.outage``) queues in the durable
outbox what the store could not take; this module writes it once the store is back. It
drives ``LongTermMemory`` from above, through its public methods (no part of the package
imports it).

``replay_once`` replays the oldest entries through the same gate, one candidate at a
time, advancing each entry's progress; ``outbox_loop`` (run by the app from start-up,
so a restart replays what an earlier run left) calls it every ``IDLE_S`` and backs off
while the store stays down.

Failure policy: an outage during replay stops the pass (the entry resumes later where it
stopped); any other error on an entry is counted and the pass stops, and after
``MAX_ATTEMPTS`` the entry is parked so the queue behind it drains (health reports
parked entries).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from backend.longterm.memory import LongTermMemory, WriteOutcome
from backend.longterm.outbox import OutboxError
from backend.stores.vector_port import VectorStoreUnavailable

log = logging.getLogger(__name__)

IDLE_S = 2.0  # how often an empty queue is looked at: one indexed SELECT
MIN_BACKOFF_S = 1.0
# A store back up is noticed within this (plus one pass); each attempt while it is down
# costs one refused connection (or one client timeout in a thread, for a hung server).
MAX_BACKOFF_S = 5.0
PASS_LIMIT = 50  # entries per pass, so that one pass stays short
STOP_WAIT_S = 10.0  # at shutdown, how long a pass in flight may take to finish


@dataclass(frozen=True, slots=True)
class ReplayReport:
    entries: int = 0  # entries finished (removed from the queue)
    outcomes: tuple[WriteOutcome, ...] = field(default=())
    stopped: str | None = None  # why the pass stopped early (outage, error); None: drained
    more: bool = False  # the pass hit PASS_LIMIT with entries left


def replay_once(long_term: LongTermMemory, limit: int = PASS_LIMIT) -> ReplayReport:
    """Replay up to ``limit`` queued entries, oldest first (blocking; run it in a thread)."""
    outbox = long_term.outbox
    if outbox is None:
        return ReplayReport()
    entries = outbox.pending(limit)
    outcomes: list[WriteOutcome] = []
    finished = 0
    for entry in entries:
        pending = entry.write
        ns = pending.namespace
        try:
            ids = list(pending.recalled_ids)
            recalled = long_term.store.get(ns, ids) if ids else []
            for index in range(entry.done, len(pending.candidates)):
                outcomes += long_term.write(
                    ns, [pending.candidates[index]], recalled=recalled,
                    source_session=pending.source_session, gate_policy=pending.gate_policy,
                )  # fmt: skip
                outbox.advance(entry.id, index + 1)
            outbox.remove(entry.id)
            finished += 1
        except VectorStoreUnavailable as exc:
            return ReplayReport(finished, tuple(outcomes), f"store unavailable: {exc}")
        except OutboxError as exc:
            log.exception("write outbox failed during replay")
            return ReplayReport(finished, tuple(outcomes), f"outbox: {exc}")
        except Exception as exc:  # a poison entry must not stop the app, nor the queue forever
            log.exception("replaying outbox entry %d of %s failed", entry.id, ns.key)
            parked = outbox.failed(entry.id, f"{type(exc).__name__}: {exc}")
            if parked:
                log.error("outbox entry %d of %s parked after repeated failures", entry.id, ns.key)
                continue
            return ReplayReport(finished, tuple(outcomes), f"error: {type(exc).__name__}")
    if finished:
        log.info("outbox: replayed %d entries (%d outcomes)", finished, len(outcomes))
    return ReplayReport(finished, tuple(outcomes), None, more=len(entries) >= limit)


async def outbox_loop(
    long_term: LongTermMemory,
    *,
    idle_s: float = IDLE_S,
    min_backoff_s: float = MIN_BACKOFF_S,
    max_backoff_s: float = MAX_BACKOFF_S,
) -> None:
    """Replay the outbox from start-up until cancelled; back off while the store is down.

    Cancelling waits (up to ``STOP_WAIT_S``) for the pass in flight: await the task after
    cancelling it, before closing the store and the outbox.
    """
    if long_term.outbox is None:
        return
    backoff = min_backoff_s
    while True:
        running = asyncio.ensure_future(asyncio.to_thread(replay_once, long_term))
        try:
            report = await asyncio.shield(running)
        except asyncio.CancelledError:
            # Stopping: let the pass in flight finish before the store and the outbox are
            # closed under it (a write failing on a closed client would count as an
            # attempt against a good entry). Bounded: a pass is at most PASS_LIMIT entries.
            await asyncio.wait([running], timeout=STOP_WAIT_S)
            raise
        except Exception:  # never let the loop die: the queue would stop draining
            log.exception("outbox replay pass failed")
            report = ReplayReport(stopped="crashed")
        if report.stopped is not None:
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
            continue
        backoff = min_backoff_s
        if not report.more:
            await asyncio.sleep(idle_s)
