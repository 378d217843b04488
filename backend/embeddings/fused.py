"""Two embedders as one: MiniLM and e5-small-v2, their cosines blended.

Each part's unit vector is scaled by the square root of its weight and the two are set
end to end. The result is a unit vector whose cosine with another such vector is the
weighted mean of the parts' cosines:

    cos(q, m) = w * cos_minilm(q, m) + (1 - w) * cos_e5(q, m)

so one vector in one store carries both, and every threshold that reads a cosine (the
save gate, the restatement collapse, GIST, the relevance floor) reads the blend. MiniLM
finds the companion's short facts about the user best, e5 the long turns of a dialog
(docs/benchmarks.md, "Embedder: MiniLM and e5 blended"): at ``WEIGHT`` 0.7 the blend
keeps MiniLM's recall on the shared corpus and adds most of e5's on LoCoMo.

A query is embedded in each part's query form (e5's ``query: ``, ``port.embed_queries``).
Neither part reads Chinese (the lexical channel's bigrams carry it, ``cjk_cosine`` 0).

Failure policy: each part's (missing files raise ``ModelFilesError`` from the
constructor; a failing onnxruntime ``EmbedderUnavailable`` from ``embed``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from backend.embeddings.port import Embedder, check_texts, embed_queries

#: The name the configuration uses (``embedding.model``).
NAME = "minilm-e5"
#: MiniLM's share of the cosine (docs/benchmarks.md: 0.5, 0.6, 0.7 and 0.8 measured).
WEIGHT = 0.7
#: The split embedder's name: MiniLM, and USE multilingual v3 for text in CJK.
USE_NAME = "minilm-use"
#: MiniLM's share of the plain cosine of two ``minilm-use`` vectors, which only the
#: readers that do not take the parts apart see.
USE_WEIGHT = 0.7


class FusedEmbedder:
    """``parts``: (embedder, weight) pairs, the weights positive and summing to 1.
    ``name``: the vector space's name (the parts' and weights' by default)."""

    def __init__(
        self,
        parts: Sequence[tuple[Embedder, float]],
        *,
        name: str | None = None,
        split: bool = False,
    ) -> None:
        if len(parts) < 2:
            raise ValueError("a fused embedder needs two parts or more")
        weights = [w for _, w in parts]
        if any(w <= 0 for w in weights) or not math.isclose(sum(weights), 1.0, abs_tol=1e-9):
            raise ValueError(f"weights must be positive and sum to 1, got {weights}")
        self._parts = [(embedder, math.sqrt(w)) for embedder, w in parts]
        self._model = name or "+".join(f"{e.model}*{w:g}" for e, w in parts)
        if split and len(parts) != 2:
            raise ValueError("a split embedder has exactly two parts")
        # ``split``: readers may take the two parts apart (``port.vector_split``).
        self._split_at = parts[0][0].dim if split else None

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        return sum(embedder.dim for embedder, _ in self._parts)

    @property
    def split_at(self) -> int | None:
        """Where the second part starts, for a split embedder (``minilm-use``)."""
        return self._split_at

    @property
    def parts(self) -> list[Embedder]:
        return [embedder for embedder, _ in self._parts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows of ``dim`` floats: the parts' stored-text vectors, scaled and joined."""
        items = check_texts(texts)
        return self._joined([embedder.embed(items) for embedder, _ in self._parts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """As ``embed``, each part in its query form."""
        items = check_texts(texts)
        return self._joined([embed_queries(embedder, items) for embedder, _ in self._parts])

    def _joined(self, blocks: list[np.ndarray]) -> np.ndarray:
        scaled = [
            np.asarray(block, dtype=np.float32) * s
            for block, (_, s) in zip(blocks, self._parts, strict=True)
        ]
        return np.hstack(scaled).astype(np.float32, copy=False)


def minilm_e5(**options: Any) -> FusedEmbedder:
    """The app's blend: local MiniLM at ``WEIGHT`` and local e5-small-v2 at the rest.
    ``options`` (``intra_op_threads``) go to both."""
    from backend.embeddings.local_e5 import MODEL_ID as E5_ID
    from backend.embeddings.local_e5 import LocalE5Embedder
    from backend.embeddings.local_minilm import LocalMiniLMEmbedder

    minilm = LocalMiniLMEmbedder(**options)
    e5 = LocalE5Embedder(**options)
    return FusedEmbedder([(minilm, WEIGHT), (e5, 1 - WEIGHT)], name=space_name(minilm.model, E5_ID))


def minilm_use(**options: Any) -> FusedEmbedder:
    """MiniLM and USE multilingual v3, split (``USE_NAME``): MiniLM's part reads pairs of
    texts without CJK as MiniLM alone, USE's part every pair with a Chinese, Japanese or
    Korean side (``backend.memory.vector_parts``). ``options`` (``intra_op_threads``) go to
    both (USE's BLAS threads)."""
    from backend.embeddings.local_minilm import LocalMiniLMEmbedder
    from backend.embeddings.local_use import DEFAULT_THREADS, LocalUSEEmbedder

    minilm = LocalMiniLMEmbedder(**options)
    use = LocalUSEEmbedder(threads=options.get("intra_op_threads") or DEFAULT_THREADS)
    return FusedEmbedder(
        [(minilm, USE_WEIGHT), (use, 1 - USE_WEIGHT)],
        name=f"{minilm.model}+{use.model}@{USE_WEIGHT:g}-split",
        split=True,
    )


def space_name(minilm_id: str, e5_id: str) -> str:
    """The blend's vector space: its parts' spaces and MiniLM's weight."""
    return f"{minilm_id}+{e5_id}@{WEIGHT:g}"
