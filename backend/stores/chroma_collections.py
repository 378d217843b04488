"""A namespace's two Chroma collections: looked up, created, cached and dropped.

``memory_codec`` describes the layout: each namespace owns ``_vec`` (memories with a
vector, in an HNSW index built with ``HnswParams``) and ``_novec`` (memories without
one). ``ChromaVectorStore`` (``backend.stores.chroma_store``) runs every operation on the
pair through ``NamespaceCollections.run``, which resolves the pair once per namespace and
looks it up again once when a cached handle went stale (a collection deleted behind our
back). Reading never creates a namespace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TypeVar

from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.errors import NotFoundError

from backend.memory.types import Namespace
from backend.stores import memory_codec as codec
from backend.stores.chroma_client import chroma_errors
from backend.stores.memory_codec import HnswParams

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Pair:
    vec: Collection
    novec: Collection


class NamespaceCollections:
    """The collection pairs of a client's namespaces, cached; thread-safe."""

    def __init__(self, client: ClientAPI, hnsw: HnswParams) -> None:
        self._client = client
        self._hnsw = hnsw
        self._lock = threading.Lock()
        self._cache: dict[Namespace, Pair] = {}

    def clear(self) -> None:
        """Forget every cached handle (the client is closing)."""
        with self._lock:
            self._cache.clear()

    def _pair(self, ns: Namespace, *, create: bool) -> Pair | None:
        with self._lock:
            if (cached := self._cache.get(ns)) is not None:
                return cached
            vec_name = codec.collection_name(ns, codec.ROLE_VECTORS)
            novec_name = codec.collection_name(ns, codec.ROLE_NOVECTORS)
            if create:
                vec = self._client.get_or_create_collection(
                    vec_name,
                    configuration=self._hnsw.configuration(),  # type: ignore[arg-type]
                    metadata=codec.collection_metadata(ns, codec.ROLE_VECTORS),
                    embedding_function=None,
                )
                novec = self._client.get_or_create_collection(
                    novec_name,
                    metadata=codec.collection_metadata(ns, codec.ROLE_NOVECTORS),
                    embedding_function=None,
                )
            else:
                try:
                    vec = self._client.get_collection(vec_name, embedding_function=None)
                    novec = self._client.get_collection(novec_name, embedding_function=None)
                except NotFoundError:
                    return None  # reading never creates a namespace
            self._cache[ns] = pair = Pair(vec, novec)
            return pair

    def run(self, ns: Namespace, create: bool, op: Callable[[Pair], T], empty: T) -> T:
        """Run ``op`` on the namespace's collections; re-resolve a stale handle once."""
        with chroma_errors():
            for attempt in (0, 1):
                pair = self._pair(ns, create=create)
                if pair is None:
                    return empty
                try:
                    return op(pair)
                except NotFoundError:
                    with self._lock:
                        self._cache.pop(ns, None)
                    if attempt:
                        raise
            return empty  # pragma: no cover - the loop always returns or raises

    def drop(self, ns: Namespace) -> None:
        """Delete both collections of the namespace (missing ones are fine)."""
        with self._lock:
            self._cache.pop(ns, None)
        with chroma_errors():
            for role in (codec.ROLE_VECTORS, codec.ROLE_NOVECTORS):
                with suppress(NotFoundError):
                    self._client.delete_collection(codec.collection_name(ns, role))
