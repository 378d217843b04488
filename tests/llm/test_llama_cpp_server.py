"""The app against llama-cpp-python's own OpenAI-compatible server, started as the README
tells a user to (``python -m llama_cpp.server --model ... --chat_format chatml``), with
no ``json_mode`` set: the issue-26 setup where every hippocampus run failed with HTTP 500.

What this server does, met here: it knows ``response_format`` only as ``text`` or
``json_object`` (with an optional ``schema``, made into a grammar) and answers 500 to
``json_schema``; it takes ``top_k``, ``min_p``, ``seed``, ``logit_bias`` and
``stream_options``; it serves one request at a time and cuts a running stream short
(a clean ``[DONE]``) when another comes in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from backend.engine.services import build_services
from backend.engine.turn_types import TurnRequest
from backend.hippocampus import hippocampus_schema
from backend.llm.fake import FakeChatModel
from backend.llm.openai_compat import OpenAICompatChatModel
from backend.llm.openai_request import without_size_bounds
from backend.llm.port import Sampling
from backend.stores.in_memory import InMemoryVectorStore
from tests.engine.wiring import app_settings
from tests.llm.llama_cpp_server import ALIAS, llama_cpp_server, require_server
from tests.stores.fakes import BagOfWordsEmbedder

pytestmark = [pytest.mark.anyio, pytest.mark.real_model]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_server()
    log = tmp_path_factory.mktemp("llama-cpp-server") / "server.log"
    with llama_cpp_server(log) as url:
        yield url


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_adapter_learns_what_the_server_takes(base_url: str) -> None:
    model = OpenAICompatChatModel(base_url=base_url, model=ALIAS, max_retries=0)
    schema = hippocampus_schema()
    completion = await model.complete(
        [{"role": "user", "content": "I'm Priya, a nurse in Leeds."}],
        json_schema=schema,
        max_tokens=200,
        sampling=Sampling(top_k=20, min_p=0.05, seed=7, logit_bias={"0": -1.0}),
    )
    await model.aclose()
    # json_schema → 500 → JSON mode with the schema (a grammar), remembered
    assert model.json_mode == "json_object_with_schema"
    assert model.refused_sampling == frozenset()  # every sampling field was taken
    # stream_options is taken (no step down), though this server sends no usage chunk
    assert completion.usage is None
    if completion.finish_reason == "stop":  # the grammar holds it to the schema's shape
        jsonschema.validate(json.loads(completion.text), without_size_bounds(schema))


async def test_a_turn_replies_and_memory_forms_with_no_json_mode_set(
    base_url: str, tmp_path: Path
) -> None:
    role = {"provider": "openai", "base_url": base_url, "model": ALIAS}
    # The run's time is not what this checks: a loaded 2-core CI machine once took over
    # the default 120 s (25 s alone), so the hippocampus gets the embedded role's 300 s.
    hippocampus = {**role, "temperature": 0.0, "timeout": 300.0}
    settings = app_settings(tmp_path / "data", chat=role, hippocampus=hippocampus)
    services = build_services(
        settings, command="test", embedder=BagOfWordsEmbedder(), store=InMemoryVectorStore()
    )
    try:
        request = TurnRequest(user_id="u1", text="I'm allergic to peanuts, and I work as a nurse.")
        async with services.engine.turn(request) as turn:
            streamed = [piece async for piece in turn.stream()]
        await services.engine.drain()
        reports = [r.report for r in services.sessions.turn_reports(turn.session.id)]
    finally:
        await services.aclose()

    assert len(streamed) > 1 and turn.reply.strip()  # the reply streamed, in pieces
    hippocampus = reports[-1]["hippocampus"]
    assert hippocampus["status"] == "ok", hippocampus
    assert hippocampus["mode"] == "compact"  # auto, for a server on this machine
    assert services.hippocampus.json_mode == "json_object_with_schema"  # type: ignore[attr-defined]
    assert reports[-1]["written"], reports[-1]  # a memory formed from the first turn
    assert services.engine.memory_health.warning() is None


@pytest.fixture(scope="module")
def tools_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_server()
    log = tmp_path_factory.mktemp("llama-cpp-server-tools") / "server.log"
    with llama_cpp_server(log, chat_format="chatml-function-calling") as url:
        yield url


async def test_the_memory_tools_reach_a_server_started_for_function_calling(
    tools_url: str, tmp_path: Path
) -> None:
    # docs/configuration.md: `"tools": true` on a llama-cpp-python server started with
    # `--chat_format chatml-function-calling`. The reply model is the real client on the
    # real server; the hippocampus is a quiet stand-in (this chat format is for chat).
    role = {"provider": "openai", "base_url": tools_url, "model": ALIAS, "tools": True}
    settings = app_settings(tmp_path / "data", chat=role)
    quiet = FakeChatModel("quiet", default=[json.dumps({"facts": [], "emotion": "neutral"})])
    services = build_services(
        settings, command="test", hippocampus=quiet, embedder=BagOfWordsEmbedder(),
        store=InMemoryVectorStore(),
    )  # fmt: skip
    sent: list[list[str]] = []
    stream = services.engine.chat.stream

    def spy(messages: Any, **kwargs: Any) -> Any:
        sent.append([tool["function"]["name"] for tool in kwargs.get("tools") or ()])
        return stream(messages, **kwargs)

    services.engine.chat.stream = spy  # type: ignore[method-assign]
    try:
        request = TurnRequest(user_id="u1", text="Do you remember what I told you about my dog?")
        async with services.engine.turn(request) as turn:
            streamed = [piece async for piece in turn.stream()]
        await services.engine.drain()
    finally:
        await services.aclose()
    # The tools were sent, the server took them (no error, nothing dropped), and the turn
    # ended in a reply: in text, or after the model called a tool and read its result.
    assert sent and sent[0] == ["memory_recall", "memory_store"]
    assert isinstance(services.chat, OpenAICompatChatModel) and services.chat.supports_tools
    assert turn.status == "complete" and "".join(streamed).strip()
