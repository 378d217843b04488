"""Writes that wait for the vector store: the save gate's call that queues on an outage
(``docs/reliability.md``).

``OutageQueue.write_or_queue`` writes through the save gate and, when the store is
unavailable, appends the candidates not applied to the durable outbox
(``backend.longterm.outbox``) and reports them as ``queue`` outcomes. While a namespace
has queued entries, its new writes queue behind them, so the gate sees the facts of one
namespace in the order they were said (an update queued later can only supersede what
was replayed before it). ``backend.longterm.outbox_replay`` replays the queue.

Failure policy: when the outbox itself cannot be written (disk full), the write is
reported as failed (the store's error is raised), as before there was an outbox; an
outbox that cannot be read is logged and the write goes to the store directly.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from backend.clock import Clock
from backend.longterm.gated_write import WriteInterrupted, WriteOutcome
from backend.longterm.outbox import OutboxError, PendingWrite, WriteOutbox
from backend.memory.types import Candidate, GatePolicy, Memory, Namespace
from backend.stores.vector_port import VectorStoreUnavailable

log = logging.getLogger(__name__)

OUTAGE = "store unavailable: queued for replay"
BEHIND = "queued behind earlier writes waiting for the store"


class GateWrite(Protocol):
    """The save gate's write (``LongTermMemory.write``)."""

    def __call__(
        self,
        ns: Namespace,
        candidates: Sequence[Candidate],
        *,
        recalled: Sequence[Memory] = (),
        source_session: str | None = None,
        gate_policy: GatePolicy | None = None,
    ) -> list[WriteOutcome]: ...


class OutageQueue:
    """Queues into ``outbox`` what the store could not take."""

    def __init__(self, outbox: WriteOutbox, clock: Clock) -> None:
        self.outbox = outbox
        self.clock = clock

    def write_or_queue(
        self,
        write: GateWrite,
        ns: Namespace,
        candidates: Sequence[Candidate],
        *,
        recalled: Sequence[Memory] = (),
        source_session: str | None = None,
        gate_policy: GatePolicy | None = None,
    ) -> list[WriteOutcome]:
        """``write``, queueing what the store could not take (see module doc). ``write``
        is passed per call so that the caller's current write (a wrapped one included)
        is the one used. Raises what ``write`` raises when the outbox cannot be written.
        """
        if candidates and self._has_pending(ns):
            return self._queue(ns, list(candidates), recalled, source_session, gate_policy,
                               BEHIND)  # fmt: skip
        try:
            return write(
                ns, candidates, recalled=recalled, source_session=source_session,
                gate_policy=gate_policy,
            )  # fmt: skip
        except VectorStoreUnavailable as exc:
            done = exc.outcomes if isinstance(exc, WriteInterrupted) else []
            rest = exc.remaining if isinstance(exc, WriteInterrupted) else list(candidates)
            log.warning(
                "long-term store unavailable in %s: queueing %d candidates", ns.key, len(rest)
            )
            try:
                return done + self._queue(ns, rest, recalled, source_session, gate_policy,
                                          OUTAGE)  # fmt: skip
            except OutboxError:
                log.exception("cannot queue %d candidates of %s", len(rest), ns.key)
                raise exc from None

    def _has_pending(self, ns: Namespace) -> bool:
        try:
            return self.outbox.has_pending(ns)
        except OutboxError:
            log.exception("cannot read the write outbox; writing directly")
            return False

    def _queue(
        self,
        ns: Namespace,
        candidates: list[Candidate],
        recalled: Sequence[Memory],
        source_session: str | None,
        gate_policy: GatePolicy | None,
        reason: str,
    ) -> list[WriteOutcome]:
        self.outbox.append(
            PendingWrite(
                namespace=ns,
                candidates=tuple(candidates),
                queued_at=self.clock.now(),
                recalled_ids=tuple(m.id for m in recalled),
                source_session=source_session,
                gate_policy=gate_policy,
            )
        )
        return [WriteOutcome("queue", c.content, reason) for c in candidates]
