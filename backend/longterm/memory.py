"""Long-term memory: one ``LongTermMemory`` per process, over a ``VectorStore`` and an
``Embedder``, for every namespace.

This is where the pure engine meets storage, and the one public face of long-term
memory: the turn, the web layer, MCP and the benches call it and nothing behind it.
``LongTermMemory`` builds its parts, hands each what it needs, and delegates to them:
- ``activation.ActivationRetriever``: activation retrieval;
- ``gated_write.GatedWriter``: the save gate's write path;
- ``outage.OutageQueue``: writes queued in the ``outbox`` while the store is down;
- ``editing.MemoryEditor``: create, edit, reinforce, delete, a namespace's reset;
- ``versions.VersionChains``: version chains, and deletions that splice them;
- ``upkeep.Upkeep``: backfill and decay; ``transfer.JsonlTransfer``: JSONL export/import.
They share the store, the embedder (``embedding.TolerantEmbedder``), the clock and the
per-namespace write locks (``locks.NamespaceLocks``); none of them imports this module.
The result types are importable from here as before.

When the activation policy asks for lexical candidates (``lexical_pool > 0``, the hybrid
default), a ``LexicalIndex`` is kept beside the store (``backend.stores.lexical_index``):
the store is wrapped in an ``IndexedVectorStore`` so that every write mirrors into the
index, and each namespace is loaded into it on its first activation.

Failure policy (``docs/reliability.md``):
- an embedder that is down costs the cosine channel, never a write: the memory is
  stored without a vector and ``backfill`` gives it one later;
- activation never raises for runtime trouble: an unreachable store yields an empty
  activation with ``degraded`` set (the turn answers without recalled memories);
- bad arguments (unknown ids on update, invalid values) raise ``ValueError``/``KeyError``;
- a store outage in the middle of ``write`` raises ``WriteInterrupted`` (a
  ``VectorStoreUnavailable``) carrying what was applied and what was not;
  ``write_or_queue`` queues the rest in the outbox instead, and loses nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from backend.clock import Clock
from backend.embeddings.port import Embedder
from backend.longterm.activation import (
    Activation,
    ActivationRetriever,
    EntityEdits,
    QueryEmbedding,
)
from backend.longterm.editing import MemoryEditor
from backend.longterm.embedding import TolerantEmbedder
from backend.longterm.gated_write import GatedWriter, WriteInterrupted, WriteOutcome
from backend.longterm.locks import NamespaceLocks
from backend.longterm.outage import OutageQueue
from backend.longterm.outbox import WriteOutbox
from backend.longterm.rerank_pace import RerankPace
from backend.longterm.transfer import ImportReport, JsonlTransfer
from backend.longterm.upkeep import DecayReport, Upkeep
from backend.longterm.versions import VersionChains
from backend.memory.hybrid import CorpusStats
from backend.memory.rerank import Reranker
from backend.memory.types import (
    ActivationPolicy,
    Candidate,
    GatePolicy,
    Memory,
    Namespace,
    RetrievalPolicy,
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
        entity_edits: EntityEdits | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        if lexical is None and activation.lexical_pool > 0:
            lexical = InMemoryLexicalIndex()
        self._lexical = lexical
        # Every part gets this store, so that every write mirrors into the lexical index.
        self._store: VectorStore = store if lexical is None else IndexedVectorStore(store, lexical)
        self._clock = clock
        vectors = TolerantEmbedder(embedder)
        locks = NamespaceLocks()
        self._vectors = vectors
        self._retriever = ActivationRetriever(
            self._store, vectors, clock, activation, lexical=lexical,
            entity_edits=entity_edits, reranker=reranker,
        )  # fmt: skip
        self._writer = GatedWriter(
            self._store, vectors, clock, locks, gate_policy,
            neighbours=activation.gate_neighbours, new_id=id_factory,
        )  # fmt: skip
        # Where writes wait while the store is down (None: nowhere, an outage raises).
        self._outage = None if outbox is None else OutageQueue(outbox, clock)
        self._editor = MemoryEditor(self._store, vectors, clock, locks, new_id=id_factory)
        self._versions = VersionChains(self._store, locks)
        self._upkeep = Upkeep(self._store, vectors, clock, locks)
        self._transfer = JsonlTransfer(self._store, vectors, locks)

    # --- what the parts share, and the policies ----------------------------------------

    @property
    def store(self) -> VectorStore:
        """The store every part uses (mirrored into ``lexical`` when one is kept)."""
        return self._store

    @property
    def lexical(self) -> LexicalIndex | None:
        return self._lexical

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def embedder(self) -> Embedder | None:
        return self._vectors.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder | None) -> None:
        self._vectors.embedder = embedder

    @property
    def reranker(self) -> Reranker | None:
        """The cross-encoder of activation's reranking stage (``None``: the stage is off)."""
        return self._retriever.reranker

    @reranker.setter
    def reranker(self, reranker: Reranker | None) -> None:
        self._retriever.reranker = reranker

    @property
    def rerank_pace(self) -> RerankPace:
        """The cross-encoder's recent pace, which cuts its pairs to the time budget."""
        return self._retriever.pace

    @property
    def activation(self) -> ActivationPolicy:
        """The activation policy (also the gate's neighbour count); may be replaced."""
        return self._retriever.policy

    @activation.setter
    def activation(self, policy: ActivationPolicy) -> None:
        self._retriever.policy = policy
        self._writer.neighbours = policy.gate_neighbours

    @property
    def gate_policy(self) -> GatePolicy:
        """The save gate's thresholds when a write names none; may be replaced."""
        return self._writer.policy

    @gate_policy.setter
    def gate_policy(self, policy: GatePolicy) -> None:
        self._writer.policy = policy

    @property
    def entity_edits(self) -> EntityEdits | None:
        """Where activation reads the user's edits of a namespace's entity table (the
        session store in the app); ``None``: the derived table as it is."""
        return self._retriever.entity_edits

    @entity_edits.setter
    def entity_edits(self, source: EntityEdits | None) -> None:
        self._retriever.entity_edits = source

    @property
    def outbox(self) -> WriteOutbox | None:
        """Where writes wait while the store is down (``None``: nowhere)."""
        return None if self._outage is None else self._outage.outbox

    @property
    def embedding_model(self) -> str | None:
        return self._vectors.model

    def embed(self, texts: Sequence[str]) -> np.ndarray | None:
        """Vectors for ``texts``, or ``None`` when there is no embedder or it is down."""
        return self._vectors.embed(texts)

    # --- activation --------------------------------------------------------------------

    def activation_threads(self) -> ThreadPoolExecutor:
        """Threads for work that overlaps within one activation (the query embedding, the
        ANN query); several, so that concurrent turns do not queue behind each other."""
        return self._retriever.threads()

    def lexical_candidates(self, ns: Namespace, query_text: str) -> list[Memory]:
        return self._retriever.lexical_candidates(ns, query_text)

    def candidate_pool(
        self,
        ns: Namespace,
        query_text: str,
        query_vector: np.ndarray | None,
        *,
        lexical: list[Memory] | None = None,
    ) -> list[Memory]:
        return self._retriever.candidate_pool(ns, query_text, query_vector, lexical=lexical)

    def neighbours(self, ns: Namespace, query_text: str, query_vector: np.ndarray) -> list[Memory]:
        """The query's ANN neighbours (``ActivationRetriever.neighbours``)."""
        return self._retriever.neighbours(ns, query_text, query_vector)

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
        """The memories to place in this turn's context (``ActivationRetriever.activate``)."""
        return self._retriever.activate(
            ns,
            query_text,
            target_emotion=target_emotion,
            query_vector=query_vector,
            embed_query=embed_query,
            policy=policy,
            pending_embedding=pending_embedding,
        )

    def start_query_embedding(self, text: str) -> QueryEmbedding | None:
        return self._retriever.start_query_embedding(text)

    def corpus_stats(
        self, ns: Namespace, query_text: str, pool: Sequence[Memory]
    ) -> CorpusStats | None:
        return self._retriever.corpus_stats(ns, query_text, pool)

    # --- the write path ----------------------------------------------------------------

    def write(
        self,
        ns: Namespace,
        candidates: Sequence[Candidate],
        *,
        recalled: Sequence[Memory] = (),
        source_session: str | None = None,
        gate_policy: GatePolicy | None = None,
    ) -> list[WriteOutcome]:
        """The save gate over ``candidates``, in order; raises ``WriteInterrupted`` on an
        outage (``GatedWriter.write``)."""
        return self._writer.write(
            ns, candidates, recalled=recalled, source_session=source_session,
            gate_policy=gate_policy,
        )  # fmt: skip

    def write_or_queue(
        self,
        ns: Namespace,
        candidates: Sequence[Candidate],
        *,
        recalled: Sequence[Memory] = (),
        source_session: str | None = None,
        gate_policy: GatePolicy | None = None,
    ) -> list[WriteOutcome]:
        """``write``, queueing in the outbox what the store could not take (``queue``
        outcomes; ``OutageQueue``). Without an outbox, or when it cannot be written,
        raises what ``write`` raises."""
        if self._outage is None:
            return self.write(
                ns, candidates, recalled=recalled, source_session=source_session,
                gate_policy=gate_policy,
            )  # fmt: skip
        return self._outage.write_or_queue(
            self.write, ns, candidates, recalled=recalled, source_session=source_session,
            gate_policy=gate_policy,
        )  # fmt: skip

    def reinforce(self, ns: Namespace, ids: Iterable[str]) -> int:
        """Mark memories as used in a reply: access count + 1, last access now."""
        return self._editor.reinforce(ns, ids)

    # --- editing -----------------------------------------------------------------------

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
        return self._editor.new_memory(
            content, category=category, importance=importance, pinned=pinned,
            source_session=source_session,
        )  # fmt: skip

    def create(self, ns: Namespace, memory: Memory) -> Memory:
        """Store a fully formed memory as is (UI/API create, import): no gate, embedded now."""
        return self._editor.create(ns, memory)

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
        return self._editor.update(
            ns, memory_id, content=content, importance=importance, category=category,
            pinned=pinned,
        )  # fmt: skip

    def get(self, ns: Namespace, memory_id: str) -> Memory | None:
        return self._editor.get(ns, memory_id)

    def delete(self, ns: Namespace, memory_id: str) -> bool:
        """Delete one memory, splicing its version chain (``delete_memories``): deleting a
        fact's newest version makes the one before it live again."""
        return self.delete_memories(ns, [memory_id]) > 0

    def delete_memories(self, ns: Namespace, ids: Iterable[str]) -> int:
        """Delete memories, splicing their version chains around them (an older version
        left without a newer one becomes live again); returns how many existed."""
        return self._versions.delete(ns, ids)

    def forget_namespace(self, ns: Namespace) -> int:
        """Drop every memory of ``ns`` (and its lexical index entries); returns how many
        there were."""
        return self._editor.forget_namespace(ns)

    def version_chain(self, ns: Namespace, memory_id: str) -> list[Memory]:
        """Oldest → newest versions of the fact ``memory_id`` belongs to (cycles are cut)."""
        return self._versions.chain(ns, memory_id)

    # --- upkeep, export and import -----------------------------------------------------

    def backfill(self, ns: Namespace, limit: int = 256) -> int:
        """Give vectors to memories stored without one; returns how many got one."""
        return self._upkeep.backfill(ns, limit)

    def decay_pass(self, ns: Namespace) -> DecayReport:
        """Delete faded memories, never pinned ones."""
        return self._upkeep.decay_pass(ns)

    def export_jsonl(self, ns: Namespace) -> Iterator[str]:
        """Every memory of ``ns`` as JSON lines, oldest first."""
        return self._transfer.export_jsonl(ns)

    def import_jsonl(self, ns: Namespace, lines: Iterable[str]) -> ImportReport:
        """Restore memories from JSON lines as they are (no gate)."""
        return self._transfer.import_jsonl(ns, lines)
