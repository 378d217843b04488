"""The embedder as the parts of ``LongTermMemory`` use it: one that never raises.

An embedder that is down costs the cosine channel, never a write or an activation
(``docs/reliability.md``): ``embed`` then returns ``None``, the memory is stored without
a vector and ``backfill`` gives it one later; activation ranks by keywords only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from backend.embeddings.port import Embedder, EmbedderUnavailable, embed_queries, vector_split

log = logging.getLogger(__name__)


class TolerantEmbedder:
    """``Embedder`` (or none) whose outage reads as "no vectors" instead of an error."""

    def __init__(self, embedder: Embedder | None) -> None:
        self.embedder = embedder

    @property
    def model(self) -> str | None:
        """The embedding model's name, ``None`` without an embedder."""
        return None if self.embedder is None else self.embedder.model

    @property
    def dim(self) -> int | None:
        return None if self.embedder is None else self.embedder.dim

    @property
    def present(self) -> bool:
        return self.embedder is not None

    @property
    def split_at(self) -> int | None:
        """Where a two-part embedder's second part starts (``port.vector_split``)."""
        return vector_split(self.embedder)

    def embed(self, texts: Sequence[str]) -> np.ndarray | None:
        """Vectors for ``texts``, or ``None`` when there is no embedder or it is down."""
        return self._tolerant(texts, queries=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray | None:
        """Vectors for search queries (``backend.embeddings.port.embed_queries``), or
        ``None`` when there is no embedder or it is down."""
        return self._tolerant(texts, queries=True)

    def _tolerant(self, texts: Sequence[str], *, queries: bool) -> np.ndarray | None:
        if self.embedder is None or not texts:
            return None
        try:
            if queries:
                return embed_queries(self.embedder, list(texts))
            return self.embedder.embed(list(texts))
        except EmbedderUnavailable as exc:
            log.warning("embedder unavailable, continuing without vectors: %s", exc)
            return None
