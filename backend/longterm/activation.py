"""Activation retrieval for ``LongTermMemory``: the candidate pool and its ranking.

Activation gathers a candidate pool (ANN neighbours ∪ salient memories ∪ lexical-index or
keyword matches) and hands it to ``backend.memory.retrieve``. The query embedding, the
ANN query and the lexical lookups overlap in ``LongTermMemory.activation_threads``.

When the activation policy asks for lexical candidates (``lexical_pool > 0``, the hybrid
default), each namespace is loaded into the ``LexicalIndex`` kept beside the store on its
first activation.

The functions take the ``LongTermMemory`` and call back through its public methods, so
that what a caller sees of one (``ltm.lexical_candidates``, ``ltm.candidate_pool``, …) is
what activation uses.

Failure policy: activation never raises for runtime trouble: an unreachable store yields
an empty activation with ``degraded`` set (the turn answers without recalled memories);
an embedder that is down resolves the query embedding to no vector (keywords only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np

from backend.memory.hybrid import CorpusStats, lexical_tokens, memory_tokens
from backend.memory.keywords import extract_keywords
from backend.memory.retrieve import Retrieval, retrieve
from backend.memory.types import Memory, Namespace, RetrievalPolicy
from backend.stores.lexical_index import LexicalIndex
from backend.stores.vector_port import VectorStoreUnavailable

if TYPE_CHECKING:
    from backend.longterm.memory import LongTermMemory

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


def lexical_ready(ltm: LongTermMemory, ns: Namespace) -> LexicalIndex | None:
    """The lexical index with ``ns`` loaded, or ``None`` when none is kept."""
    if ltm.lexical is None or ltm.activation.lexical_pool <= 0:
        return None
    ltm.lexical.ensure(ns, lambda: ltm.store.iter_all(ns))
    return ltm.lexical


def lexical_candidates(ltm: LongTermMemory, ns: Namespace, query_text: str) -> list[Memory]:
    """The lexical index's BM25 matches and salient memories, fetched in one ``get``
    (needs no query vector, so it can run while the query is being embedded)."""
    policy = ltm.activation
    index = lexical_ready(ltm, ns)
    if index is None:
        return []
    since = ltm.clock.now() - timedelta(days=policy.salient_days)
    hits = index.search(
        ns, lexical_tokens(query_text), policy.lexical_pool,
        min_importance=policy.min_importance,
    )  # fmt: skip
    salient_ids = index.salient(
        ns, since=since, min_importance=policy.salient_min_importance, n=policy.salient_n
    )
    wanted = [memory_id for memory_id, _score in hits] + list(salient_ids or ())
    extra = ltm.store.get(ns, wanted) if wanted else []
    if salient_ids is None:
        extra += ltm.store.salient(
            ns, since=since, min_importance=policy.salient_min_importance,
            n=policy.salient_n,
        )  # fmt: skip
    return extra


def candidate_pool(
    ltm: LongTermMemory,
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
    policy = ltm.activation
    since = ltm.clock.now() - timedelta(days=policy.salient_days)
    index = lexical_ready(ltm, ns)
    found: dict[str, Memory] = {}
    if index is None:
        if query_vector is not None:
            for memory, _similarity in ltm.store.query(ns, query_vector, policy.pool):
                found[memory.id] = memory
        for memory in ltm.store.salient(
            ns, since=since, min_importance=policy.salient_min_importance,
            n=policy.salient_n,
        ):  # fmt: skip
            found.setdefault(memory.id, memory)
        if query_vector is None and policy.keyword_n > 0:
            # Without a query vector the pool would be salient memories only: add
            # memories whose text contains a query keyword (a bounded scan per keyword).
            for keyword in extract_keywords(query_text)[:5]:
                for memory in ltm.store.list(
                    ns, text=keyword, limit=policy.keyword_n, include_superseded=False
                ):
                    found.setdefault(memory.id, memory)
    else:
        ann = None
        if query_vector is not None:
            ann = ltm.activation_threads().submit(ltm.store.query, ns, query_vector, policy.pool)
        try:
            if lexical is None:
                lexical = ltm.lexical_candidates(ns, query_text)
        finally:
            neighbours = ann.result() if ann is not None else []
        for memory, _similarity in neighbours:
            found[memory.id] = memory
        for memory in lexical:
            found.setdefault(memory.id, memory)
    return [
        m for m in found.values() if not m.is_superseded and m.importance >= policy.min_importance
    ]


def activate(
    ltm: LongTermMemory,
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
        if query_vector is None and embed_query and ltm.embedder is not None:
            # The query is embedded in a worker while the lexical lookups (which need
            # no vector) run here: the two overlap instead of adding up.
            embedding = pending_embedding or ltm.start_query_embedding(query_text)
            try:
                if lexical_ready(ltm, ns) is not None:
                    lexical = ltm.lexical_candidates(ns, query_text)
            finally:
                query_vector, embed_ms, embedded_at = embedding.result()
                waited_ms = max(0.0, (embedded_at - started) * 1e3)
        pool = ltm.candidate_pool(ns, query_text, query_vector, lexical=lexical)
    except VectorStoreUnavailable as exc:
        log.warning("long-term store unavailable, activating nothing: %s", exc)
        return Activation(
            Retrieval(items=()), query_vector, embed_ms, 0.0, 0,
            degraded=f"store unavailable: {exc}",
        )  # fmt: skip
    chosen = policy or ltm.activation.retrieval
    stats = ltm.corpus_stats(ns, query_text, pool) if chosen.mode == "hybrid" else None
    result = retrieve(
        pool,
        now=ltm.clock.now(),
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


def start_query_embedding(ltm: LongTermMemory, text: str) -> QueryEmbedding | None:
    """Embed ``text`` in the activation threads; hand the future to ``activate``.
    ``None`` without an embedder. Never raises: an embedder that is down resolves
    to no vector (keywords only)."""
    if ltm.embedder is None:
        return None
    return ltm.activation_threads().submit(_timed_embed, ltm, text)


def _timed_embed(ltm: LongTermMemory, text: str) -> tuple[np.ndarray | None, float, float]:
    """(vector or ``None``, embedding ms, ``perf_counter`` when it was ready)."""
    started = time.perf_counter()
    vectors = ltm.embed([text])
    done = time.perf_counter()
    return (None if vectors is None else vectors[0]), (done - started) * 1e3, done


def corpus_stats(
    ltm: LongTermMemory, ns: Namespace, query_text: str, pool: Sequence[Memory]
) -> CorpusStats | None:
    """The namespace's BM25 statistics for the query's and the pool's tokens, from the
    lexical index; ``None`` (the scorer then uses the pool's own) when none is kept."""
    if ltm.lexical is None or ltm.activation.lexical_pool <= 0:
        return None
    tokens = set(lexical_tokens(query_text))
    for memory in pool:
        tokens.update(memory_tokens(memory))
    stats = ltm.lexical.stats(ns, tokens)
    return stats if stats.n_docs > 0 else None
