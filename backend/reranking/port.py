"""What callers of a reranker catch, without importing onnxruntime."""

from __future__ import annotations


class RerankerUnavailable(RuntimeError):
    """The reranker's model cannot load or run (onnxruntime failed)."""
