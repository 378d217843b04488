"""``build_embedder``: the one place that maps a configured kind to an adapter.

Adapters are imported on demand, so a deployment that uses only one of them never
imports the other's dependencies (onnxruntime or the openai SDK).
"""

from __future__ import annotations

from typing import Any, Literal

from backend.embeddings.port import Embedder

EmbedderKind = Literal["local", "openai"]


def build_embedder(kind: EmbedderKind, **options: Any) -> Embedder:
    """A ready embedder of ``kind``, built with ``options`` as keyword arguments.

    ``"local"``: :class:`~backend.embeddings.local_minilm.LocalMiniLMEmbedder`
    (``model_path``, ``tokenizer_path``, ``intra_op_threads``, ``batch_size``).
    ``"openai"``: :class:`~backend.embeddings.openai_compat.OpenAICompatEmbedder`
    (``base_url``, ``model``, ``api_key``, ``dimensions``, ``timeout``,
    ``batch_size``, ``max_retries``).

    Failure policy: an unknown ``kind`` or option raises ``ValueError``/``TypeError``
    (bad configuration fails at start); missing or altered local model files raise
    :class:`~backend.embeddings.port.ModelFilesError`.
    """
    if kind == "local":
        from backend.embeddings.local_minilm import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder(**options)
    if kind == "openai":
        from backend.embeddings.openai_compat import OpenAICompatEmbedder

        return OpenAICompatEmbedder(**options)
    raise ValueError(f"unknown embedder kind {kind!r} (expected 'local' or 'openai')")
