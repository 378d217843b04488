"""Chat LLMs behind one small port: ``ChatModel`` (see ``backend.llm.port``).

Adapters: ``openai_compat.OpenAICompatChatModel`` (any OpenAI-compatible endpoint),
``embedded_llama.EmbeddedLlamaChatModel`` (llama.cpp in-process), ``fake.FakeChatModel``
(tests). ``build_chat_model`` picks one from configuration. Adapters are imported lazily
so that importing this package never imports the openai SDK or llama_cpp.
"""

from __future__ import annotations

from backend.llm.factory import Provider, build_chat_model
from backend.llm.port import (
    ChatModel,
    Completion,
    Delta,
    Finish,
    JsonSchema,
    LLMBadRequest,
    LLMError,
    LLMRateLimited,
    LLMStreamInterrupted,
    LLMUnavailable,
    Message,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
    collect,
)

__all__ = [
    "ChatModel",
    "Completion",
    "Delta",
    "Finish",
    "JsonSchema",
    "LLMBadRequest",
    "LLMError",
    "LLMRateLimited",
    "LLMStreamInterrupted",
    "LLMUnavailable",
    "Message",
    "Provider",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "build_chat_model",
    "collect",
]
