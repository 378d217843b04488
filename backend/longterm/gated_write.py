"""The save gate's write path: each candidate is embedded, its neighbours read, the gate
(``backend.memory.gate``) decides and the decision is applied (``docs/memory-model.md``).

Failure policy:
- an embedder that is down costs the cosine channel, never a write: the memory is
  stored without a vector (``backfill`` gives it one later) and the gate dedupes by text;
- a store outage in the middle of ``write`` raises ``WriteInterrupted`` (a
  ``VectorStoreUnavailable``) carrying what was applied and what was not, so that
  ``backend.longterm.outage`` can queue the rest in the outbox and lose nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from backend.clock import Clock
from backend.longterm.embedding import TolerantEmbedder
from backend.longterm.locks import NamespaceLocks
from backend.memory import gate
from backend.memory.types import Candidate, GatePolicy, Memory, Namespace
from backend.stores.vector_port import VectorStore, VectorStoreUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What the gate did with one candidate; ``memory_id`` is the memory written or reinforced."""

    # "queue": the store was down; the candidate waits in the outbox (not yet gated).
    action: Literal["write", "reinforce", "supersede", "reject", "queue"]
    content: str
    reason: str
    memory_id: str | None = None
    target_id: str | None = None
    has_vector: bool = False


class WriteInterrupted(VectorStoreUnavailable):
    """The store went away during ``write``: ``outcomes`` were applied, ``remaining``
    (in order) were not. The candidate at ``remaining[0]`` may be half-applied (no backend
    promises atomic batches); replaying it is safe, the gate dedupes against the store."""

    def __init__(
        self,
        cause: VectorStoreUnavailable,
        outcomes: list[WriteOutcome],
        remaining: list[Candidate],
    ) -> None:
        super().__init__(str(cause))
        self.outcomes = outcomes
        self.remaining = remaining


class GatedWriter:
    """The save gate over one store.

    ``policy``: the gate thresholds used when a write names none (a persona's override
    is passed per write); ``neighbours``: how many nearest memories the gate compares a
    candidate with. Both may be replaced after construction (``LongTermMemory``'s
    ``gate_policy`` and ``activation``).
    """

    def __init__(
        self,
        store: VectorStore,
        embedder: TolerantEmbedder,
        clock: Clock,
        locks: NamespaceLocks,
        policy: GatePolicy,
        *,
        neighbours: int,
        new_id: Callable[[], str],
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.locks = locks
        self.policy = policy
        self.neighbours = neighbours
        self.new_id = new_id

    def write(
        self,
        ns: Namespace,
        candidates: Sequence[Candidate],
        *,
        recalled: Sequence[Memory] = (),
        source_session: str | None = None,
        gate_policy: GatePolicy | None = None,
    ) -> list[WriteOutcome]:
        """Pass each candidate through the save gate and apply the decision.

        ``gate_policy``: the thresholds to apply (a persona's); ``None``: ``self.policy``.

        Candidates are processed in order, so a later candidate sees what an earlier one
        wrote (the gate's ``siblings``: two restatements in one batch become one memory). A
        store outage raises ``WriteInterrupted`` with the outcomes so far and the candidates
        not applied.
        """
        if not candidates:
            return []
        vectors = self.embedder.embed([c.content for c in candidates])
        outcomes: list[WriteOutcome] = []
        siblings: list[Memory] = []
        with self.locks(ns):
            for index, candidate in enumerate(candidates):
                vector = None if vectors is None else vectors[index]
                try:
                    outcome, written = self._write_one(
                        ns, candidate, vector, recalled, source_session, gate_policy, siblings
                    )
                except VectorStoreUnavailable as exc:
                    raise WriteInterrupted(exc, outcomes, list(candidates[index:])) from exc
                outcomes.append(outcome)
                if written is not None:
                    siblings.append(written)
        return outcomes

    def _neighbours(
        self, ns: Namespace, candidate: Candidate, vector: np.ndarray | None
    ) -> list[Memory]:
        if vector is not None:
            return [m for m, _ in self.store.query(ns, vector, self.neighbours)]
        # No vector: compare with stored memories sharing the candidate's text (exact dedupe).
        return self.store.list(
            ns, text=candidate.content.strip()[:200], limit=5, include_superseded=False
        )

    def _write_one(
        self,
        ns: Namespace,
        candidate: Candidate,
        vector: np.ndarray | None,
        recalled: Sequence[Memory],
        source_session: str | None,
        gate_policy: GatePolicy | None = None,
        siblings: Sequence[Memory] = (),
    ) -> tuple[WriteOutcome, Memory | None]:
        """The outcome, and the memory written when one was."""
        neighbours = self._neighbours(ns, candidate, vector)
        if candidate.supersedes and candidate.supersedes not in {m.id for m in neighbours}:
            # The gate can only supersede what it sees: fetch an id named explicitly.
            neighbours += self.store.get(ns, [candidate.supersedes])
        decision = gate.decide(
            candidate,
            vector,
            recalled=recalled,
            neighbours=neighbours,
            siblings=siblings,
            policy=gate_policy or self.policy,
        )
        now = self.clock.now()
        base = WriteOutcome(
            decision.action,
            candidate.content,
            decision.reason,
            target_id=decision.target_id,
            has_vector=vector is not None,
        )
        if decision.action == "reject":
            log.info("candidate rejected in %s: %s", ns.key, decision.reason)
            return base, None
        if decision.action == "reinforce":
            assert decision.target_id is not None
            targets = self.store.get(ns, [decision.target_id])
            if targets:
                reinforced = gate.reinforce(targets[0], now, importance=candidate.importance)
                self.store.upsert(ns, [reinforced])
            return replace(base, memory_id=decision.target_id), None
        memory = Memory(
            id=self.new_id(),
            content=candidate.content.strip(),
            category=candidate.category,
            importance=candidate.importance,
            confidence=candidate.confidence,
            emotion=candidate.emotion,
            keywords=candidate.keywords,
            subject=candidate.subject,
            created_at=now,
            last_accessed=now,
            embedding=vector,
            source_session=source_session,
            about=candidate.about,
        )
        if decision.action == "supersede":
            assert decision.target_id is not None
            old = self.store.get(ns, [decision.target_id])
            if old:
                old_linked, memory = gate.link_supersession(old[0], memory)
                self.store.upsert(ns, [memory, old_linked])
                return replace(base, memory_id=memory.id), memory
            base = replace(base, action="write", reason="superseded memory vanished; written")
        self.store.upsert(ns, [memory])
        return replace(base, memory_id=memory.id), memory
