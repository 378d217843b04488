"""Stores: the long-term vector store port and its backends.

``VectorStore`` (the port) and ``InMemoryVectorStore`` import nothing heavy;
``ChromaVectorStore`` / ``HnswParams`` (``chroma_store``, ``memory_codec``) are loaded on
first access so that importing ``backend.stores`` does not import chromadb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.vector_port import (
    EmbeddingDimensionError,
    VectorStore,
    VectorStoreUnavailable,
)

if TYPE_CHECKING:
    from backend.stores.chroma_store import ChromaVectorStore
    from backend.stores.memory_codec import HnswParams

__all__ = [
    "ChromaVectorStore",
    "EmbeddingDimensionError",
    "HnswParams",
    "InMemoryVectorStore",
    "VectorStore",
    "VectorStoreUnavailable",
]


def __getattr__(name: str) -> Any:
    if name == "ChromaVectorStore":
        from backend.stores.chroma_store import ChromaVectorStore

        return ChromaVectorStore
    if name == "HnswParams":
        from backend.stores.memory_codec import HnswParams

        return HnswParams
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
