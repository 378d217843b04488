"""``build_chat_model``: a ``ChatModel`` from a provider name and its options (config → port)."""

from __future__ import annotations

from typing import Any, Literal

from backend.llm.port import ChatModel

Provider = Literal["embedded", "openai"]


def build_chat_model(provider: Provider, **options: Any) -> ChatModel:
    """Build one model for one role.

    ``"openai"``: any OpenAI-compatible endpoint; options are those of
    ``OpenAICompatChatModel`` (``base_url``, ``model``, ``api_key``, ``temperature``,
    ``max_tokens``, ``timeout``, ``max_retries``, ``supports_tools``, ``supports_images``).
    ``"embedded"``: llama.cpp in-process; options are those of ``EmbeddedLlamaChatModel``
    (``preset`` — a name from ``backend.llm.presets``, which brings the file, the display
    name, the chat format and the sha256 checked at load — or ``model_path``, then
    ``n_ctx``, ``n_threads``, ``temperature``, ``max_tokens``, ``repeat_penalty``,
    ``seed``); neither ``preset`` nor ``model_path`` means ``presets.DEFAULT_PRESET``.

    Failure policy: an unknown provider, option or preset is a ``ValueError``/``TypeError``
    (bad configuration fails at start); a missing embedded model is ``LLMUnavailable``. No
    I/O happens here besides checking that the embedded model file exists (its sha256 is
    checked when it loads).
    """
    if provider == "openai":
        from backend.llm.openai_compat import OpenAICompatChatModel

        return OpenAICompatChatModel(**options)
    if provider == "embedded":
        from backend.llm.embedded_llama import EmbeddedLlamaChatModel

        return EmbeddedLlamaChatModel(**options)
    raise ValueError(f"unknown LLM provider {provider!r} (expected 'embedded' or 'openai')")
