"""InMemoryVectorStore: exact cosine search with numpy; the reference backend and test double.

It follows the ``VectorStore`` contract (``vector_port`` module doc) to the letter, and
the Chroma backend is checked against it by the same contract suite. Search is exact
(brute force over the namespace), so it is the ground truth for recall benchmarks too.

Thread-safe (one lock); memories and vectors are copied on the way in and out, so a
caller mutating an array never changes the store. Nothing is persisted.

Failure policy: only argument errors (``ValueError``, ``EmbeddingDimensionError``); it
never raises ``VectorStoreUnavailable``.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from backend.memory.types import Memory, Namespace
from backend.stores.vector_port import (
    DEFAULT_ITER_BATCH,
    DEFAULT_LIST_LIMIT,
    batch_dimension,
    check_dimension,
    check_paging,
    is_salient,
    last_by_id,
    list_key,
    prepare_vector,
    require_aware,
    salient_key,
    text_needle,
    unique_ids,
)

logger = logging.getLogger(__name__)


def _copy(memory: Memory) -> Memory:
    """A memory whose embedding array is the caller's own."""
    if memory.embedding is None:
        return memory
    return replace(memory, embedding=np.array(memory.embedding, dtype=np.float32))


class InMemoryVectorStore:
    """A ``VectorStore`` held in dictionaries, searched exactly."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[Namespace, dict[str, Memory]] = {}
        self._dims: dict[Namespace, int] = {}

    # --- writes -------------------------------------------------------------------

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        """Insert or replace by id; validates the whole batch before writing any of it."""
        batch = last_by_id(memories)
        if not batch:
            return
        dim = batch_dimension(batch)
        stored: list[Memory] = []
        for memory in batch:
            vector = None if memory.embedding is None else prepare_vector(memory.embedding)
            stored.append(
                replace(
                    memory,
                    created_at=require_aware(memory.created_at, "created_at"),
                    last_accessed=require_aware(memory.last_accessed, "last_accessed"),
                    embedding=vector,
                )
            )
        with self._lock:
            if dim is not None:
                check_dimension(self._dims.get(ns), dim)
                self._dims[ns] = dim
            bucket = self._data.setdefault(ns, {})
            for memory in stored:
                bucket[memory.id] = memory

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        """Delete these ids; returns how many existed."""
        with self._lock:
            bucket = self._data.get(ns, {})
            return sum(bucket.pop(i, None) is not None for i in unique_ids(ids))

    def drop_namespace(self, ns: Namespace) -> None:
        """Forget the namespace, its memories and its dimension."""
        with self._lock:
            self._data.pop(ns, None)
            self._dims.pop(ns, None)

    # --- reads --------------------------------------------------------------------

    def _snapshot(self, ns: Namespace) -> builtins.list[Memory]:
        with self._lock:
            return builtins.list(self._data.get(ns, {}).values())

    def get(self, ns: Namespace, ids: Sequence[str]) -> builtins.list[Memory]:
        """The memories of these ids in the order asked; missing ids skipped."""
        with self._lock:
            bucket = self._data.get(ns, {})
            found = [bucket[i] for i in unique_ids(ids) if i in bucket]
        return [_copy(m) for m in found]

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> builtins.list[tuple[Memory, float]]:
        """Exact top-``n`` by cosine similarity; ties by id."""
        query = prepare_vector(vector)
        with self._lock:
            check_dimension(self._dims.get(ns), query.shape[0])
            pool = [
                m
                for m in self._data.get(ns, {}).values()
                if m.embedding is not None and (include_superseded or not m.is_superseded)
            ]
        if n <= 0 or not pool:
            return []
        matrix = np.stack([m.embedding for m in pool if m.embedding is not None])
        matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        sims = matrix @ (query / np.linalg.norm(query))
        order = sorted(range(len(pool)), key=lambda i: (-float(sims[i]), pool[i].id))[:n]
        return [(_copy(pool[i]), float(sims[i])) for i in order]

    def _filtered(
        self, ns: Namespace, category: str | None, text: str | None, include_superseded: bool
    ) -> builtins.list[Memory]:
        needle = text_needle(text)
        return [
            m
            for m in self._snapshot(ns)
            if (category is None or m.category == category)
            and (needle is None or needle in m.content.casefold())
            and (include_superseded or not m.is_superseded)
        ]

    def list(
        self,
        ns: Namespace,
        *,
        offset: int = 0,
        limit: int = DEFAULT_LIST_LIMIT,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> builtins.list[Memory]:
        """A page ordered by ``(created_at, id)``."""
        check_paging(offset, limit)
        rows = sorted(self._filtered(ns, category, text, include_superseded), key=list_key)
        return [_copy(m) for m in rows[offset : offset + limit]]

    def count(
        self,
        ns: Namespace,
        *,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> int:
        """How many memories ``list`` pages through with these filters."""
        return len(self._filtered(ns, category, text, include_superseded))

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> builtins.list[Memory]:
        """Recent, important, live memories; importance desc, last_accessed desc, id."""
        since = require_aware(since, "since")
        rows = [m for m in self._snapshot(ns) if is_salient(m, since, min_importance)]
        return [_copy(m) for m in sorted(rows, key=salient_key)[: max(n, 0)]]

    def missing_vectors(self, ns: Namespace, limit: int) -> builtins.list[Memory]:
        """Memories without a vector, oldest first (the contract leaves order open)."""
        rows = [m for m in self._snapshot(ns) if m.embedding is None]
        return sorted(rows, key=list_key)[: max(limit, 0)]

    def iter_all(self, ns: Namespace, batch: int = DEFAULT_ITER_BATCH) -> Iterator[Memory]:
        """Every memory of the namespace (a snapshot taken at the first ``next``)."""
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        for memory in sorted(self._snapshot(ns), key=list_key):
            yield _copy(memory)

    def namespaces(self) -> builtins.list[Namespace]:
        """Namespaces that were written to and not dropped (even if now empty)."""
        with self._lock:
            names = set(self._data) | set(self._dims)
        return sorted(names, key=lambda ns: (ns.user_id, ns.persona_id))
