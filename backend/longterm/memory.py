"""Long-term memory: one ``LongTermMemory`` per process, over a ``VectorStore`` and an
``Embedder``, for every namespace.

This is where the pure engine meets storage. ``LongTermMemory`` holds what its parts
share (store, embedder, clock, policies, per-namespace locks, the activation threads),
does the small operations itself (embedding, reinforcement, editing) and delegates, one
line a method, to the modules that do the rest:
- ``backend.longterm.gated_write``: the save gate's write path (``write``);
- ``backend.longterm.activation``: activation retrieval (``activate``, ``candidate_pool``,
  ``lexical_candidates``, ``corpus_stats``, ``start_query_embedding``);
- ``backend.longterm.upkeep``: ``backfill`` and ``decay_pass``;
- ``backend.longterm.transfer``: ``export_jsonl`` and ``import_jsonl``.
Their result types are importable from here as before.

When the activation policy asks for lexical candidates (``lexical_pool > 0``, the hybrid
default), a ``LexicalIndex`` is kept beside the store (``backend.stores.lexical_index``):
the store is wrapped in an ``IndexedVectorStore`` so that every write mirrors into the
index, and each namespace is loaded into it on its first activation.

Failure policy:
- an embedder that is down costs the cosine channel, never a write: the memory is
  stored without a vector and ``backfill`` gives it one later;
- activation never raises for runtime trouble: an unreachable store yields an empty
  activation with ``degraded`` set (the turn answers without recalled memories);
- bad arguments (unknown ids on update, invalid values) raise ``ValueError``/``KeyError``;
- a store outage in the middle of ``write`` raises ``WriteInterrupted`` (a
  ``VectorStoreUnavailable``) carrying what was applied and what was not, so the caller
  can queue the rest in the ``outbox`` (``backend.longterm.outbox``) and lose nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from backend.clock import Clock
from backend.embeddings.port import Embedder, EmbedderUnavailable
from backend.longterm import activation as activation_retrieval
from backend.longterm import gated_write, upkeep
from backend.longterm import transfer as jsonl_transfer
from backend.longterm.activation import Activation, QueryEmbedding
from backend.longterm.gated_write import WriteInterrupted, WriteOutcome
from backend.longterm.outbox import WriteOutbox
from backend.longterm.transfer import ImportReport
from backend.longterm.upkeep import DecayReport
from backend.memory import gate
from backend.memory.hybrid import CorpusStats
from backend.memory.types import (
    ActivationPolicy,
    Candidate,
    GatePolicy,
    Memory,
    Namespace,
    RetrievalPolicy,
    clamp01,
    normalise_category,
)
from backend.stores.lexical_index import IndexedVectorStore, InMemoryLexicalIndex, LexicalIndex
from backend.stores.vector_port import VectorStore

__all__ = [
    "Activation",
    "DecayReport",
    "ImportReport",
    "LongTermMemory",
    "QueryEmbedding",
    "WriteInterrupted",
    "WriteOutcome",
]

log = logging.getLogger(__name__)


def _new_id() -> str:
    return uuid.uuid4().hex


class LongTermMemory:
    """The long-term memory of every namespace, on one store and one embedder."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder | None,
        clock: Clock,
        *,
        gate_policy: GatePolicy = GatePolicy(),
        activation: ActivationPolicy = ActivationPolicy(),
        id_factory: Callable[[], str] = _new_id,
        lexical: LexicalIndex | None = None,
        outbox: WriteOutbox | None = None,
    ) -> None:
        if lexical is None and activation.lexical_pool > 0:
            lexical = InMemoryLexicalIndex()
        self.lexical = lexical
        self.store: VectorStore = store if lexical is None else IndexedVectorStore(store, lexical)
        self.embedder = embedder
        self.clock = clock
        self.gate_policy = gate_policy
        self.activation = activation
        self._new_id = id_factory
        self.outbox = outbox  # where writes wait while the store is down (None: nowhere)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._activation_threads: ThreadPoolExecutor | None = None

    # --- embeddings --------------------------------------------------------------------

    @property
    def embedding_model(self) -> str | None:
        return None if self.embedder is None else self.embedder.model

    def embed(self, texts: Sequence[str]) -> np.ndarray | None:
        """Vectors for ``texts``, or ``None`` when there is no embedder or it is down."""
        if self.embedder is None or not texts:
            return None
        try:
            return self.embedder.embed(list(texts))
        except EmbedderUnavailable as exc:
            log.warning("embedder unavailable, continuing without vectors: %s", exc)
            return None

    def _lock(self, ns: Namespace) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(ns.key, threading.Lock())

    # --- activation (backend.longterm.activation) -----------------------------------------

    def activation_threads(self) -> ThreadPoolExecutor:
        """Threads for work that overlaps within one activation (the query embedding, the
        ANN query); several, so that concurrent turns do not queue behind each other."""
        with self._locks_guard:
            if self._activation_threads is None:
                self._activation_threads = ThreadPoolExecutor(4, thread_name_prefix="ltm-activate")
            return self._activation_threads

    def lexical_candidates(self, ns: Namespace, query_text: str) -> list[Memory]:
        return activation_retrieval.lexical_candidates(self, ns, query_text)

    def candidate_pool(
        self,
        ns: Namespace,
        query_text: str,
        query_vector: np.ndarray | None,
        *,
        lexical: list[Memory] | None = None,
    ) -> list[Memory]:
        return activation_retrieval.candidate_pool(
            self, ns, query_text, query_vector, lexical=lexical
        )

    def activate(
        self,
        ns: Namespace,
        query_text: str,
        *,
        target_emotion: str | None = None,
        query_vector: np.ndarray | None = None,
        embed_query: bool = True,
        policy: RetrievalPolicy | None = None,
        pending_embedding: QueryEmbedding | None = None,
    ) -> Activation:
        return activation_retrieval.activate(
            self,
            ns,
            query_text,
            target_emotion=target_emotion,
            query_vector=query_vector,
            embed_query=embed_query,
            policy=policy,
            pending_embedding=pending_embedding,
        )

    def start_query_embedding(self, text: str) -> QueryEmbedding | None:
        return activation_retrieval.start_query_embedding(self, text)

    def corpus_stats(
        self, ns: Namespace, query_text: str, pool: Sequence[Memory]
    ) -> CorpusStats | None:
        return activation_retrieval.corpus_stats(self, ns, query_text, pool)

    # --- the write path ----------------------------------------------------------------

    def reinforce(self, ns: Namespace, ids: Iterable[str]) -> int:
        """Mark memories as used in a reply: access count + 1, last access now."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return 0
        now = self.clock.now()
        with self._lock(ns):
            memories = self.store.get(ns, wanted)
            self.store.upsert(ns, [gate.reinforce(m, now) for m in memories])
        return len(memories)

    def write(
        self,
        ns: Namespace,
        candidates: Sequence[Candidate],
        *,
        recalled: Sequence[Memory] = (),
        source_session: str | None = None,
        gate_policy: GatePolicy | None = None,
    ) -> list[WriteOutcome]:
        """The save gate over ``candidates``, in order (``backend.longterm.gated_write``)."""
        return gated_write.write(
            self,
            ns,
            candidates,
            recalled=recalled,
            source_session=source_session,
            gate_policy=gate_policy,
        )

    # --- editing -----------------------------------------------------------------------

    def create(self, ns: Namespace, memory: Memory) -> Memory:
        """Store a fully formed memory as is (UI/API create, import): no gate, embedded now."""
        if memory.embedding is None:
            vectors = self.embed([memory.content])
            if vectors is not None:
                memory = replace(memory, embedding=vectors[0])
        self.store.upsert(ns, [memory])
        return memory

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
            id=self._new_id(),
            content=content.strip(),
            category=normalise_category(category),
            importance=clamp01(importance),
            created_at=now,
            last_accessed=now,
            pinned=pinned,
            source_session=source_session,
        )

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
        with self._lock(ns):
            found = self.store.get(ns, [memory_id])
            if not found:
                raise KeyError(memory_id)
            memory = found[0]
            if content is not None and content.strip() and content.strip() != memory.content:
                vectors = self.embed([content.strip()])
                memory = replace(
                    memory,
                    content=content.strip(),
                    embedding=None if vectors is None else vectors[0],
                )
            if importance is not None:
                memory = replace(memory, importance=clamp01(importance))
            if category is not None:
                memory = replace(memory, category=normalise_category(category))
            if pinned is not None:
                memory = replace(memory, pinned=pinned)
            self.store.upsert(ns, [memory])
            return memory

    def delete(self, ns: Namespace, memory_id: str) -> bool:
        return self.store.delete(ns, [memory_id]) > 0

    def get(self, ns: Namespace, memory_id: str) -> Memory | None:
        found = self.store.get(ns, [memory_id])
        return found[0] if found else None

    def version_chain(self, ns: Namespace, memory_id: str) -> list[Memory]:
        """Oldest → newest versions of the fact ``memory_id`` belongs to (cycles are cut)."""
        memory = self.get(ns, memory_id)
        if memory is None:
            return []
        seen = {memory.id}
        older: list[Memory] = []
        cursor = memory
        while cursor.supersedes and cursor.supersedes not in seen:
            previous = self.get(ns, cursor.supersedes)
            if previous is None:
                break
            seen.add(previous.id)
            older.insert(0, previous)
            cursor = previous
        newer: list[Memory] = []
        cursor = memory
        while cursor.superseded_by and cursor.superseded_by not in seen:
            following = self.get(ns, cursor.superseded_by)
            if following is None:
                break
            seen.add(following.id)
            newer.append(following)
            cursor = following
        return [*older, memory, *newer]

    # --- upkeep (backend.longterm.upkeep) and export/import (backend.longterm.transfer)

    def backfill(self, ns: Namespace, limit: int = 256) -> int:
        return upkeep.backfill(self, ns, limit)

    def decay_pass(self, ns: Namespace) -> DecayReport:
        return upkeep.decay_pass(self, ns)

    def export_jsonl(self, ns: Namespace) -> Iterator[str]:
        return jsonl_transfer.export_jsonl(self, ns)

    def import_jsonl(self, ns: Namespace, lines: Iterable[str]) -> ImportReport:
        return jsonl_transfer.import_jsonl(self, ns, lines)
