"""``build_chat_model``: a ``ChatModel`` from a provider name and its options (config → port)."""

from __future__ import annotations

from typing import Any, Literal

from backend.llm.port import ChatModel

Provider = Literal["embedded", "openai"]


def build_chat_model(provider: Provider, **options: Any) -> ChatModel:
    """Build one model for one role.

    ``"openai"``: any OpenAI-compatible endpoint; options are those of
    ``OpenAICompatChatModel`` (``base_url``, ``model``, ``api_key``, ``temperature``,
    ``max_tokens``, ``timeout``, ``max_retries``, ``supports_tools``).
    ``"embedded"``: llama.cpp in-process; options are those of ``EmbeddedLlamaChatModel``
    (``model_path``, ``n_ctx``, ``n_threads``, ``temperature``, ``max_tokens``,
    ``repeat_penalty``, ``seed``).

    Failure policy: an unknown provider or option is a ``ValueError``/``TypeError`` (bad
    configuration fails at start); a missing embedded model is ``LLMUnavailable``. No I/O
    happens here besides checking that the embedded model file exists.
    """
    if provider == "openai":
        from backend.llm.openai_compat import OpenAICompatChatModel

        return OpenAICompatChatModel(**options)
    if provider == "embedded":
        from backend.llm.embedded_llama import EmbeddedLlamaChatModel

        return EmbeddedLlamaChatModel(**options)
    raise ValueError(f"unknown LLM provider {provider!r} (expected 'embedded' or 'openai')")
