"""Vectors of two parts, each pair of texts read by the part that knows its script.

The ``minilm-use`` embedder (``backend.embeddings.fused``) stores one vector a memory:
MiniLM's unit vector and USE multilingual v3's, each scaled, set end to end. MiniLM
knows 244 CJK characters and recalls the companion's English notes best; USE reads
Chinese, Japanese and Korean and places a sentence next to its translation
(docs/benchmarks.md, "A multilingual part for text in CJK"). So two texts are compared:

- by MiniLM's part alone when neither holds a CJK character: exactly the cosine the
  MiniLM embedder gives, so English recall, the collapse and GIST are what they were;
- by USE's part when either does: a Chinese message and an English note, two Chinese
  notes, or one fact written in both languages.

Each part is normalised on its own, so the weights that scale them in the stored vector
do not matter here. ``second_part_query`` is a query vector that searches the store by
USE's part alone (MiniLM's part zeroed): the nearest neighbours by cosine are then the
nearest by USE's cosine, in any store that ranks by cosine.

Pure: no I/O; a vector of another length or without a norm in a part reads as MISSING
(``None``), like any bad vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backend.memory.keywords import is_cjk
from backend.memory.types import Memory


@dataclass(frozen=True, slots=True)
class VectorParts:
    """``split``: where the second (multilingual) part starts in every vector."""

    split: int

    def _parts(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Both parts of ``rows`` (n, dim), each row normalised, and which rows are usable
        (both parts finite with a norm)."""
        first = rows[:, : self.split].astype(np.float64)
        second = rows[:, self.split :].astype(np.float64)
        with np.errstate(all="ignore"):
            n1 = np.linalg.norm(first, axis=1)
            n2 = np.linalg.norm(second, axis=1)
            ok = np.isfinite(n1) & np.isfinite(n2) & (n1 > 0) & (n2 > 0)
            first = np.where(ok[:, None], first / np.where(ok, n1, 1.0)[:, None], 0.0)
            second = np.where(ok[:, None], second / np.where(ok, n2, 1.0)[:, None], 0.0)
        return first, second, ok

    def _rows(self, vectors: Sequence[object | None]) -> tuple[np.ndarray, np.ndarray]:
        """(n, dim) float64 rows (zeros where a vector is missing or of another length)
        and which rows hold a vector of this layout."""
        dims = {np.shape(v)[0] for v in vectors if v is not None and np.ndim(v) == 1}
        dim = max(dims, default=0)
        rows = np.zeros((len(vectors), max(dim, self.split + 1)), dtype=np.float64)
        present = np.zeros(len(vectors), dtype=bool)
        if dim <= self.split:
            return rows, present
        for i, vector in enumerate(vectors):
            if vector is None or np.ndim(vector) != 1 or np.shape(vector)[0] != dim:
                continue
            try:
                rows[i] = np.asarray(vector, dtype=np.float64)
            except (TypeError, ValueError):
                continue
            present[i] = True
        return rows, present

    def query_cosines(
        self, query_vector: np.ndarray | None, query_text: str, memories: Sequence[Memory]
    ) -> list[float | None]:
        """The cosine of the query and each memory, by the part that reads the pair
        (module doc); ``None`` where either vector is missing or of another layout."""
        result: list[float | None] = [None] * len(memories)
        if query_vector is None or not memories:
            return result
        rows, present = self._rows([query_vector, *(m.embedding for m in memories)])
        if not present[0]:
            return result
        first, second, ok = self._parts(rows)
        if not ok[0]:
            return result
        query_cjk = is_cjk(query_text)
        for i, memory in enumerate(memories, start=1):
            if not (present[i] and ok[i]):
                continue
            part = second if query_cjk or is_cjk(memory.content) else first
            value = float(part[i] @ part[0])
            result[i - 1] = max(-1.0, min(1.0, value))
        return result

    def pair_cosines(self, memories: Sequence[Memory]) -> tuple[np.ndarray, np.ndarray]:
        """The (n, n) cosines of the memories with one another by the part that reads each
        pair, and which memories have a usable vector (their rows and columns are 0
        elsewhere)."""
        rows, present = self._rows([m.embedding for m in memories])
        first, second, ok = self._parts(rows)
        ok &= present
        cjk = np.array([is_cjk(m.content) for m in memories], dtype=bool)
        either = cjk[:, None] | cjk[None, :]
        cos = np.where(either, second @ second.T, first @ first.T)
        cos[~ok, :] = 0.0
        cos[:, ~ok] = 0.0
        return np.clip(cos, -1.0, 1.0), ok

    def second_part_query(self, query_vector: np.ndarray | None) -> np.ndarray | None:
        """``query_vector`` with its first part zeroed (``None`` when that leaves no
        usable vector): a store's cosine search with it ranks by USE's part alone."""
        return self._only(query_vector, slice(0, self.split))

    def first_part_query(self, query_vector: np.ndarray | None) -> np.ndarray | None:
        """``query_vector`` with its second part zeroed: a cosine search by MiniLM's part
        alone, the ranking the MiniLM embedder gives."""
        return self._only(query_vector, slice(self.split, None))

    def _only(self, query_vector: np.ndarray | None, zeroed: slice) -> np.ndarray | None:
        if query_vector is None or np.ndim(query_vector) != 1:
            return None
        vector = np.array(query_vector, dtype=np.float32)
        if vector.shape[0] <= self.split:
            return None
        vector[zeroed] = 0.0
        norm = float(np.linalg.norm(vector))
        if not (np.isfinite(norm) and norm > 0.0):
            return None
        return vector / np.float32(norm)
