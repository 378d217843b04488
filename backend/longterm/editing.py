"""Direct edits of long-term memories, outside the save gate: what the memory UI, the
REST API, MCP and the turn's reinforcement do to memories one by one, and a
namespace's reset (``docs/memory-model.md``).

Failure policy: an unknown id on ``update`` raises ``KeyError``; an embedder that is
down leaves a created or edited memory without a vector (``backfill`` gives it one
later); a store outage raises ``VectorStoreUnavailable`` to the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace

from backend.clock import Clock
from backend.longterm.embedding import TolerantEmbedder
from backend.longterm.locks import NamespaceLocks
from backend.memory import gate
from backend.memory.subjects import still_about
from backend.memory.types import Memory, Namespace, clamp01, normalise_category
from backend.stores.vector_port import VectorStore

log = logging.getLogger(__name__)


class MemoryEditor:
    """Create, read, edit, reinforce and delete memories of one store."""

    def __init__(
        self,
        store: VectorStore,
        embedder: TolerantEmbedder,
        clock: Clock,
        locks: NamespaceLocks,
        *,
        new_id: Callable[[], str],
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.locks = locks
        self.new_id = new_id

    def get(self, ns: Namespace, memory_id: str) -> Memory | None:
        found = self.store.get(ns, [memory_id])
        return found[0] if found else None

    def new_memory(
        self,
        content: str,
        *,
        category: str = "general",
        importance: float = 0.5,
        pinned: bool = False,
        source_session: str | None = None,
    ) -> Memory:
        """A fresh memory stamped now (not stored)."""
        now = self.clock.now()
        return Memory(
            id=self.new_id(),
            content=content.strip(),
            category=normalise_category(category),
            importance=clamp01(importance),
            created_at=now,
            last_accessed=now,
            pinned=pinned,
            source_session=source_session,
        )

    def create(self, ns: Namespace, memory: Memory) -> Memory:
        """Store a fully formed memory as is (UI/API create, import): no gate, embedded now."""
        if memory.embedding is None:
            vectors = self.embedder.embed([memory.content])
            if vectors is not None:
                memory = replace(memory, embedding=vectors[0])
        self.store.upsert(ns, [memory])
        return memory

    def update(
        self,
        ns: Namespace,
        memory_id: str,
        *,
        content: str | None = None,
        importance: float | None = None,
        category: str | None = None,
        pinned: bool | None = None,
    ) -> Memory:
        """Edit a memory; a content edit re-embeds it. ``KeyError`` if it does not exist."""
        with self.locks(ns):
            found = self.store.get(ns, [memory_id])
            if not found:
                raise KeyError(memory_id)
            memory = found[0]
            if content is not None and content.strip() and content.strip() != memory.content:
                vectors = self.embedder.embed([content.strip()])
                memory = replace(
                    memory,
                    content=content.strip(),
                    embedding=None if vectors is None else vectors[0],
                    about=still_about(memory.about, content.strip()),
                )
            if importance is not None:
                memory = replace(memory, importance=clamp01(importance))
            if category is not None:
                memory = replace(memory, category=normalise_category(category))
            if pinned is not None:
                memory = replace(memory, pinned=pinned)
            self.store.upsert(ns, [memory])
            return memory

    def reinforce(self, ns: Namespace, ids: Iterable[str]) -> int:
        """Mark memories as used in a reply: access count + 1, last access now."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return 0
        now = self.clock.now()
        with self.locks(ns):
            memories = self.store.get(ns, wanted)
            self.store.upsert(ns, [gate.reinforce(m, now) for m in memories])
        return len(memories)

    def forget_namespace(self, ns: Namespace) -> int:
        """Drop the namespace: every memory, its vectors and (through the store, when one
        is kept) its lexical index entries. Returns how many memories there were."""
        # Under the namespace's write lock: a concurrent gate write must not land half-way.
        with self.locks(ns):
            count = self.store.count(ns)
            self.store.drop_namespace(ns)
        return count
