"""The long-term vector store port and the rules every backend shares.

A ``VectorStore`` keeps long-term memories (docs/memory-model.md, "A memory") per
``Namespace``; namespaces never see each other. It is deliberately low level: the save
gate, scoring and diversity live above it (``backend.memory``), this layer only stores,
filters and finds nearest neighbours. All methods are synchronous; async callers run
them in a thread. Backends: ``InMemoryVectorStore`` (exact numpy search, the reference
and the test double) and ``ChromaVectorStore`` (HNSW, persistent or over HTTP).

Contract shared by every backend (the contract suite in
``tests/stores/test_vector_contract.py`` pins it):

- ``upsert`` replaces the WHOLE record of an id. A memory upserted with
  ``embedding=None`` is stored without a vector (and loses one it had). Every read
  (``get``, ``list``, ``query``, ``salient``, ``iter_all``) returns memories with their
  stored embedding, so read → ``dataclasses.replace`` → ``upsert`` keeps the vector.
  Within one batch the last memory of an id wins.
- Vectors are 1-D, finite, non-zero (a zero vector has no cosine); anything else is a
  ``ValueError``. They come back as float32, equal to what was written up to 1-2 ulp
  (Chroma's cosine space normalises on insert and rescales on read).
- ``query`` similarity is the cosine (1 - cosine distance): exact in memory, float32
  HNSW arithmetic in Chroma (about 1e-6). Chroma's neighbours are approximate (HNSW;
  see ``bench/ann_recall.py`` for recall). Ties have no guaranteed order.
- One dimension per namespace, fixed by the first vector ever written to it and kept
  until ``drop_namespace`` (deleting every memory does not reset it, as in Chroma). A
  vector of another dimension, written or queried, is an ``EmbeddingDimensionError``
  (a ``ValueError``) and nothing of that batch is written.
- Memories without a vector are valid: ``get``/``list``/``count``/``salient``/
  ``iter_all``/``missing_vectors`` see them, ``query`` never returns them.
- ``text`` filters are case-insensitive substring matches on ``content`` using Unicode
  case folding (``needle.casefold() in content.casefold()``); an empty text is no filter.
- ``list`` is ordered by ``(created_at, id)``; ``query`` by similarity, best first.
- Timestamps must be timezone-aware; they come back as UTC with microseconds intact.

Failure policy: bad arguments (dimension, shape, naive timestamps, negative paging)
raise ``ValueError`` at once; a backend that cannot be reached raises
``VectorStoreUnavailable`` so callers can degrade (retrieval without long-term memory)
instead of failing the turn; a batch cut short by an outage may be partly written (no
backend promises atomic batches). Missing ids and unknown namespaces are not errors:
they read as empty.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from backend.memory.types import Memory, Namespace

DEFAULT_LIST_LIMIT = 50
DEFAULT_ITER_BATCH = 500


class VectorStoreUnavailable(RuntimeError):
    """The backing store cannot be reached (server down, connection refused, timeout).

    Callers degrade on this (e.g. answer without long-term memory); it is never raised
    for bad arguments.
    """


class EmbeddingDimensionError(ValueError):
    """A vector's dimension differs from the one the namespace already holds."""


