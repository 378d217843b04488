"""Test doubles for the store layer: a deterministic bag-of-words embedder that can go down."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from backend.embeddings.port import EmbedderUnavailable
from backend.memory.keywords import extract_keywords


class BagOfWordsEmbedder:
    """Hashes keywords into a 64-d vector: same words → cosine 1, disjoint words → ~0."""

    model = "test-bag-of-words-64"
    dim = 64

    def __init__(self) -> None:
        self.down = False
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.down:
            raise EmbedderUnavailable("test embedder is down")
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in extract_keywords(text) or ["empty"]:
                digest = hashlib.sha256(word.encode()).digest()
                rows[i, digest[0] % self.dim] += 1.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)
