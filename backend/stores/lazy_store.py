"""A vector store that connects when it can and fails fast while its server is down.

``ChromaVectorStore.http`` probes the server and raises ``VectorStoreUnavailable`` when
it does not answer. Built at start, that would stop the whole app for an outage the app
is designed to ride out (activation degrades, writes wait in the outbox). So the HTTP
store is opened through ``LazyVectorStore``, which also works as a circuit breaker:

- it tries to connect at construction; while it has no connection, calls raise
  ``VectorStoreUnavailable`` like a store whose server went away;
- once a call has failed with ``VectorStoreUnavailable`` the store counts as down: calls
  fail at once instead of each waiting for the client's timeout (a hung server, one
  that accepts connections but never answers, would otherwise cost every turn 10 s);
- at most every ``retry_s``, one caller checks whether it is back: ``probe`` (a cheap
  heartbeat with a short timeout) or, without one, its own call; the others keep
  failing fast meanwhile. When the check passes, calls go through again.

Failure policy: only ``VectorStoreUnavailable`` opens the breaker or is retried; any
other error (bad arguments, an incompatible server) propagates untouched. Calls already
in flight when a server hangs still wait for their timeout: the breaker bounds what
comes after the first failure, not the failure itself.
"""

from __future__ import annotations

import builtins
import http.client
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TypeVar
from urllib.parse import urlsplit

import numpy as np

from backend.memory.types import Memory, Namespace
from backend.stores.vector_port import DEFAULT_ITER_BATCH, DEFAULT_LIST_LIMIT, VectorStore
from backend.stores.vector_port import VectorStoreUnavailable as Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

# Between two checks while down: a turn, a health check and the outbox replay all ask,
# and each check costs a connection (or, for a hung server, the probe's timeout).
RETRY_S = 1.0
# A healthy server answers its heartbeat in milliseconds on loopback or a LAN.
PROBE_TIMEOUT_S = 0.5


def http_heartbeat(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> Callable[[], None]:
    """A probe that GETs ``url`` and raises ``VectorStoreUnavailable`` unless it is a 200."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if https else 80)

    def probe() -> None:
        kind = http.client.HTTPSConnection if https else http.client.HTTPConnection
        conn = kind(host, port, timeout=timeout_s)
        try:
            conn.request("GET", parts.path or "/")
            status = conn.getresponse().status
        except OSError as exc:
            raise Unavailable(f"{host}:{port} heartbeat failed: {exc}") from exc
        finally:
            conn.close()
        if status != 200:
            raise Unavailable(f"{host}:{port} heartbeat answered {status}")

    return probe


class LazyVectorStore:
    """A ``VectorStore`` opened by ``factory``, failing fast while down (module doc)."""

    def __init__(
        self,
        factory: Callable[[], VectorStore],
        *,
        probe: Callable[[], None] | None = None,
        retry_s: float = RETRY_S,
    ) -> None:
        self._factory = factory
        self._probe = probe
        self._retry_s = retry_s
        self._lock = threading.Lock()
        self._store: VectorStore | None = None
        self._down = True  # until connected
        self._checking = False  # one caller checks at a time
        self._next_check = float("-inf")
        self._last_error = "not connected yet"
        try:
            self._ready()
        except Unavailable as exc:
            log.warning("vector store unavailable at start, will retry: %s", exc)

    def _ready(self) -> VectorStore:
        """The store when it counts as up; otherwise one check per ``retry_s`` (this caller
        does it) and ``VectorStoreUnavailable`` for everyone else, at once."""
        with self._lock:
            if self._store is not None and not self._down:
                return self._store
            now = time.monotonic()
            if self._checking or now < self._next_check:
                raise Unavailable(f"vector store down: {self._last_error}")
            self._checking, self._next_check = True, now + self._retry_s
            store = self._store
        try:
            if store is None:
                store = self._factory()
            elif self._probe is not None:
                self._probe()
        except Unavailable as exc:
            with self._lock:
                self._checking, self._last_error = False, str(exc)
            raise
        with self._lock:
            self._store, self._down, self._checking = store, False, False
        log.info("vector store up")
        return store

    def _failed(self, exc: Unavailable) -> None:
        with self._lock:
            if not self._down:
                log.warning("vector store down, failing fast until it is back: %s", exc)
            self._down, self._last_error = True, str(exc)
            self._next_check = time.monotonic() + self._retry_s

    def _call(self, op: Callable[[VectorStore], T]) -> T:
        store = self._ready()
        try:
            return op(store)
        except Unavailable as exc:
            self._failed(exc)
            raise

    @property
    def connected(self) -> bool:
        """Whether it has connected at least once (it may be down now)."""
        return self._store is not None

    @property
    def down(self) -> bool:
        return self._down

    def close(self) -> None:
        close = getattr(self._store, "close", None)
        if callable(close):
            close()

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self._call(lambda store: store.upsert(ns, memories))

    def get(self, ns: Namespace, ids: Sequence[str]) -> builtins.list[Memory]:
        return self._call(lambda store: store.get(ns, ids))

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        return self._call(lambda store: store.delete(ns, ids))

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> builtins.list[tuple[Memory, float]]:
        return self._call(
            lambda store: store.query(ns, vector, n, include_superseded=include_superseded)
        )

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
        return self._call(
            lambda store: store.list(
                ns, offset=offset, limit=limit, category=category, text=text,
                include_superseded=include_superseded,
            )
        )  # fmt: skip

    def count(
        self,
        ns: Namespace,
        *,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> int:
        return self._call(
            lambda store: store.count(
                ns, category=category, text=text, include_superseded=include_superseded
            )
        )

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> builtins.list[Memory]:
        return self._call(
            lambda store: store.salient(ns, since=since, min_importance=min_importance, n=n)
        )

    def missing_vectors(self, ns: Namespace, limit: int) -> builtins.list[Memory]:
        return self._call(lambda store: store.missing_vectors(ns, limit))

    def iter_all(self, ns: Namespace, batch: int = DEFAULT_ITER_BATCH) -> Iterator[Memory]:
        store = self._ready()
        try:
            yield from store.iter_all(ns, batch)
        except Unavailable as exc:
            self._failed(exc)
            raise

    def namespaces(self) -> builtins.list[Namespace]:
        return self._call(lambda store: store.namespaces())

    def drop_namespace(self, ns: Namespace) -> None:
        self._call(lambda store: store.drop_namespace(ns))
