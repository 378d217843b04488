"""Writes that wait for the vector store: queue on an outage, replay when it is back.

``write_or_queue`` is the turn's save-gate call: it writes through
``LongTermMemory.write`` and, when the store is unavailable, appends the candidates not
applied to the durable outbox (``backend.longterm.outbox``) and reports them as ``queue``
outcomes. While a namespace has queued entries, its new writes queue behind them, so the
gate sees the facts of one namespace in the order they were said (an update queued later
can only supersede what was replayed before it).

``replay_once`` replays the oldest entries through the same gate, one candidate at a
time, advancing each entry's progress; ``outbox_loop`` (run by the app from start-up,
so a restart replays what an earlier run left) calls it every ``IDLE_S`` and backs off
while the store stays down.

Failure policy: an outage during replay stops the pass (the entry resumes later where it
stopped); any other error on an entry is counted and the pass stops, and after
``MAX_ATTEMPTS`` the entry is parked so the queue behind it drains (health reports
parked entries). When the outbox itself cannot be written (disk full), the write is
reported as failed, as before there was an outbox.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from backend.longterm.memory import LongTermMemory, WriteInterrupted, WriteOutcome
from backend.longterm.outbox import OutboxError, PendingWrite, WriteOutbox
from backend.memory.types import Candidate, GatePolicy, Memory, Namespace
from backend.stores.vector_port import VectorStoreUnavailable

log = logging.getLogger(__name__)

IDLE_S = 2.0  # how often an empty queue is looked at: one indexed SELECT
MIN_BACKOFF_S = 1.0
# A store back up is noticed within this (plus one pass); each attempt while it is down
# costs one refused connection (or one client timeout in a thread, for a hung server).
MAX_BACKOFF_S = 5.0
PASS_LIMIT = 50  # entries per pass, so that one pass stays short
STOP_WAIT_S = 10.0  # at shutdown, how long a pass in flight may take to finish
OUTAGE = "store unavailable: queued for replay"
BEHIND = "queued behind earlier writes waiting for the store"


def write_or_queue(
    long_term: LongTermMemory,
    ns: Namespace,
    candidates: Sequence[Candidate],
    *,
    recalled: Sequence[Memory] = (),
    source_session: str | None = None,
    gate_policy: GatePolicy | None = None,
) -> list[WriteOutcome]:
    """``LongTermMemory.write``, queueing what the store could not take (see module doc).

    Raises what ``write`` raises when there is no outbox or it cannot be written.
    """
    outbox = long_term.outbox
    if outbox is not None and candidates and _has_pending(outbox, ns):
        return _queue(long_term, outbox, ns, list(candidates), recalled, source_session,
                      gate_policy, BEHIND)  # fmt: skip
    try:
        return long_term.write(
            ns, candidates, recalled=recalled, source_session=source_session,
            gate_policy=gate_policy,
        )  # fmt: skip
    except VectorStoreUnavailable as exc:
        if outbox is None:
            raise
        done = exc.outcomes if isinstance(exc, WriteInterrupted) else []
        rest = exc.remaining if isinstance(exc, WriteInterrupted) else list(candidates)
        log.warning("long-term store unavailable in %s: queueing %d candidates", ns.key, len(rest))
        try:
            return done + _queue(long_term, outbox, ns, rest, recalled, source_session,
                                 gate_policy, OUTAGE)  # fmt: skip
        except OutboxError:
            log.exception("cannot queue %d candidates of %s", len(rest), ns.key)
            raise exc from None


def _has_pending(outbox: WriteOutbox, ns: Namespace) -> bool:
    try:
        return outbox.has_pending(ns)
    except OutboxError:
        log.exception("cannot read the write outbox; writing directly")
        return False


def _queue(
    long_term: LongTermMemory,
    outbox: WriteOutbox,
    ns: Namespace,
    candidates: list[Candidate],
    recalled: Sequence[Memory],
    source_session: str | None,
    gate_policy: GatePolicy | None,
    reason: str,
) -> list[WriteOutcome]:
    outbox.append(
        PendingWrite(
            namespace=ns,
            candidates=tuple(candidates),
            queued_at=long_term.clock.now(),
            recalled_ids=tuple(m.id for m in recalled),
            source_session=source_session,
            gate_policy=gate_policy,
        )
    )
    return [WriteOutcome("queue", c.content, reason) for c in candidates]


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
