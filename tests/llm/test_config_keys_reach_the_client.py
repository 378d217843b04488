"""Every key of a remote ``chat``, ``hippocampus`` or ``embedding`` section
(docs/configuration.md, "provider": "openai") changes what the app sends or how it talks
to the server: no key is validated, documented and then dropped on the way (issue 26:
``json_mode`` was).

Each key is set to a value other than its default, the role's model is built as the app
builds it (``services.build_chat_model``) and makes one request to a scripted server;
what the server received, and how the client and the turn are set up, must differ from
the same request with the key left out. A key added to the sections without an entry
here fails ``test_every_key_has_a_check``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backend.config import OpenAIChat, OpenAIEmbedding, OpenAIHippocampus, load_settings
from backend.engine.services import (
    build_chat_model,
    build_embedder,
    hippocampus_mode,
    turn_settings,
)
from tests.embeddings.fake_openai_server import FakeEmbeddingServer
from tests.llm.scripted_server import ScriptedOpenAIServer

pytestmark = pytest.mark.anyio

SCHEMA: dict[str, Any] = {
    "title": "facts",
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
}
HELLO = [{"role": "user", "content": "hello"}]
ENV = {"ROLE_KEY": "sk-from-the-environment"}

# key → the value to set (the server's port is filled in for base_url). The default of
# every key is what a minimal section ({"provider", "base_url", "model"}) gets.
# The keys every remote chat-model section has (the roles add their own below).
REMOTE: dict[str, Any] = {
    "provider": None,  # the tag: "openai" is what this whole test is about
    "base_url": "http://localhost:{port}/v1",
    "model": "another-model",
    "api_key": "sk-written-in-the-file",
    "api_key_env": "ROLE_KEY",
    "timeout": 7.5,
    "max_retries": 5,
    "temperature": 1.3,
    "max_tokens": 99,
}
CHANGED: dict[str, dict[str, Any]] = {
    "chat": {**REMOTE, "tools": True, "vision": True, "reply_guard": False, "retry_deadline": 9.0},
    "hippocampus": {
        **REMOTE,
        "mode": "full",  # auto is compact for a server on loopback
        "json_mode": "object",
        "compact_subjects": True,  # the turn's settings; the grammar's pattern (engine tests)
    },
}
EMBEDDING_CHANGED: dict[str, Any] = {
    "provider": None,
    "base_url": "http://localhost:{port}/v1",
    "model": "another-embedder",
    "api_key": "sk-written-in-the-file",
    "api_key_env": "ROLE_KEY",
    "timeout": 7.5,
    "max_retries": 5,
    "dimensions": 8,
    "batch_size": 1,
}
SECTIONS = {"chat": OpenAIChat, "hippocampus": OpenAIHippocampus}


def test_every_key_has_a_check() -> None:
    for role, section in SECTIONS.items():
        assert set(section.model_fields) == set(CHANGED[role]), role
    assert set(OpenAIEmbedding.model_fields) == set(EMBEDDING_CHANGED)


async def _observe(tmp_path: Path, server: ScriptedOpenAIServer, role: str, extra: dict) -> Any:
    section = {"provider": "openai", "base_url": server.base_url, "model": "scripted-model"}
    section.update(extra)
    other = {"provider": "openai", "base_url": server.base_url, "model": "scripted-model"}
    config = {"chat": other, "hippocampus": other, role: section}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    settings = load_settings(tmp_path / "config.json", ENV)
    model: Any = build_chat_model(settings, role)
    before = len(server.chat_requests)
    await model.complete(HELLO, json_schema=SCHEMA if role == "hippocampus" else None)
    await model.aclose()
    sent = server.chat_requests[before]
    client = model._client  # the SDK client: its timeout and retries are not on the wire
    return {
        "body": sent.body,
        "host": sent.headers.get("host"),
        "authorization": sent.headers.get("authorization"),
        "client": (client.timeout, client.max_retries),
        "model": (model.supports_tools, model.supports_images),
        "turn": turn_settings(settings),
        "mode": hippocampus_mode(settings),
    }


@pytest.mark.parametrize(
    ("role", "key"),
    [(role, key) for role, keys in CHANGED.items() for key, value in keys.items() if value],
)
async def test_the_key_changes_what_is_sent(
    tmp_path: Path, server: ScriptedOpenAIServer, role: str, key: str
) -> None:
    value = CHANGED[role][key]
    if isinstance(value, str):
        value = value.format(port=server.base_url.split(":")[2].split("/")[0])
    default = await _observe(tmp_path, server, role, {})
    changed = await _observe(tmp_path, server, role, {key: value})
    assert changed != default


def _observe_embedding(tmp_path: Path, server: FakeEmbeddingServer, extra: dict) -> Any:
    unused = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "unused"}
    section = {"provider": "openai", "base_url": server.base_url, "model": "embedder"}
    config = {"chat": unused, "hippocampus": unused, "embedding": {**section, **extra}}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    embedder: Any = build_embedder(load_settings(tmp_path / "config.json", ENV))
    before = len(server.requests)
    try:
        embedder.embed(["one", "two"])
        outcome = "ok"
    except Exception as exc:  # a size the server does not give is refused: also a change
        outcome = type(exc).__name__
    client = embedder._client
    client.close()  # its keep-alive connection would hold the server's stop
    return {
        "bodies": server.requests[before:],
        "headers": [(h.get("host"), h.get("authorization")) for h in server.headers[before:]],
        "client": (client.timeout, client.max_retries),
        "outcome": outcome,
    }


@pytest.mark.parametrize("key", [key for key, value in EMBEDDING_CHANGED.items() if value])
def test_the_embedding_key_changes_what_is_sent(tmp_path: Path, key: str) -> None:
    with FakeEmbeddingServer(dim=16) as server:
        value = EMBEDDING_CHANGED[key]
        if isinstance(value, str):
            value = value.format(port=server.base_url.split(":")[2].split("/")[0])
        default = _observe_embedding(tmp_path, server, {})
        changed = _observe_embedding(tmp_path, server, {key: value})
    assert changed != default
