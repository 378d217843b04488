"""A ``VectorStore`` that hands every call to another one: the base of the wrappers.

``IndexedVectorStore`` (mirrors writes into the lexical index) and
``ChangeLoggingVectorStore`` (logs writes for other processes) add behaviour to the
three write calls only; everything else reaches the wrapped store unchanged, including
backend-specific extras such as Chroma's, through ``__getattr__``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from backend.memory.types import Memory, Namespace
from backend.stores.vector_port import DEFAULT_ITER_BATCH, DEFAULT_LIST_LIMIT, VectorStore


class ForwardingVectorStore:
    """Every ``VectorStore`` method, forwarded to ``inner``; subclasses override some."""

    def __init__(self, store: VectorStore) -> None:
        self.inner = store

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self.inner.upsert(ns, memories)

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        return self.inner.delete(ns, ids)

    def drop_namespace(self, ns: Namespace) -> None:
        self.inner.drop_namespace(ns)

    def get(self, ns: Namespace, ids: Sequence[str]) -> builtins.list[Memory]:
        return self.inner.get(ns, ids)

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> builtins.list[tuple[Memory, float]]:
        return self.inner.query(ns, vector, n, include_superseded=include_superseded)

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
        return self.inner.list(
            ns,
            offset=offset,
            limit=limit,
            category=category,
            text=text,
            include_superseded=include_superseded,
        )

    def count(
        self,
        ns: Namespace,
        *,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> int:
        return self.inner.count(
            ns, category=category, text=text, include_superseded=include_superseded
        )

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> builtins.list[Memory]:
        return self.inner.salient(ns, since=since, min_importance=min_importance, n=n)

    def missing_vectors(self, ns: Namespace, limit: int) -> builtins.list[Memory]:
        return self.inner.missing_vectors(ns, limit)

    def iter_all(self, ns: Namespace, batch: int = DEFAULT_ITER_BATCH) -> Iterator[Memory]:
        return self.inner.iter_all(ns, batch)

    def namespaces(self) -> builtins.list[Namespace]:
        return self.inner.namespaces()

    def __getattr__(self, name: str) -> Any:  # backend-specific extras (e.g. Chroma's)
        return getattr(self.inner, name)
