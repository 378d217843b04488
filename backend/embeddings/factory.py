"""``build_embedder``: the one place that maps a configured kind to an adapter.

Adapters are imported on demand, so a deployment that uses only one of them never
imports the other's dependencies (onnxruntime or the openai SDK).
"""

from __future__ import annotations

from typing import Any, Literal

from backend.embeddings.port import Embedder

EmbedderKind = Literal["local", "openai"]
#: The offline models, by the name the configuration uses (``embedding.model``).
LocalModel = Literal["all-minilm-l6-v2", "e5-small-v2", "minilm-e5", "minilm-use"]
LOCAL_MODELS: tuple[LocalModel, ...] = (
    "all-minilm-l6-v2", "e5-small-v2", "minilm-e5", "minilm-use",
)  # fmt: skip
#: The offline model a configuration that names none gets (docs/benchmarks.md, "A multilingual
#: part for text in CJK": MiniLM for English, USE multilingual v3 where CJK is involved).
DEFAULT_LOCAL_MODEL: LocalModel = "minilm-use"


def build_embedder(kind: EmbedderKind, **options: Any) -> Embedder:
    """A ready embedder of ``kind``, built with ``options`` as keyword arguments.

    ``"local"``: ``model`` (one of ``LOCAL_MODELS``, default ``DEFAULT_LOCAL_MODEL``)
    picks :class:`~backend.embeddings.local_e5.LocalE5Embedder` (``model_dir``,
    ``intra_op_threads``, ``batch_size``),
    :class:`~backend.embeddings.local_minilm.LocalMiniLMEmbedder` (``model_path``,
    ``tokenizer_path``, ``intra_op_threads``, ``batch_size``) or the two blended
    (``"minilm-e5"``, :func:`~backend.embeddings.fused.minilm_e5`: ``intra_op_threads``).
    ``"openai"``: :class:`~backend.embeddings.openai_compat.OpenAICompatEmbedder`
    (``base_url``, ``model``, ``api_key``, ``dimensions``, ``timeout``,
    ``batch_size``, ``max_retries``).

    Failure policy: an unknown ``kind``, model or option raises ``ValueError``/``TypeError``
    (bad configuration fails at start); missing or altered local model files raise
    :class:`~backend.embeddings.port.ModelFilesError`.
    """
    if kind == "local":
        model = options.pop("model", None) or DEFAULT_LOCAL_MODEL
        if model == "e5-small-v2":
            from backend.embeddings.local_e5 import LocalE5Embedder

            return LocalE5Embedder(**options)
        if model == "minilm-e5":
            from backend.embeddings.fused import minilm_e5

            return minilm_e5(**options)
        if model == "minilm-use":
            from backend.embeddings.fused import minilm_use

            return minilm_use(**options)
        if model == "all-minilm-l6-v2":
            from backend.embeddings.local_minilm import LocalMiniLMEmbedder

            return LocalMiniLMEmbedder(**options)
        raise ValueError(
            f"unknown local embedding model {model!r} (expected one of {LOCAL_MODELS})"
        )
    if kind == "openai":
        from backend.embeddings.openai_compat import OpenAICompatEmbedder

        return OpenAICompatEmbedder(**options)
    raise ValueError(f"unknown embedder kind {kind!r} (expected 'local' or 'openai')")
