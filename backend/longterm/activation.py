"""Activation retrieval: the candidate pool of a turn's query and its ranking
(``docs/memory-model.md``).

Activation gathers a candidate pool (ANN neighbours ∪ salient memories ∪ lexical-index or
keyword matches) and hands it to ``backend.memory.retrieve``. The query embedding, the
ANN query and the lexical lookups overlap in the retriever's threads, so that they cost
the turn the longest of them instead of their sum.

When the activation policy asks for lexical candidates (``lexical_pool > 0``, the hybrid
default), each namespace is loaded into the ``LexicalIndex`` kept beside the store on its
first activation.

A message that names someone of the user's life by relation ("how is my sister doing?")
also reaches the facts that name them only by name ("Xiaoyu's wedding moved to
December"): the memories that say the relation give the entity table
(``backend.memory.entities``) its names, the names' matches join the pool, and the names
join the query the ranking reads (``through_entities``). The user's edits of that table
(merges, names, relations, deletions) are laid over it (``entity_edits``: where they are
kept, the session store in the app), so "how's my grandma?" also reaches the facts of the
names merged into her.

A message that asks about the user as a whole ("what do you know about me?", "who am
I?"; ``own_questions.asks_for_profile``) shares no word with any note: its pool also
holds the user's ``PROFILE_POOL`` most important memories, and the user's memories below
the relevance floor take the slots the message's own notes leave (``retrieve``'s
``fill``), best first, restatements left out: "what do you know about me?" is answered
from the user's best facts, "help me write a few lines about myself" keeps the notes its
words find and fills the rest. They are held: shown, not reinforced.

The hybrid ranking's top ``rerank_n`` are read again by the cross-encoder handed in as
``reranker`` (``backend.reranking``; ``None``: the stage is skipped), timed per activation
(``Activation.rerank_ms``); on a machine too slow for them all within
``rerank_budget_ms``, only the best of them (``backend.longterm.rerank_pace``).

Failure policy: activation never raises for runtime trouble: an unreachable store yields
an empty activation with ``degraded`` set (the turn answers without recalled memories);
an embedder that is down resolves the query embedding to no vector (keywords only); a
reranker that fails skips its stage for that turn (logged, ``rerank_skipped``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from backend.clock import Clock
from backend.longterm.embedding import TolerantEmbedder
from backend.longterm.rerank_pace import RerankPace
from backend.memory.dietary import SEARCH_WORDS, about_food, dietary_kind
from backend.memory.entities import (
    Entity,
    EntityEdit,
    asked_relations,
    entity_table,
    names_for,
    surface_words,
)
from backend.memory.hybrid import CorpusStats, lexical_tokens, memory_tokens
from backend.memory.keywords import extract_keywords, is_cjk
from backend.memory.own_questions import asks_for_profile
from backend.memory.rerank import Reranker
from backend.memory.retrieve import Retrieval, held_below_floor, retrieve
from backend.memory.types import (
    ActivationPolicy,
    HybridWeights,
    Memory,
    Namespace,
    RetrievalPolicy,
)
from backend.memory.vector_parts import VectorParts
from backend.reranking.port import RerankerUnavailable
from backend.stores.lexical_index import LexicalIndex
from backend.stores.vector_port import VectorStore, VectorStoreUnavailable

log = logging.getLogger(__name__)

# A question about the user as a whole reads this many of their most important memories
# besides its own pool (``with_profile``); ranking, the collapse and GIST choose ``k``.
PROFILE_POOL = 24
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _of_the_user(memory: Memory) -> bool:
    return memory.subject == "user"


# A query embedding in flight: (vector or None, embedding ms, perf_counter when done).
QueryEmbedding = Future[tuple[np.ndarray | None, float, float]]
# The user's edits of a namespace's entity table (backend.sessions.entity_edits).
EntityEdits = Callable[[Namespace], Sequence[EntityEdit]]
# Two-part vectors: how many of USE's nearest a message without CJK looks through for
# notes in CJK (``ActivationRetriever.neighbours``).
CROSS_SCRIPT_POOL = 20


@dataclass(frozen=True, slots=True)
class Activation:
    retrieval: Retrieval
    query_vector: np.ndarray | None
    embed_ms: float
    search_ms: float
    pool_size: int
    degraded: str | None = None
    # The people and pets the candidate pool names: what the prompt introduces a note's
    # names with ("Xiaoyu" → "your sister Xiaoyu": ``backend.memory.entities.introduce``).
    entities: tuple[Entity, ...] = ()
    # The cross-encoder's time in this activation (part of ``search_ms``; 0 when skipped).
    rerank_ms: float = 0.0
    # The hybrid weights the ranking ran with (two-part vectors trust every pair's
    # cosine: ``cjk_cosine`` 1), for the turn's own evidence tests; None: not ranked.
    weights: HybridWeights | None = None

    @property
    def memories(self) -> list[Memory]:
        return [item.memory for item in self.retrieval.items]


class TimedReranker:
    """One activation's view of the reranker: it times the call (into ``pace`` as well,
    when given) and turns a model that fails into ``None`` (the stage is then skipped for
    this turn), never an error."""

    def __init__(self, inner: Reranker, pace: RerankPace | None = None) -> None:
        self.inner = inner
        self.pace = pace
        self.ms = 0.0

    @property
    def model(self) -> str:
        return self.inner.model

    def score(self, query: str, passages: Sequence[str]) -> Sequence[float] | None:
        started = time.perf_counter()
        try:
            scores = self.inner.score(query, passages)
        except RerankerUnavailable as exc:
            log.warning("reranker unavailable, ranking without it this turn: %s", exc)
            return None
        finally:
            took = (time.perf_counter() - started) * 1e3
            self.ms += took
        if self.pace is not None and scores is not None:
            self.pace.record(len(passages), took)
        return scores


def _edited_names(edit: EntityEdit) -> list[str]:
    named = [] if edit.key.startswith("~") else [edit.key]
    return [*named, *([edit.name] if edit.name else []), *edit.aliases]


class ActivationRetriever:
    """Activation over one store (already mirrored into ``lexical`` when one is kept).

    ``policy`` may be replaced after construction (``LongTermMemory.activation``);
    ``executor``: the threads the overlapping lookups run in (default: four, started on
    first use, so that concurrent turns do not queue behind each other).
    ``entity_edits``: the user's edits of a namespace's entity table (none without it).
    ``reranker``: the cross-encoder of the hybrid ranking's top (none: that stage is off);
    it reads as many of the top ``rerank_n`` as fit the policy's ``rerank_budget_ms`` at
    its recent pace (``backend.longterm.rerank_pace``).
    """

    def __init__(
        self,
        store: VectorStore,
        embedder: TolerantEmbedder,
        clock: Clock,
        policy: ActivationPolicy,
        *,
        lexical: LexicalIndex | None = None,
        executor: ThreadPoolExecutor | None = None,
        entity_edits: EntityEdits | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.store = store
        self.entity_edits = entity_edits
        self._reranker = reranker
        self.pace = RerankPace()
        self.embedder = embedder
        self.clock = clock
        self.policy = policy
        self.lexical = lexical
        self._executor = executor
        self._executor_guard = threading.Lock()

    @property
    def reranker(self) -> Reranker | None:
        return self._reranker

    @reranker.setter
    def reranker(self, reranker: Reranker | None) -> None:
        # Another model has another pace.
        self._reranker = reranker
        self.pace = RerankPace()

    def threads(self) -> ThreadPoolExecutor:
        """Threads for work that overlaps within one activation (the query embedding, the
        ANN query)."""
        with self._executor_guard:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(4, thread_name_prefix="ltm-activate")
            return self._executor

    def lexical_ready(self, ns: Namespace) -> LexicalIndex | None:
        """The lexical index with ``ns`` loaded, or ``None`` when none is kept."""
        if self.lexical is None or self.policy.lexical_pool <= 0:
            return None
        self.lexical.ensure(ns, lambda: self.store.iter_all(ns))
        return self.lexical

    def lexical_candidates(self, ns: Namespace, query_text: str) -> list[Memory]:
        """The lexical index's BM25 matches and salient memories, fetched in one ``get``
        (needs no query vector, so it can run while the query is being embedded)."""
        policy = self.policy
        index = self.lexical_ready(ns)
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
        policy = self.policy
        since = self.clock.now() - timedelta(days=policy.salient_days)
        index = self.lexical_ready(ns)
        found: dict[str, Memory] = {}
        if index is None:
            if query_vector is not None:
                for memory in self.neighbours(ns, query_text, query_vector):
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
                ann = self.threads().submit(self.neighbours, ns, query_text, query_vector)
            try:
                if lexical is None:
                    lexical = self.lexical_candidates(ns, query_text)
            finally:
                neighbours = ann.result() if ann is not None else []
            for memory in neighbours:
                found[memory.id] = memory
            for memory in lexical:
                found.setdefault(memory.id, memory)
        return [
            m
            for m in found.values()
            if not m.is_superseded and m.importance >= policy.min_importance
        ]

    def with_profile(self, ns: Namespace, pool: list[Memory]) -> list[Memory]:
        """``pool`` and the namespace's ``PROFILE_POOL`` most important live memories of
        the user, whenever they were last used (one more store read, for a message that
        asks about the user as a whole only)."""
        policy = self.policy
        known = {memory.id for memory in pool}
        extra = [
            memory
            for memory in self.store.salient(
                ns, since=_EPOCH, min_importance=policy.min_importance, n=PROFILE_POOL
            )
            if memory.id not in known and memory.subject == "user" and not memory.is_superseded
        ]
        return [*pool, *extra]

    def with_dietary(self, ns: Namespace, pool: list[Memory]) -> list[Memory]:
        """``pool`` and the user's dietary notes the lexical index finds by the diet words
        (``backend.memory.dietary``), for a message about food: "what should I cook?" has
        no word of "The user is vegetarian." (one more lexical lookup)."""
        known = {memory.id for memory in pool}
        index = self.lexical_ready(ns)
        if index is None:
            found = self.text_matches(ns, SEARCH_WORDS)
        else:  # only the hits the pool lacks (``text_matches`` would fetch the salient too)
            hits = index.search(
                ns, lexical_tokens(" ".join(SEARCH_WORDS)), self.policy.lexical_pool,
                min_importance=self.policy.min_importance,
            )  # fmt: skip
            wanted = [memory_id for memory_id, _ in hits if memory_id not in known]
            found = self.store.get(ns, wanted) if wanted else []
        extra = []
        for memory in found:
            live = not memory.is_superseded and memory.importance >= self.policy.min_importance
            if live and memory.id not in known and dietary_kind(memory) is not None:
                known.add(memory.id)
                extra.append(memory)
        return [*pool, *extra]

    def parts(self) -> VectorParts | None:
        """The layout of the embedder's vectors when they hold two parts (``minilm-use``)."""
        split = self.embedder.split_at
        return None if split is None else VectorParts(split)

    def neighbours(self, ns: Namespace, query_text: str, query_vector: np.ndarray) -> list[Memory]:
        """The ANN neighbours of the query: ``policy.pool`` of them by the store's cosine.

        With two-part vectors (``vector_parts``) each part searches for what it reads: a
        message without CJK gets MiniLM's ``pool`` nearest (the MiniLM embedder's pool)
        and the CJK memories among USE's ``CROSS_SCRIPT_POOL`` nearest; a message in CJK
        gets USE's ``pool`` nearest.
        """
        pool = self.policy.pool
        parts = self.parts()
        if parts is None:
            return [memory for memory, _ in self.store.query(ns, query_vector, pool)]
        second = parts.second_part_query(query_vector)
        if is_cjk(query_text):
            return [] if second is None else [m for m, _ in self.store.query(ns, second, pool)]
        first = parts.first_part_query(query_vector)
        found = [] if first is None else [m for m, _ in self.store.query(ns, first, pool)]
        if second is not None:
            found += [
                memory
                for memory, _ in self.store.query(ns, second, CROSS_SCRIPT_POOL)
                if is_cjk(memory.content)
            ]
        return found

    def text_matches(self, ns: Namespace, words: Sequence[str]) -> list[Memory]:
        """Memories that hold one of ``words``: the lexical index's matches, or without
        one a bounded text scan per word."""
        if not words:
            return []
        if self.lexical_ready(ns) is not None:
            return self.lexical_candidates(ns, " ".join(words))
        found: list[Memory] = []
        for word in words[:5]:
            found += self.store.list(
                ns, text=word, limit=max(1, self.policy.keyword_n), include_superseded=False
            )
        return found

    def edits(self, ns: Namespace) -> Sequence[EntityEdit]:
        """The user's entity edits of ``ns``; none when they cannot be read (logged): a
        turn recalls by the derived table rather than fail."""
        if self.entity_edits is None:
            return ()
        try:
            return self.entity_edits(ns)
        except Exception as exc:  # the session database's trouble, whatever its driver
            log.warning("entity edits of %s unreadable, recalling without them: %s", ns.key, exc)
            return ()

    def through_entities(
        self,
        ns: Namespace,
        query_text: str,
        pool: list[Memory],
        edits: Sequence[EntityEdit] = (),
    ) -> tuple[list[Memory], str, frozenset[str]]:
        """The pool and the query, widened to the entities the message names by relation
        (module docstring); unchanged when it names none, or none has a name. Third: the
        ids of the pool's memories that hold one of those names, which the message speaks
        for through the relation (they clear the relevance floor: its cosine and keywords
        cannot see that "Xiaoyu" is the sister)."""
        asked = asked_relations(query_text)
        if not asked:
            return pool, query_text, frozenset()
        saying = self.text_matches(ns, surface_words(asked))
        # The entities the user edited may be reached by no relation word (one made "the
        # user's grandma" by hand, an alias "奶奶"): their names are looked up too.
        given = {n for e in edits if not e.deleted for n in _edited_names(e)}
        if given:
            saying += self.text_matches(ns, sorted(given))
        table = entity_table([*pool, *saying], edits)
        flat = query_text.lower()
        names = [name for name in names_for(asked, table) if name.lower() not in flat]
        if not names:
            return pool, query_text, frozenset()
        known = {m.id for m in pool}
        wider = list(pool)
        for memory in [*saying, *self.text_matches(ns, names)]:
            live = not memory.is_superseded and memory.importance >= self.policy.min_importance
            if live and memory.id not in known:
                known.add(memory.id)
                wider.append(memory)
        lowered = [name.lower() for name in names]
        named = frozenset(m.id for m in wider if any(n in m.content.lower() for n in lowered))
        return wider, f"{query_text} ({' '.join(names)})", named

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
            if query_vector is None and embed_query and self.embedder.present:
                # The query is embedded in a worker while the lexical lookups (which need
                # no vector) run here: the two overlap instead of adding up.
                embedding = pending_embedding or self.start_query_embedding(query_text)
                try:
                    if self.lexical_ready(ns) is not None:
                        lexical = self.lexical_candidates(ns, query_text)
                finally:
                    query_vector, embed_ms, embedded_at = embedding.result()
                    waited_ms = max(0.0, (embedded_at - started) * 1e3)
            pool = self.candidate_pool(ns, query_text, query_vector, lexical=lexical)
            profile = asks_for_profile(query_text)
            if profile:
                pool = self.with_profile(ns, pool)
            edits = self.edits(ns)
            pool, query_text, named = self.through_entities(ns, query_text, pool, edits)
            food = about_food(query_text)
            if food:
                pool = self.with_dietary(ns, pool)
        except VectorStoreUnavailable as exc:
            log.warning("long-term store unavailable, activating nothing: %s", exc)
            return Activation(
                Retrieval(items=()), query_vector, embed_ms, 0.0, 0,
                degraded=f"store unavailable: {exc}",
            )  # fmt: skip
        chosen = policy or self.policy.retrieval
        parts = self.parts()
        if parts is not None and chosen.hybrid.cjk_cosine < 1.0:
            # Each pair is read by a part that knows its script: no cosine to distrust.
            chosen = replace(chosen, hybrid=replace(chosen.hybrid, cjk_cosine=1.0))
        stats = self.corpus_stats(ns, query_text, pool) if chosen.mode == "hybrid" else None
        now = self.clock.now()
        timed = None if self.reranker is None else TimedReranker(self.reranker, self.pace)
        if timed is not None and chosen.rerank_n > 0:
            fits = self.pace.pairs(chosen.rerank_n, self.policy.rerank_budget_ms)
            if fits != chosen.rerank_n:
                chosen = replace(chosen, rerank_n=fits)
        result = retrieve(
            pool,
            now=now,
            query_text=query_text,
            query_vector=query_vector,
            target_emotion=target_emotion,
            policy=chosen,
            stats=stats,
            spoken_for=named,
            held=functools.partial(
                held_below_floor,
                now=now,
                salient_days=self.policy.salient_days,
                salient_min_importance=self.policy.salient_min_importance,
            ),
            reranker=timed,
            parts=parts,
            fill=_of_the_user if profile else None,
            keep=dietary_kind if food else None,
        )
        done = time.perf_counter()
        degraded = None if query_vector is not None else "no query vector: keywords only"
        # search_ms: the activation's wall time not spent waiting for the embedding (the
        # two overlap; an embedding started early may cost the activation no wait at all).
        search_ms = max(0.0, (done - started) * 1e3 - waited_ms)
        return Activation(
            result, query_vector, embed_ms, search_ms, len(pool), degraded=degraded,
            entities=tuple(entity_table(pool, edits)),
            rerank_ms=0.0 if timed is None else timed.ms, weights=chosen.hybrid,
        )  # fmt: skip

    def start_query_embedding(self, text: str) -> QueryEmbedding | None:
        """Embed ``text`` in the activation threads; hand the future to ``activate``.
        ``None`` without an embedder. Never raises: an embedder that is down resolves
        to no vector (keywords only)."""
        if not self.embedder.present:
            return None
        return self.threads().submit(self._timed_embed, text)

    def _timed_embed(self, text: str) -> tuple[np.ndarray | None, float, float]:
        """(vector or ``None``, embedding ms, ``perf_counter`` when it was ready)."""
        started = time.perf_counter()
        vectors = self.embedder.embed_queries([text])
        done = time.perf_counter()
        return (None if vectors is None else vectors[0]), (done - started) * 1e3, done

    def corpus_stats(
        self, ns: Namespace, query_text: str, pool: Sequence[Memory]
    ) -> CorpusStats | None:
        """The namespace's BM25 statistics for the query's and the pool's tokens, from the
        lexical index; ``None`` (the scorer then uses the pool's own) when none is kept."""
        if self.lexical is None or self.policy.lexical_pool <= 0:
            return None
        tokens = set(lexical_tokens(query_text))
        for memory in pool:
            tokens.update(memory_tokens(memory))
        stats = self.lexical.stats(ns, tokens)
        return stats if stats.n_docs > 0 else None
