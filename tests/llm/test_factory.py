from __future__ import annotations

from pathlib import Path

import pytest

from backend.llm import LLMUnavailable, build_chat_model
from backend.llm.openai_compat import OpenAICompatChatModel

pytestmark = pytest.mark.anyio


async def test_openai_provider_builds_the_compat_adapter() -> None:
    model = build_chat_model("openai", base_url="http://127.0.0.1:9/v1", model="m", max_tokens=0)
    assert isinstance(model, OpenAICompatChatModel)
    assert model.model == "m"
    assert model.supports_tools
    assert not model.supports_images
    await model.aclose()
    vision = build_chat_model(
        "openai", base_url="http://127.0.0.1:9/v1", model="m", supports_images=True
    )
    assert vision.supports_images
    await vision.aclose()


def test_embedded_provider_with_a_missing_file_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(LLMUnavailable):
        build_chat_model("embedded", model_path=tmp_path / "none.gguf")


def test_unknown_provider_or_option_fails_at_once() -> None:
    with pytest.raises(ValueError, match="unknown LLM provider"):
        build_chat_model("anthropic", model="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        build_chat_model("openai", base_url="http://127.0.0.1:9/v1", model="m", colour="red")


def test_a_remote_chat_model_may_be_configured_for_images() -> None:
    from pydantic import ValidationError

    from backend.config import OpenAIChat, Settings

    remote = {"provider": "openai", "model": "gpt-4o-mini"}
    plain = Settings.model_validate({"chat": remote}).chat
    assert isinstance(plain, OpenAIChat) and not plain.vision
    chat = Settings.model_validate({"chat": remote | {"vision": True}}).chat
    assert isinstance(chat, OpenAIChat) and chat.vision
    with pytest.raises(ValidationError, match="vision"):  # no vision switch when embedded
        Settings.model_validate({"chat": {"vision": True}})
