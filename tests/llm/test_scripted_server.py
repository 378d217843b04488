"""The scripted server itself: raw SSE framing, non-streaming replies, the model list."""

from __future__ import annotations

import json
import urllib.request

import openai
import pytest

from tests.llm.scripted_server import Reply, ScriptedOpenAIServer, ScriptedToolCall

pytestmark = pytest.mark.anyio


def test_stream_is_real_sse(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["a", "b"]))
    body = json.dumps(
        {"model": "x", "stream": True, "messages": [], "stream_options": {"include_usage": True}}
    ).encode()
    request = urllib.request.Request(
        server.base_url + "/chat/completions", data=body, method="POST"
    )
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        raw = response.read().decode()
    events = raw.split("\n\n")
    assert events[-1] == ""
    assert events[-2] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == ["a", "b"]
    assert chunks[3]["choices"][0]["finish_reason"] == "stop"
    assert chunks[4]["usage"]["completion_tokens"] == 2
    assert {c["id"] for c in chunks} == {"chatcmpl-scripted"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


async def test_non_streaming_and_models_with_the_sdk(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["Hi", "!"], tool_calls=[ScriptedToolCall("f", "{}")]))
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k") as client:
        completion = await client.chat.completions.create(
            model="scripted-model", messages=[{"role": "user", "content": "x"}]
        )
        models = await client.models.list()
    assert completion.choices[0].message.content == "Hi!"
    assert completion.choices[0].message.tool_calls is not None
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage is not None and completion.usage.total_tokens == 10
    assert [m.id for m in models.data] == ["scripted-model"]
    assert [r.path for r in server.requests] == ["/v1/chat/completions", "/v1/models"]