@runtime_checkable
class VectorStore(Protocol):  # (``builtins.list``: in the class body ``list`` is the method)
    """Long-term memories of many namespaces, with ANN search by cosine (see module doc)."""

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        """Insert or replace memories by id (the whole record; last of an id wins)."""
        ...

    def get(self, ns: Namespace, ids: Sequence[str]) -> list[Memory]:
        """The memories of these ids in the order asked (first occurrence); missing skipped."""
        ...

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        """Delete these ids; returns how many existed."""
        ...

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> list[tuple[Memory, float]]:
        """Up to ``n`` nearest memories with a vector and their cosine similarity, best first.

        Superseded memories are excluded unless ``include_superseded``. ``n <= 0`` → ``[]``.
        """
        ...

    def list(
        self,
        ns: Namespace,
        *,
        offset: int = 0,
        limit: int = DEFAULT_LIST_LIMIT,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> list[Memory]:
        """A page of memories ordered by ``(created_at, id)``, optionally filtered."""
        ...

    def count(
        self,
        ns: Namespace,
        *,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> int:
        """How many memories ``list`` would page through with the same filters."""
        ...

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> builtins.list[Memory]:
        """Up to ``n`` live memories with ``last_accessed >= since`` and
        ``importance >= min_importance``, ordered by importance desc, then last_accessed
        desc, then id."""
        ...

    def missing_vectors(self, ns: Namespace, limit: int) -> builtins.list[Memory]:
        """Up to ``limit`` memories stored without a vector (order unspecified)."""
        ...

    def iter_all(self, ns: Namespace, batch: int = DEFAULT_ITER_BATCH) -> Iterator[Memory]:
        """Every memory of the namespace, with embeddings, fetched ``batch`` at a time.

        Order unspecified; memories deleted while iterating are skipped.
        """
        ...

    def namespaces(self) -> builtins.list[Namespace]:
        """Every namespace that holds a collection, sorted by (user_id, persona_id)."""
        ...

    def drop_namespace(self, ns: Namespace) -> None:
        """Forget a namespace entirely (its memories and its vector dimension)."""
        ...


# --- helpers shared by the backends -------------------------------------------------


def prepare_vector(vector: object) -> np.ndarray:
    """A valid embedding as a fresh 1-D float32 array.

    Raises ``ValueError`` for anything that is not a non-empty 1-D array of finite
    numbers with a non-zero norm (a zero vector has no cosine: docs/memory-model.md, MISSING).
    """
    try:
        array = np.array(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"embedding is not a numeric array: {exc}") from exc
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"embedding must be a non-empty 1-D vector, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("embedding has non-finite values")
    if not float(np.linalg.norm(array)) > 0.0:
        raise ValueError("embedding has a zero norm")
    return array


def batch_dimension(memories: Sequence[Memory]) -> int | None:
    """The one dimension of the batch's vectors (validating each), ``None`` if none has one.

    Raises ``EmbeddingDimensionError`` when the batch mixes dimensions.
    """
    dims = {prepare_vector(m.embedding).shape[0] for m in memories if m.embedding is not None}
    if len(dims) > 1:
        raise EmbeddingDimensionError(f"one batch mixes vector dimensions {sorted(dims)}")
    return dims.pop() if dims else None


def check_dimension(expected: int | None, got: int) -> None:
    """Raise ``EmbeddingDimensionError`` when a namespace of ``expected`` dims gets ``got``."""
    if expected is not None and expected != got:
        raise EmbeddingDimensionError(
            f"this namespace holds vectors of dimension {expected}, got {got}"
        )


def last_by_id(memories: Sequence[Memory]) -> list[Memory]:
    """Deduplicate a batch by id, the last occurrence winning, in first-seen order."""
    latest: dict[str, Memory] = {}
    for memory in memories:
        latest[memory.id] = memory
    return list(latest.values())


def unique_ids(ids: Sequence[str]) -> list[str]:
    """Ids without duplicates, first occurrence order."""
    return list(dict.fromkeys(ids))


def text_needle(text: str | None) -> str | None:
    """The case-folded search needle, or ``None`` when ``text`` is empty (no filter)."""
    return text.casefold() if text else None


def check_paging(offset: int, limit: int) -> None:
    """Reject negative paging arguments with ``ValueError``."""
    if offset < 0 or limit < 0:
        raise ValueError(f"offset and limit must be >= 0, got {offset}, {limit}")


def require_aware(moment: datetime, what: str) -> datetime:
    """``moment`` in UTC; a naive datetime is a ``ValueError`` (we never guess a zone)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {moment!r}")
    return moment.astimezone(UTC)


def list_key(memory: Memory) -> tuple[datetime, str]:
    """The stable ``list`` order: ``created_at`` then ``id``."""
    return (memory.created_at, memory.id)


def salient_key(memory: Memory) -> tuple[float, float, str]:
    """The ``salient`` order: importance desc, then last_accessed desc, then id."""
    return (-memory.importance, -memory.last_accessed.timestamp(), memory.id)


def is_salient(memory: Memory, since: datetime, min_importance: float) -> bool:
    """The ``salient`` filter: live, recent enough and important enough."""
    return (
        not memory.is_superseded
        and memory.last_accessed >= since
        and memory.importance >= min_importance
    )


class SalientRow(NamedTuple):
    """What ``salient`` needs to rank a memory before fetching it."""

    id: str
    importance: float
    last_accessed_ts: float

    def key(self) -> tuple[float, float, str]:
        """Same order as ``salient_key``."""
        return (-self.importance, -self.last_accessed_ts, self.id)


# ``fetch(threshold, strict, limit)``: up to ``limit`` rows passing the salient filter
# with importance >= threshold (> when strict), in no particular order.
SalientFetch = Callable[[float, bool, int], list[SalientRow]]


def top_by_importance(fetch: SalientFetch, min_importance: float, n: int) -> list[SalientRow]:
    """A superset of the top ``n`` rows by importance from a store that has no ORDER BY.

    Every fetch is bounded (``cap``). When a page comes back full, the n-th best
    importance in it is a lower bound of the true n-th best, so the threshold rises to
    it; when it cannot rise (ties), we look strictly above it and keep the tied rows
    seen. Ends when a page is not full. Exact unless more than ``cap`` rows tie at the
    cut-off importance: then which of the tied rows are returned is unspecified.
    """
    cap = max(4 * n, 200)
    threshold, strict = min_importance, False
    ties: list[SalientRow] = []
    rows: list[SalientRow] = []
    for _ in range(64):  # each round raises the threshold or turns strict
        rows = fetch(threshold, strict, cap)
        if len(rows) < cap:
            break
        nth = sorted((r.importance for r in rows), reverse=True)[n - 1]
        if nth > threshold:
            threshold, strict, ties = nth, False, []
        else:
            ties = [r for r in rows if r.importance == threshold]
            strict = True
    return rows + ties
