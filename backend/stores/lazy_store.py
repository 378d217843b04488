"""A vector store that connects when it can: the app starts while a Chroma server is down.

``ChromaVectorStore.http`` probes the server and raises ``VectorStoreUnavailable`` when
it does not answer. Built at start, that would stop the whole app for an outage the app
is designed to ride out (activation degrades, writes wait in the outbox). So the HTTP
store is opened through ``LazyVectorStore``: it tries once at construction, and while it
has no connection every call tries again (at most every ``retry_s``) and raises
``VectorStoreUnavailable`` otherwise, exactly like a store whose server went away.

Failure policy: only ``VectorStoreUnavailable`` from the factory is retried; any other
error (bad arguments, an incompatible server) propagates at once. Once connected, calls
go straight to the real store and its own failure policy applies.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

import numpy as np

from backend.memory.types import Memory, Namespace
from backend.stores.vector_port import DEFAULT_ITER_BATCH, DEFAULT_LIST_LIMIT, VectorStore
from backend.stores.vector_port import VectorStoreUnavailable as Unavailable

log = logging.getLogger(__name__)

# Between two connection attempts: a turn, a health check and the outbox replay all ask,
# and each failed attempt costs a TCP connect; once a second is plenty.
RETRY_S = 1.0


class LazyVectorStore:
    """A ``VectorStore`` opened by ``factory`` on first success (see the module doc)."""

    def __init__(self, factory: Callable[[], VectorStore], *, retry_s: float = RETRY_S) -> None:
        self._factory = factory
        self._retry_s = retry_s
        self._lock = threading.Lock()
        self._store: VectorStore | None = None
        self._last_try = float("-inf")
        self._last_error = "not connected yet"
        try:
            self._connect()
        except Unavailable as exc:
            log.warning("vector store unavailable at start, will retry: %s", exc)

    def _connect(self) -> VectorStore:
        with self._lock:
            if self._store is not None:
                return self._store
            now = time.monotonic()
            if now - self._last_try < self._retry_s:
                raise Unavailable(f"not connected: {self._last_error}")
            self._last_try = now
            try:
                self._store = self._factory()
            except Unavailable as exc:
                self._last_error = str(exc)
                raise
            log.info("vector store connected")
            return self._store

    @property
    def connected(self) -> bool:
        return self._store is not None

    def close(self) -> None:
        close = getattr(self._store, "close", None)
        if callable(close):
            close()

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self._connect().upsert(ns, memories)

    def get(self, ns: Namespace, ids: Sequence[str]) -> builtins.list[Memory]:
        return self._connect().get(ns, ids)

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        return self._connect().delete(ns, ids)

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> builtins.list[tuple[Memory, float]]:
        return self._connect().query(ns, vector, n, include_superseded=include_superseded)

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
        return self._connect().list(
            ns, offset=offset, limit=limit, category=category, text=text,
            include_superseded=include_superseded,
        )  # fmt: skip

    def count(
        self,
        ns: Namespace,
        *,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> int:
        return self._connect().count(
            ns, category=category, text=text, include_superseded=include_superseded
        )

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> builtins.list[Memory]:
        return self._connect().salient(ns, since=since, min_importance=min_importance, n=n)

    def missing_vectors(self, ns: Namespace, limit: int) -> builtins.list[Memory]:
        return self._connect().missing_vectors(ns, limit)

    def iter_all(self, ns: Namespace, batch: int = DEFAULT_ITER_BATCH) -> Iterator[Memory]:
        return self._connect().iter_all(ns, batch)

    def namespaces(self) -> builtins.list[Namespace]:
        return self._connect().namespaces()

    def drop_namespace(self, ns: Namespace) -> None:
        self._connect().drop_namespace(ns)
