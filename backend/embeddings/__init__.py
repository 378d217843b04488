"""Embedder port and adapters: local MiniLM (onnxruntime) and OpenAI-compatible.

The public surface is the port and the factory; the adapters live in
``backend.embeddings.local_minilm`` and ``backend.embeddings.openai_compat`` and are
imported only when used.
"""

from __future__ import annotations

from backend.embeddings.factory import EmbedderKind, build_embedder
from backend.embeddings.port import Embedder, EmbedderUnavailable, ModelFilesError, aembed

__all__ = [
    "Embedder",
    "EmbedderKind",
    "EmbedderUnavailable",
    "ModelFilesError",
    "aembed",
    "build_embedder",
]
