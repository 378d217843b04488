"""A lexical (keyword) index beside the vector store: BM25 candidates and corpus statistics.

Cosine neighbours miss memories that share a rare word with the message but not its
meaning as the embedder sees it (names, and Chinese text under an English-only embedder).
The hybrid ranking (``backend.memory.hybrid``) therefore draws candidates from this index
too, and takes its document frequencies from it. Tokens are
``backend.memory.hybrid.memory_tokens`` of each memory, so index and scorer agree.

The port, ``LexicalIndex``, is tiny; ``InMemoryLexicalIndex`` is the implementation
(an inverted index in dictionaries, per namespace). Since it sees every memory's
importance, recency and supersession anyway, it also answers ``salient`` (the same
filter and order as ``VectorStore.salient``) from a sorted list, which saves the
activation a store round trip (20 ms on Chroma at 10k memories).

Keeping it in sync: ``IndexedVectorStore`` wraps the ``VectorStore`` and mirrors every
``upsert``/``delete``/``drop_namespace`` into the index after the store accepted it;
``LongTermMemory`` wraps its store this way, so every write path it has (gate, reinforce,
edit, delete, decay, import, backfill) keeps the index current. A namespace is loaded
lazily from the store (``ensure``, on its first activation, e.g. after a restart with a
persistent store); writes mirrored while it loads are queued and replayed after the
load, so none is lost. Writes made to the store behind the wrapper's back (another
process on the same Chroma) are not seen until the namespace is loaded again
(``forget``).

Failure policy: the index never raises for data; a memory it does not know simply is not
a lexical candidate (cosine neighbours still are).
"""

from __future__ import annotations

import bisect
import heapq
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from backend.memory.hybrid import CorpusStats, memory_tokens
from backend.memory.types import Memory, Namespace
from backend.stores.forwarding_store import ForwardingVectorStore
from backend.stores.vector_port import VectorStore

# Candidate search skips tokens held by more documents than this (their IDF is low and
# their postings long), and stops collecting after this many postings in all.
MAX_POSTINGS_PER_TOKEN = 2_000
MAX_POSTINGS_PER_QUERY = 20_000


class LexicalIndex(Protocol):
    """Token → memories, per namespace (see the module doc)."""

    def ensure(self, ns: Namespace, load: Callable[[], Iterable[Memory]]) -> None:
        """Load ``ns`` from ``load()`` unless it is loaded already (idempotent)."""
        ...

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        """Index or re-index these memories (ignored for a namespace not loaded)."""
        ...

    def delete(self, ns: Namespace, ids: Sequence[str]) -> None:
        """Forget these ids."""
        ...

    def drop_namespace(self, ns: Namespace) -> None:
        """Forget the namespace entirely."""
        ...

    def search(
        self, ns: Namespace, tokens: Iterable[str], n: int, *, min_importance: float = 0.0
    ) -> list[tuple[str, float]]:
        """Up to ``n`` live memories (not superseded, importance >= ``min_importance``)
        sharing tokens with the query, best first: (id, sum of the shared tokens' IDF)."""
        ...

    def stats(self, ns: Namespace, tokens: Iterable[str]) -> CorpusStats:
        """Document count, mean length and the document frequency of ``tokens``."""
        ...

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> list[str] | None:
        """Ids of ``VectorStore.salient`` (same filter, same order), or ``None`` when ``ns``
        is not loaded (ask the store then)."""
        ...


@dataclass(slots=True)
class _Doc:
    tokens: frozenset[str]
    live: bool
    importance: float
    rank: tuple[float, float, str]  # salient order: -importance, -last_accessed, id


@dataclass(slots=True)
class _Space:
    docs: dict[str, _Doc] = field(default_factory=dict)
    postings: dict[str, set[str]] = field(default_factory=dict)
    total_len: int = 0
    by_rank: list[tuple[float, float, str]] = field(default_factory=list)  # live docs, sorted
    ready: bool = False
    pending: list[tuple[str, Any]] = field(default_factory=list)

    def put(self, memory: Memory) -> None:
        self.remove(memory.id)
        tokens = memory_tokens(memory)
        live = not memory.is_superseded
        rank = (-memory.importance, -memory.last_accessed.timestamp(), memory.id)
        self.docs[memory.id] = _Doc(tokens, live, memory.importance, rank)
        self.total_len += len(tokens)
        for token in tokens:
            self.postings.setdefault(token, set()).add(memory.id)
        if live:
            bisect.insort(self.by_rank, rank)

    def remove(self, memory_id: str) -> None:
        doc = self.docs.pop(memory_id, None)
        if doc is None:
            return
        if doc.live:
            at = bisect.bisect_left(self.by_rank, doc.rank)
            if at < len(self.by_rank) and self.by_rank[at] == doc.rank:
                del self.by_rank[at]
        self.total_len -= len(doc.tokens)
        for token in doc.tokens:
            ids = self.postings.get(token)
            if ids is not None:
                ids.discard(memory_id)
                if not ids:
                    del self.postings[token]


