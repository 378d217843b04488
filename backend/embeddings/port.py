"""The ``Embedder`` port: text in, L2-normalised float32 rows out.

The port is synchronous on purpose: the local model is CPU-bound (onnxruntime
releases the GIL while it runs) and the OpenAI-compatible adapter uses the SDK's
thread-safe sync client. Async callers use :func:`aembed`, which runs ``embed`` in a
worker thread, so one small interface serves both worlds.

Failure policy, shared by every adapter:

- runtime trouble (server down, timeout, HTTP 4xx/5xx, a malformed or zero vector
  from a server, the ONNX runtime failing) raises :class:`EmbedderUnavailable`. The
  caller degrades: the store keeps the memory *without* a vector (never a zero
  vector) and backfills it later;
- model files missing or altered raise :class:`ModelFilesError` (a subclass, so a
  caller that degrades on ``EmbedderUnavailable`` may also start without the local
  model), from the adapter's constructor: bad installs fail at start;
- programming errors (a bare ``str`` instead of a sequence of texts) raise
  ``TypeError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import numpy as np


class EmbedderUnavailable(RuntimeError):
    """The embedder cannot produce vectors right now; store without a vector, backfill later."""


class ModelFilesError(EmbedderUnavailable):
    """A local model file is missing or does not match its pinned sha256.

    The message names the file, the PyPI package to reinstall and the mismatch.
    """


class Embedder(Protocol):
    """Turns texts into unit-length vectors of one fixed dimension.

    ``embed`` returns an array of shape ``(len(texts), dim)``, dtype float32, each row
    L2-normalised, rows in the order of ``texts``; an empty input gives ``(0, dim)``.
    It raises :class:`EmbedderUnavailable` when the backend is down (see the module
    docstring for the whole failure policy). Implementations are thread-safe.

    Not ``runtime_checkable`` on purpose: on Python 3.11 ``isinstance`` reads every
    member, and reading ``dim`` may cost a request for a remote embedder.
    """

    @property
    def model(self) -> str:
        """Identifier of the vector space; vectors of different models never mix."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (see the class docstring for shape, dtype and errors)."""
        ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors for search queries (a chat message looking for memories), in the space of
    ``embed``'s: an embedder trained with two forms (e5's ``query: `` and ``passage: ``)
    defines ``embed_queries``; the others embed a query as any text.

    ``embed`` is for what is stored and compared with other stored texts (the save gate,
    the restatement collapse, GIST); only a message searching the store is a query.
    """
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if callable(method) else embedder.embed(texts)


def vector_split(embedder: object) -> int | None:
    """Where the second part of a two-part embedder's vectors starts (``minilm-use``: an
    English model's part, then a multilingual one's; ``backend.memory.vector_parts`` reads
    each pair of texts by the part that knows its script), or ``None`` for one space."""
    split = getattr(embedder, "split_at", None)
    return split if isinstance(split, int) and split > 0 else None


async def aembed(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.embed(texts)`` in a worker thread, for use from the event loop.

    Same result and same exceptions as ``embed``.
    """
    return await asyncio.to_thread(embedder.embed, check_texts(texts))


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, refusing a bare string (it would embed each character)."""
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    items = list(texts)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"embed() takes texts (str), got {type(item).__name__}")
    return items


def l2_normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32.

    Raises :class:`EmbedderUnavailable` for a zero or non-finite row: such a vector
    must never be stored as if it were an embedding.
    """
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        raise EmbedderUnavailable(f"expected a 2-d array of vectors, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    bad = ~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0.0)
    if bad.any():
        rows = np.flatnonzero(bad).tolist()
        raise EmbedderUnavailable(f"zero or non-finite vector at rows {rows[:5]}")
    normalised: np.ndarray = (matrix / norms).astype(np.float32)
    return normalised
