"""Long-term memory: the save gate's write path and activation retrieval over a ``VectorStore``.

This is where the pure engine meets storage: embeddings are computed, neighbours are
read, the gate decides and the decision is applied; activation gathers a candidate pool
(ANN neighbours ∪ salient memories ∪ lexical-index or keyword matches) and hands it to
``backend.memory.retrieve``.

When the activation policy asks for lexical candidates (``lexical_pool > 0``, the hybrid
default), a ``LexicalIndex`` is kept beside the store (``backend.stores.lexical_index``):
the store is wrapped in an ``IndexedVectorStore`` so that every write below mirrors into
the index, and each namespace is loaded into it on its first activation.

Failure policy:
- an embedder that is down costs the cosine channel, never a write: the memory is
  stored without a vector and ``backfill`` gives it one later;
- activation never raises for runtime trouble: an unreachable store yields an empty
  activation with ``degraded`` set (the turn answers without recalled memories);
- bad arguments (unknown ids on update, invalid values) raise ``ValueError``/``KeyError``;
- a store outage in the middle of ``write`` raises ``WriteInterrupted`` (a
  ``VectorStoreUnavailable``) carrying what was applied and what was not, so the caller
  can queue the rest in the ``outbox`` (``backend.stores.outbox``) and lose nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Literal

import numpy as np

from backend.clock import Clock
from backend.embeddings.port import Embedder, EmbedderUnavailable
from backend.memory import gate
from backend.memory.decay import should_fade
from backend.memory.hybrid import CorpusStats, lexical_tokens, memory_tokens
from backend.memory.keywords import extract_keywords
from backend.memory.retrieve import Retrieval, retrieve
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
from backend.stores.memory_jsonl import InvalidMemoryLine, decode_line, encode_line
from backend.stores.outbox import WriteOutbox
from backend.stores.vector_port import VectorStore, VectorStoreUnavailable

log = logging.getLogger(__name__)

# A query embedding in flight: (vector or None, embedding ms, perf_counter when done).
QueryEmbedding = Future[tuple[np.ndarray | None, float, float]]


@dataclass(frozen=True, slots=True)
class Activation:
    retrieval: Retrieval
    query_vector: np.ndarray | None
    embed_ms: float
    search_ms: float
    pool_size: int
    degraded: str | None = None

    @property
    def memories(self) -> list[Memory]:
        return [item.memory for item in self.retrieval.items]


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


@dataclass(frozen=True, slots=True)
class ImportReport:
    written: int = 0
    duplicates: int = 0
    invalid: int = 0
    errors: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class DecayReport:
    checked: int = 0
    faded: int = 0
    pinned_kept: int = 0


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
        self._ann_worker: ThreadPoolExecutor | None = None

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

    # --- activation --------------------------------------------------------------------

    def _lexical_ready(self, ns: Namespace) -> LexicalIndex | None:
        """The lexical index with ``ns`` loaded, or ``None`` when none is kept."""
        if self.lexical is None or self.activation.lexical_pool <= 0:
            return None
        self.lexical.ensure(ns, lambda: self.store.iter_all(ns))
        return self.lexical

    def lexical_candidates(self, ns: Namespace, query_text: str) -> list[Memory]:
        """The lexical index's BM25 matches and salient memories, fetched in one ``get``
        (needs no query vector, so it can run while the query is being embedded)."""
        policy = self.activation
        index = self._lexical_ready(ns)
        if index is None:
            return []
        since = self.clock.now() - timedelta(days=policy.salient_days)
        hits = index.search(
            ns, lexical_tokens(query_text), policy.lexical_pool,
            min_importance=policy.min_importance,
        )  # fmt: skip
        salient_ids = index.salient(
            ns, since=since, min_importance=policy.salient_min_importance, n=policy.salient_n
        )
        wanted = [memory_id for memory_id, _score in hits] + list(salient_ids or ())
        extra = self.store.get(ns, wanted) if wanted else []
        if salient_ids is None:
            extra += self.store.salient(
                ns, since=since, min_importance=policy.salient_min_importance,
                n=policy.salient_n,
            )  # fmt: skip
        return extra

    def candidate_pool(
        self,
        ns: Namespace,
        query_text: str,
        query_vector: np.ndarray | None,
        *,
        lexical: list[Memory] | None = None,
    ) -> list[Memory]:
        """ANN neighbours ∪ salient memories ∪ lexical matches, live and above the floor.

        With a lexical index (``lexical_pool > 0``): the ANN query runs in a worker thread
        while the index picks the ``lexical_pool`` best BM25 candidates and the salient
        ids, which one ``get`` fetches (``lexical``: already fetched, see ``activate``).
        Without one: ANN neighbours and the store's
        salient memories, plus (without a query vector only) a bounded text scan per
        query keyword.
        """
        policy = self.activation
        since = self.clock.now() - timedelta(days=policy.salient_days)
        index = self._lexical_ready(ns)
        found: dict[str, Memory] = {}
        if index is None:
            if query_vector is not None:
                for memory, _similarity in self.store.query(ns, query_vector, policy.pool):
                    found[memory.id] = memory
            for memory in self.store.salient(
                ns, since=since, min_importance=policy.salient_min_importance,
                n=policy.salient_n,
            ):  # fmt: skip
                found.setdefault(memory.id, memory)
            if query_vector is None and policy.keyword_n > 0:
                # Without a query vector the pool would be salient memories only: add
                # memories whose text contains a query keyword (a bounded scan per keyword).
                for keyword in extract_keywords(query_text)[:5]:
                    for memory in self.store.list(
                        ns, text=keyword, limit=policy.keyword_n, include_superseded=False
                    ):
                        found.setdefault(memory.id, memory)
        else:
            ann = None
            if query_vector is not None:
                ann = self._worker().submit(self.store.query, ns, query_vector, policy.pool)
            try:
                if lexical is None:
                    lexical = self.lexical_candidates(ns, query_text)
            finally:
                neighbours = ann.result() if ann is not None else []
            for memory, _similarity in neighbours:
                found[memory.id] = memory
            for memory in lexical:
                found.setdefault(memory.id, memory)
        return [
            m
            for m in found.values()
            if not m.is_superseded and m.importance >= policy.min_importance
        ]

    def _worker(self) -> ThreadPoolExecutor:
        """Threads for work that overlaps within one activation (the query embedding, the
        ANN query); several, so that concurrent turns do not queue behind each other."""
        with self._locks_guard:
            if self._ann_worker is None:
                self._ann_worker = ThreadPoolExecutor(4, thread_name_prefix="ltm-activate")
            return self._ann_worker

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
        """Retrieve the memories to place in this turn's context, with score breakdowns.

        ``pending_embedding``: the query's embedding already started by
        ``start_query_embedding`` (the turn starts it before its session I/O).
        """
        started = time.perf_counter()
        embed_ms = 0.0
        lexical: list[Memory] | None = None
        waited_ms = 0.0
        try:
            if query_vector is None and embed_query and self.embedder is not None:
                # The query is embedded in a worker while the lexical lookups (which need
                # no vector) run here: the two overlap instead of adding up.
                embedding = pending_embedding or self.start_query_embedding(query_text)
                try:
                    if self._lexical_ready(ns) is not None:
                        lexical = self.lexical_candidates(ns, query_text)
                finally:
                    query_vector, embed_ms, embedded_at = embedding.result()
                    waited_ms = max(0.0, (embedded_at - started) * 1e3)
            pool = self.candidate_pool(ns, query_text, query_vector, lexical=lexical)
        except VectorStoreUnavailable as exc:
            log.warning("long-term store unavailable, activating nothing: %s", exc)
            return Activation(
                Retrieval(items=()), query_vector, embed_ms, 0.0, 0,
                degraded=f"store unavailable: {exc}",
            )  # fmt: skip
        chosen = policy or self.activation.retrieval
        stats = self.corpus_stats(ns, query_text, pool) if chosen.mode == "hybrid" else None
        result = retrieve(
            pool,
            now=self.clock.now(),
            query_text=query_text,
            query_vector=query_vector,
            target_emotion=target_emotion,
            policy=chosen,
            stats=stats,
        )
        done = time.perf_counter()
        degraded = None if query_vector is not None else "no query vector: keywords only"
        # search_ms: the activation's wall time not spent waiting for the embedding (the
        # two overlap; an embedding started early may cost the activation no wait at all).
        search_ms = max(0.0, (done - started) * 1e3 - waited_ms)
        return Activation(result, query_vector, embed_ms, search_ms, len(pool), degraded=degraded)

    def start_query_embedding(self, text: str) -> QueryEmbedding | None:
        """Embed ``text`` in the activation worker; hand the future to ``activate``.
        ``None`` without an embedder. Never raises: an embedder that is down resolves
        to no vector (keywords only)."""
        if self.embedder is None:
            return None
        return self._worker().submit(self._timed_embed, text)

    def _timed_embed(self, text: str) -> tuple[np.ndarray | None, float, float]:
        """(vector or ``None``, embedding ms, ``perf_counter`` when it was ready)."""
        started = time.perf_counter()
        vectors = self.embed([text])
        done = time.perf_counter()
        return (None if vectors is None else vectors[0]), (done - started) * 1e3, done

    def corpus_stats(
        self, ns: Namespace, query_text: str, pool: Sequence[Memory]
    ) -> CorpusStats | None:
        """The namespace's BM25 statistics for the query's and the pool's tokens, from the
        lexical index; ``None`` (the scorer then uses the pool's own) when none is kept."""
        if self.lexical is None or self.activation.lexical_pool <= 0:
            return None
        tokens = set(lexical_tokens(query_text))
        for memory in pool:
            tokens.update(memory_tokens(memory))
        stats = self.lexical.stats(ns, tokens)
        return stats if stats.n_docs > 0 else None

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
        """Pass each candidate through the save gate and apply the decision.

        ``gate_policy``: the thresholds to apply (a persona's); ``None``: ``self.gate_policy``.

        Candidates are processed in order, so a later candidate sees what an earlier one
        wrote (two restatements in one batch become one memory). A store outage raises
        ``WriteInterrupted`` with the outcomes so far and the candidates not applied.
        """
        if not candidates:
            return []
        vectors = self.embed([c.content for c in candidates])
        outcomes: list[WriteOutcome] = []
        with self._lock(ns):
            for index, candidate in enumerate(candidates):
                vector = None if vectors is None else vectors[index]
                try:
                    outcome = self._write_one(
                        ns, candidate, vector, recalled, source_session, gate_policy
                    )
                except VectorStoreUnavailable as exc:
                    raise WriteInterrupted(exc, outcomes, list(candidates[index:])) from exc
                outcomes.append(outcome)
        return outcomes

    def _neighbours(
        self, ns: Namespace, candidate: Candidate, vector: np.ndarray | None
    ) -> list[Memory]:
        if vector is not None:
            return [m for m, _ in self.store.query(ns, vector, self.activation.gate_neighbours)]
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
    ) -> WriteOutcome:
        neighbours = self._neighbours(ns, candidate, vector)
        if candidate.supersedes and candidate.supersedes not in {m.id for m in neighbours}:
            # The gate can only supersede what it sees: fetch an id named explicitly.
            neighbours += self.store.get(ns, [candidate.supersedes])
        decision = gate.decide(
            candidate,
            vector,
            recalled=recalled,
            neighbours=neighbours,
            policy=gate_policy or self.gate_policy,
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
            return base
        if decision.action == "reinforce":
            assert decision.target_id is not None
            targets = self.store.get(ns, [decision.target_id])
            if targets:
                reinforced = gate.reinforce(targets[0], now, importance=candidate.importance)
                self.store.upsert(ns, [reinforced])
            return replace(base, memory_id=decision.target_id)
        memory = Memory(
            id=self._new_id(),
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
        )
        if decision.action == "supersede":
            assert decision.target_id is not None
            old = self.store.get(ns, [decision.target_id])
            if old:
                old_linked, memory = gate.link_supersession(old[0], memory)
                self.store.upsert(ns, [memory, old_linked])
                return replace(base, memory_id=memory.id)
            base = replace(base, action="write", reason="superseded memory vanished; written")
        self.store.upsert(ns, [memory])
        return replace(base, memory_id=memory.id)

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

    # --- maintenance -------------------------------------------------------------------

    def backfill(self, ns: Namespace, limit: int = 256) -> int:
        """Give vectors to memories stored without one; returns how many got one."""
        missing = self.store.missing_vectors(ns, limit)
        if not missing:
            return 0
        vectors = self.embed([m.content for m in missing])
        if vectors is None:
            return 0
        with self._lock(ns):
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
            with self._lock(ns):
                self.store.delete(ns, fading)
            log.info("decay pass %s: %d of %d faded", ns.key, len(fading), checked)
        return DecayReport(checked=checked, faded=len(fading), pinned_kept=pinned_kept)

    # --- export / import ---------------------------------------------------------------

    def export_jsonl(self, ns: Namespace) -> Iterator[str]:
        """Every memory of the namespace as JSON lines (each ending in a newline)."""
        model = self.embedding_model
        for memory in sorted(self.store.iter_all(ns), key=lambda m: (m.created_at, m.id)):
            yield encode_line(memory, model) + "\n"

    def import_jsonl(self, ns: Namespace, lines: Iterable[str]) -> ImportReport:
        """Restore memories from JSON lines as they are (no gate): ids already present are
        skipped as duplicates, unreadable lines counted as invalid. Vectors made by another
        embedding model are dropped and re-embedded."""
        batch: list[Memory] = []
        errors: list[str] = []
        duplicates = invalid = 0
        seen: set[str] = set()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                memory, model = decode_line(line)
            except InvalidMemoryLine as exc:
                invalid += 1
                if len(errors) < 20:
                    errors.append(f"line {number}: {exc}")
                continue
            if model != self.embedding_model or (
                memory.embedding is not None
                and self.embedder is not None
                and memory.embedding.shape[0] != self.embedder.dim
            ):
                memory = replace(memory, embedding=None)
            if memory.id in seen:
                duplicates += 1
                continue
            seen.add(memory.id)
            batch.append(memory)
        existing = set()
        for start in range(0, len(batch), 500):
            ids = [m.id for m in batch[start : start + 500]]
            existing.update(m.id for m in self.store.get(ns, ids))
        fresh = [m for m in batch if m.id not in existing]
        duplicates += len(batch) - len(fresh)
        vectorless = [i for i, m in enumerate(fresh) if m.embedding is None]
        vectors = self.embed([fresh[i].content for i in vectorless])
        if vectors is not None:
            for row, index in enumerate(vectorless):
                fresh[index] = replace(fresh[index], embedding=vectors[row])
        with self._lock(ns):
            for start in range(0, len(fresh), 500):
                self.store.upsert(ns, fresh[start : start + 500])
        return ImportReport(len(fresh), duplicates, invalid, tuple(errors))