class InMemoryLexicalIndex:
    """``LexicalIndex`` in dictionaries: token → set of ids, per namespace. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._loading: dict[Namespace, threading.Lock] = {}
        self._spaces: dict[Namespace, _Space] = {}

    def ensure(self, ns: Namespace, load: Callable[[], Iterable[Memory]]) -> None:
        with self._lock:
            space = self._spaces.get(ns)
            if space is not None and space.ready:
                return
            loading = self._loading.setdefault(ns, threading.Lock())
        with loading:  # one loader per namespace; the others wait for it
            with self._lock:
                space = self._spaces.get(ns)
                if space is not None and space.ready:
                    return
                space = self._spaces[ns] = _Space()  # writes from now on are queued
            fresh = _Space()
            for memory in load():  # no lock held: writers keep going (and queue)
                fresh.put(memory)
            with self._lock:
                if self._spaces.get(ns) is not space:  # dropped while loading
                    return
                for op, arg in space.pending:  # replay in order; idempotent
                    if op == "put":
                        fresh.put(arg)
                    else:
                        fresh.remove(arg)
                fresh.ready = True
                self._spaces[ns] = fresh

    def is_loaded(self, ns: Namespace) -> bool:
        with self._lock:
            space = self._spaces.get(ns)
            return space is not None and space.ready

    def forget(self, ns: Namespace) -> None:
        """Unload ``ns``; the next ``ensure`` reads it from the store again."""
        with self._lock:
            self._spaces.pop(ns, None)

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        with self._lock:
            space = self._spaces.get(ns)
            if space is None:
                return
            for memory in memories:
                if space.ready:
                    space.put(memory)
                else:
                    space.pending.append(("put", memory))

    def delete(self, ns: Namespace, ids: Sequence[str]) -> None:
        with self._lock:
            space = self._spaces.get(ns)
            if space is None:
                return
            for memory_id in ids:
                if space.ready:
                    space.remove(memory_id)
                else:
                    space.pending.append(("remove", memory_id))

    def drop_namespace(self, ns: Namespace) -> None:
        self.forget(ns)

    def size(self, ns: Namespace) -> int:
        with self._lock:
            space = self._spaces.get(ns)
            return len(space.docs) if space is not None and space.ready else 0

    def search(
        self, ns: Namespace, tokens: Iterable[str], n: int, *, min_importance: float = 0.0
    ) -> list[tuple[str, float]]:
        if n <= 0:
            return []
        with self._lock:
            space = self._spaces.get(ns)
            if space is None or not space.ready or not space.docs:
                return []
            total = len(space.docs)
            lists = sorted(
                (len(ids), token, ids)
                for token in set(tokens)
                if (ids := space.postings.get(token)) and len(ids) <= MAX_POSTINGS_PER_TOKEN
            )
            scores: dict[str, float] = {}
            budget = MAX_POSTINGS_PER_QUERY
            for df, _token, ids in lists:  # rarest first
                if df > budget:
                    break
                budget -= df
                idf = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
                for memory_id in ids:
                    scores[memory_id] = scores.get(memory_id, 0.0) + idf
            docs = space.docs
            eligible = (
                (-score, memory_id)
                for memory_id, score in scores.items()
                if (doc := docs[memory_id]).live and doc.importance >= min_importance
            )
            best = heapq.nsmallest(n, eligible)  # best score first, ties to the smaller id
        return [(memory_id, -negative) for negative, memory_id in best]

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> list[str] | None:
        """Walks the live documents by importance (then recency) until ``n`` are recent
        enough; stops at the first one below ``min_importance``."""
        since_ts = since.timestamp()
        with self._lock:
            space = self._spaces.get(ns)
            if space is None or not space.ready:
                return None
            found: list[str] = []
            if n <= 0:
                return found
            for negative_importance, negative_ts, memory_id in space.by_rank:
                if -negative_importance < min_importance:
                    break
                if -negative_ts >= since_ts:
                    found.append(memory_id)
                    if len(found) >= n:
                        break
            return found

    def stats(self, ns: Namespace, tokens: Iterable[str]) -> CorpusStats:
        with self._lock:
            space = self._spaces.get(ns)
            if space is None or not space.ready or not space.docs:
                return CorpusStats(n_docs=0, avg_len=0.0)
            postings = space.postings
            df = {t: len(postings[t]) for t in set(tokens) if t in postings}
            return CorpusStats(
                n_docs=len(space.docs), avg_len=space.total_len / len(space.docs), doc_freq=df
            )


class IndexedVectorStore(ForwardingVectorStore):
    """A ``VectorStore`` that mirrors its writes into a ``LexicalIndex`` (module doc).

    Every read goes straight to the wrapped store; ``upsert``, ``delete`` and
    ``drop_namespace`` reach the index after the store accepted them.
    """

    def __init__(self, store: VectorStore, index: LexicalIndex) -> None:
        super().__init__(store)
        self.index = index

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self.inner.upsert(ns, memories)
        self.index.upsert(ns, memories)

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        removed = self.inner.delete(ns, ids)
        self.index.delete(ns, ids)
        return removed

    def drop_namespace(self, ns: Namespace) -> None:
        self.inner.drop_namespace(ns)
        self.index.drop_namespace(ns)
