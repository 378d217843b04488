"""Upkeep of a namespace: vectors for memories stored without one, and the decay pass
that deletes faded memories (``docs/memory-model.md``; run by the maintenance loop).

Failure policy: an embedder that is still down backfills nothing (``0``, tried again on
the next pass); a store outage raises ``VectorStoreUnavailable`` to the caller (the
maintenance loop logs it and tries again later).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from backend.clock import Clock
from backend.longterm.embedding import TolerantEmbedder
from backend.longterm.locks import NamespaceLocks
from backend.memory.decay import should_fade
from backend.memory.types import Namespace
from backend.stores.vector_port import VectorStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DecayReport:
    checked: int = 0
    faded: int = 0
    pinned_kept: int = 0


class Upkeep:
    """Backfill and decay over one store, under the namespaces' write locks."""

    def __init__(
        self, store: VectorStore, embedder: TolerantEmbedder, clock: Clock, locks: NamespaceLocks
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.locks = locks

    def backfill(self, ns: Namespace, limit: int = 256) -> int:
        """Give vectors to memories stored without one; returns how many got one."""
        missing = self.store.missing_vectors(ns, limit)
        if not missing:
            return 0
        vectors = self.embedder.embed([m.content for m in missing])
        if vectors is None:
            return 0
        with self.locks(ns):
            # Read again under the lock: an edit meanwhile may have embedded or removed one.
            current = {m.id: m for m in self.store.get(ns, [m.id for m in missing])}
            updated = [
                replace(current[m.id], embedding=vectors[i])
                for i, m in enumerate(missing)
                if m.id in current and current[m.id].embedding is None
            ]
            self.store.upsert(ns, updated)
        return len(updated)

    def decay_pass(self, ns: Namespace) -> DecayReport:
        """Delete memories whose strength fell below the fade threshold, never pinned ones."""
        now = self.clock.now()
        checked = pinned_kept = 0
        fading: list[str] = []
        for memory in self.store.iter_all(ns):
            checked += 1
            if should_fade(memory, now):
                fading.append(memory.id)
            elif memory.pinned and should_fade(replace(memory, pinned=False), now):
                pinned_kept += 1
        if fading:
            with self.locks(ns):
                self.store.delete(ns, fading)
            log.info("decay pass %s: %d of %d faded", ns.key, len(fading), checked)
        return DecayReport(checked=checked, faded=len(fading), pinned_kept=pinned_kept)
