from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.llm.openai_compat import NO_KEY_PLACEHOLDER, OpenAICompatChatModel
from backend.llm.openai_request import without_size_bounds
from backend.llm.port import (
    Delta,
    Finish,
    LLMBadRequest,
    LLMRateLimited,
    LLMStreamInterrupted,
    LLMUnavailable,
    Sampling,
    TextDelta,
    ToolCall,
    Usage,
)
from tests.llm.scripted_server import Reply, ScriptedOpenAIServer, ScriptedToolCall

pytestmark = pytest.mark.anyio

SECRET = "sk-test-very-secret-key-0123456789"
HELLO = [{"role": "user", "content": "hello"}]
SCHEMA: dict[str, Any] = {
    "title": "mood report",
    "type": "object",
    "properties": {"label": {"type": "string", "maxLength": 20}},
    "required": ["label"],
}
TOOL = {
    "type": "function",
    "function": {
        "name": "memory_recall",
        "description": "Recall memories about the user.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


def adapter(server: ScriptedOpenAIServer, **options: Any) -> OpenAICompatChatModel:
    settings: dict[str, Any] = {"api_key": SECRET, "timeout": 5.0, "max_retries": 2}
    settings.update(options)
    return OpenAICompatChatModel(base_url=server.base_url, model="scripted-model", **settings)


async def drain(deltas: AsyncIterator[Delta]) -> list[Delta]:
    return [d async for d in deltas]


def text_of(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas if isinstance(d, TextDelta))


async def test_streams_text_deltas_then_usage_then_finish(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["Hel", "lo", " you"], usage=(11, 3)))
    model = adapter(server)
    deltas = await drain(model.stream(HELLO))
    await model.aclose()

    assert deltas == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta(" you"),
        Usage(prompt_tokens=11, completion_tokens=3),
        Finish("stop"),
    ]
    body = server.chat_requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == HELLO
    assert body["model"] == "scripted-model"


async def test_complete_collects_the_stream(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["a", "b"], usage=(5, 2)))
    model = adapter(server)
    completion = await model.complete(HELLO)
    await model.aclose()
    assert completion.text == "ab"
    assert completion.finish_reason == "stop"
    assert completion.usage == Usage(5, 2)
    assert completion.tool_calls == ()


async def test_tool_calls_are_assembled_from_fragments(server: ScriptedOpenAIServer) -> None:
    arguments = json.dumps({"query": "coffee", "k": 3})
    server.enqueue(
        Reply(
            chunks=[],
            tool_calls=[
                ScriptedToolCall("memory_recall", arguments, id="call_a"),
                ScriptedToolCall("memory_store", '{"content": "likes tea"}', id="call_b"),
            ],
        )
    )
    model = adapter(server)
    completion = await model.complete(HELLO, tools=[TOOL])
    await model.aclose()

    assert completion.tool_calls == (
        ToolCall("call_a", "memory_recall", arguments),
        ToolCall("call_b", "memory_store", '{"content": "likes tea"}'),
    )
    assert completion.finish_reason == "tool_calls"
    assert server.chat_requests[0].body["tools"] == [TOOL]
    assert completion.tool_calls[0].as_message_part() == {
        "id": "call_a",
        "type": "function",
        "function": {"name": "memory_recall", "arguments": arguments},
    }


async def test_json_schema_is_sent_as_response_format(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=['{"label":', ' "joy"}']))
    model = adapter(server)
    completion = await model.complete(HELLO, json_schema=SCHEMA)
    await model.aclose()

    assert json.loads(completion.text) == {"label": "joy"}
    response_format = server.chat_requests[0].body["response_format"]
    assert response_format == {
        "type": "json_schema",
        "json_schema": {"name": "mood_report", "schema": SCHEMA},
    }
    assert model.supports_json_schema


async def test_json_schema_rejected_falls_back_to_json_object_and_remembers(
    server: ScriptedOpenAIServer,
) -> None:
    server.reject = {"json_schema", "json_object_schema"}
    model = adapter(server)
    system = [{"role": "system", "content": "You are terse."}, *HELLO]
    first = await model.complete(system, json_schema=SCHEMA)
    second = await model.complete(system, json_schema=SCHEMA)
    await model.aclose()

    assert first.text and second.text
    sent = [r.body for r in server.chat_requests]
    assert [b.get("response_format") for b in sent] == [
        {"type": "json_schema", "json_schema": {"name": "mood_report", "schema": SCHEMA}},
        # llama-cpp-python's way, the size bounds left out of its grammar
        {"type": "json_object", "schema": without_size_bounds(SCHEMA)},
        {"type": "json_object"},
        {"type": "json_object"},  # remembered: no second json_schema attempt
    ]
    # the schema travels in the (single, leading) system message instead
    messages = sent[2]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("You are terse.\n\n")
    assert '"maxLength": 20' in messages[0]["content"]
    # the rejection was about response_format, so usage is still requested
    assert sent[2]["stream_options"] == {"include_usage": True}
    assert model.json_mode == "json_object"
    assert not model.supports_json_schema


async def test_json_modes_rejected_falls_back_to_prompting(server: ScriptedOpenAIServer) -> None:
    server.reject = {"json_schema", "json_object"}
    model = adapter(server)
    await model.complete(HELLO, json_schema=SCHEMA)
    await model.complete(HELLO, json_schema=SCHEMA)
    await model.aclose()

    sent = [r.body for r in server.chat_requests]
    assert [b.get("response_format", {}).get("type") for b in sent] == [
        "json_schema",
        "json_object",  # with the schema beside it
        "json_object",
        None,
        None,
    ]
    assert sent[-1]["messages"][0]["role"] == "system"
    assert "JSON Schema" in sent[-1]["messages"][0]["content"]
    assert model.json_mode == "prompt"


async def test_stream_options_rejected_is_retried_without_and_remembered(
    server: ScriptedOpenAIServer,
) -> None:
    server.reject = {"stream_options"}
    server.enqueue(Reply(chunks=["x"]))
    server.enqueue(Reply(chunks=["y"]))
    model = adapter(server)
    first = await drain(model.stream(HELLO))
    second = await drain(model.stream(HELLO))
    await model.aclose()

    assert first == [TextDelta("x"), Finish("stop")]  # no usage: it was not asked for
    assert second == [TextDelta("y"), Finish("stop")]
    assert ["stream_options" in r.body for r in server.chat_requests] == [True, False, False]


async def test_500_then_success_is_retried_before_the_first_token(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(Reply.error(500))
    server.enqueue(Reply(chunks=["fine"]))
    model = adapter(server)
    completion = await model.complete(HELLO)
    await model.aclose()
    assert completion.text == "fine"
    assert len(server.chat_requests) == 2


async def test_500_forever_is_unavailable(server: ScriptedOpenAIServer) -> None:
    server.default = Reply.error(503, "overloaded")
    model = adapter(server, max_retries=2)
    with pytest.raises(LLMUnavailable) as caught:
        await model.complete(HELLO)
    await model.aclose()
    assert len(server.chat_requests) == 3  # the first try and two retries
    assert caught.value.status == 503
    assert "503" in str(caught.value)
    assert "scripted-model" in str(caught.value)


async def test_429_is_retried_then_rate_limited(server: ScriptedOpenAIServer) -> None:
    server.default = Reply.error(429, "slow down")
    model = adapter(server, max_retries=1)
    with pytest.raises(LLMRateLimited) as caught:
        await model.complete(HELLO)
    await model.aclose()
    assert len(server.chat_requests) == 2
    assert caught.value.status == 429


async def test_429_then_success(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply.error(429))
    server.enqueue(Reply(chunks=["ok"]))
    model = adapter(server)
    assert (await model.complete(HELLO)).text == "ok"
    await model.aclose()


async def test_400_is_a_bad_request_without_retry(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply.error(400, "messages must not be empty"))
    server.enqueue(Reply.error(400, "messages must not be empty"))
    model = adapter(server)
    with pytest.raises(LLMBadRequest) as caught:
        await model.complete(HELLO)
    await model.aclose()
    # one more request without stream_options (the server might not have known it),
    # then the error: nothing is retried as such.
    assert len(server.chat_requests) == 2
    assert caught.value.status == 400
    assert "messages must not be empty" in str(caught.value)


async def test_401_is_a_bad_request_and_never_shows_the_key(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply.error(401, f"Incorrect API key provided: {SECRET}"))
    model = adapter(server)
    with pytest.raises(LLMBadRequest) as caught:
        await model.complete(HELLO)
    await model.aclose()
    assert len(server.chat_requests) == 1
    assert SECRET not in str(caught.value)
    assert "***" in str(caught.value)


async def test_timeout_before_headers_is_unavailable(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(hang=True))
    model = adapter(server, timeout=0.3, max_retries=0)
    with pytest.raises(LLMUnavailable) as caught:
        await model.complete(HELLO)
    await model.aclose()
    assert "0.3 s" in str(caught.value)


async def test_connection_refused_is_unavailable() -> None:
    with ScriptedOpenAIServer() as gone:
        base_url = gone.base_url
    model = OpenAICompatChatModel(base_url=base_url, model="m", timeout=1.0, max_retries=0)
    with pytest.raises(LLMUnavailable, match="connection failed"):
        await model.complete(HELLO)
    await model.aclose()


async def test_dropped_mid_stream_is_interrupted_with_partial_text(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(Reply(chunks=["one", " two", " three", " four"], drop_after=2))
    model = adapter(server)
    received: list[Delta] = []
    with pytest.raises(LLMStreamInterrupted) as caught:
        async for delta in model.stream(HELLO):
            received.append(delta)
    await model.aclose()
    assert received == [TextDelta("one"), TextDelta(" two")]
    assert caught.value.partial_text == "one two"
    assert len(server.chat_requests) == 1  # never retried after the first token


async def test_stalled_mid_stream_times_out_as_interrupted(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["a", "b", "c"], stall_after=1))
    model = adapter(server, timeout=0.3)
    with pytest.raises(LLMStreamInterrupted) as caught:
        await model.complete(HELLO)
    await model.aclose()
    assert caught.value.partial_text == "a"
    assert len(server.chat_requests) == 1


async def test_error_event_mid_stream_is_interrupted(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["so", " far", " so"], error_event_after=2, error_message="gone"))
    model = adapter(server)
    with pytest.raises(LLMStreamInterrupted, match="gone") as caught:
        await model.complete(HELLO)
    await model.aclose()
    assert caught.value.partial_text == "so far"


async def test_dropped_before_the_first_token_is_unavailable(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["never"], drop_after=0))
    model = adapter(server)
    with pytest.raises(LLMUnavailable):
        await model.complete(HELLO)
    await model.aclose()


async def test_no_placeholders_are_sent(server: ScriptedOpenAIServer) -> None:
    model = adapter(server, temperature=None, max_tokens=0)
    await model.complete(HELLO, max_tokens=0)
    await model.complete(HELLO, temperature=0.2, max_tokens=64)
    await model.aclose()
    first, second = (r.body for r in server.chat_requests)
    assert "max_tokens" not in first
    assert "temperature" not in first
    assert "tools" not in first
    assert "response_format" not in first
    assert second["temperature"] == 0.2
    assert second["max_tokens"] == 64


async def test_constructor_defaults_apply_and_calls_override(server: ScriptedOpenAIServer) -> None:
    model = adapter(server, temperature=0.7, max_tokens=100)
    await model.complete(HELLO)
    await model.complete(HELLO, temperature=0.0, max_tokens=5)
    await model.aclose()
    first, second = (r.body for r in server.chat_requests)
    assert (first["temperature"], first["max_tokens"]) == (0.7, 100)
    assert (second["temperature"], second["max_tokens"]) == (0.0, 5)


async def test_key_is_sent_only_as_bearer(server: ScriptedOpenAIServer) -> None:
    model = adapter(server)
    await model.complete(HELLO)
    await model.aclose()
    request = server.chat_requests[0]
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET.encode() not in request.raw_body


async def test_empty_key_sends_the_placeholder_not_the_environment_key(
    server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    model = adapter(server, api_key="")
    await model.complete(HELLO)
    await model.aclose()
    assert server.chat_requests[0].headers["authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"


async def test_tools_on_a_model_without_tool_support_are_refused(
    server: ScriptedOpenAIServer,
) -> None:
    model = adapter(server, supports_tools=False)
    with pytest.raises(LLMBadRequest, match="tool"):
        await model.complete(HELLO, tools=[TOOL])
    await model.aclose()
    assert server.chat_requests == []


async def test_closing_the_stream_early_releases_the_request(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=["a", "b", "c", "d"], chunk_delay_s=0.05))
    server.enqueue(Reply(chunks=["next"]))
    model = adapter(server)
    stream = model.stream(HELLO)
    async for delta in stream:
        assert delta == TextDelta("a")
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert (await model.complete(HELLO)).text == "next"
    await model.aclose()


async def test_message_text_is_not_logged_at_info(
    server: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.reject = {"json_schema"}
    caplog.set_level(logging.DEBUG, logger="backend.llm.openai_compat")
    model = adapter(server)
    await model.complete([{"role": "user", "content": "my secret diary"}], json_schema=SCHEMA)
    await model.aclose()
    assert "my secret diary" not in caplog.text
    assert "Hello from" not in caplog.text


SAMPLING_FIELDS = (
    "stop",
    "seed",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
)


async def test_sampling_parameters_arrive_in_the_body_as_sent(
    server: ScriptedOpenAIServer,
) -> None:
    model = adapter(server, temperature=0.7)
    sampling = Sampling(
        stop=(",", "\n\nUser:"),
        seed=1234,
        top_p=0.9,
        top_k=20,
        min_p=0.05,
        frequency_penalty=0.5,
        presence_penalty=-0.25,
        logit_bias={"50256": -100, "11": 2.5},
    )
    await drain(model.stream(HELLO, temperature=0, sampling=sampling))
    await model.aclose()

    body = server.chat_requests[0].body
    assert body["temperature"] == 0  # sent, not taken for "unset" (the default is 0.7)
    assert body["stop"] == [",", "\n\nUser:"]
    assert body["seed"] == 1234
    assert body["top_p"] == 0.9
    assert body["frequency_penalty"] == 0.5
    assert body["presence_penalty"] == -0.25
    assert body["logit_bias"] == {"50256": -100, "11": 2.5}
    # not OpenAI parameters: top-level fields of the JSON body (extra_body), as vLLM,
    # llama.cpp's server, Ollama and LM Studio read them
    assert body["top_k"] == 20
    assert body["min_p"] == 0.05
    assert "extra_body" not in body
    assert body["messages"] == HELLO


async def test_complete_passes_the_sampling_on(server: ScriptedOpenAIServer) -> None:
    model = adapter(server)
    await model.complete(HELLO, sampling=Sampling(stop=("END",), top_k=5))
    await model.aclose()
    body = server.chat_requests[0].body
    assert body["stop"] == ["END"]
    assert body["top_k"] == 5
    assert not {"seed", "top_p", "min_p", "logit_bias"} & set(body)


async def test_nothing_is_sent_for_an_empty_sampling(server: ScriptedOpenAIServer) -> None:
    model = adapter(server)
    await model.complete(HELLO)
    await model.complete(HELLO, sampling=Sampling())
    await model.aclose()
    for request in server.chat_requests:
        assert not set(SAMPLING_FIELDS) & set(request.body)
        assert "extra_body" not in request.body
        assert "temperature" not in request.body


async def test_zero_values_are_sent(server: ScriptedOpenAIServer) -> None:
    model = adapter(server)
    await model.complete(
        HELLO,
        temperature=0.0,
        sampling=Sampling(seed=0, top_p=0.0, top_k=0, min_p=0.0, frequency_penalty=0.0),
    )
    await model.aclose()
    body = server.chat_requests[0].body
    assert body["temperature"] == 0
    assert (body["seed"], body["top_p"], body["top_k"], body["min_p"]) == (0, 0, 0, 0)
    assert body["frequency_penalty"] == 0
    assert "presence_penalty" not in body


async def test_images_are_off_unless_configured(server: ScriptedOpenAIServer) -> None:
    plain, vision = adapter(server), adapter(server, supports_images=True)
    assert not plain.supports_images
    assert vision.supports_images
    await plain.aclose()
    await vision.aclose()


# What llama-cpp-python's server (0.3.x) answers for response_format json_schema: a 500
# carrying its pydantic validation error (tests/llm/test_llama_cpp_server.py meets the real one).
LLAMA_CPP_COMPLAINT = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
    "  Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema']"
)


async def test_a_500_that_blames_response_format_steps_down_and_is_remembered(
    server: ScriptedOpenAIServer,
) -> None:
    server.reject, server.reject_status = {"json_schema"}, 500
    server.reject_message = LLAMA_CPP_COMPLAINT
    model = adapter(server)
    first = await model.complete(HELLO, json_schema=SCHEMA)
    await model.complete(HELLO, json_schema=SCHEMA)
    await model.aclose()

    assert first.text
    kinds = [r.body.get("response_format", {}).get("type") for r in server.chat_requests]
    # the SDK retries a 500 itself (max_retries=2) before the adapter reads the complaint
    assert kinds == ["json_schema"] * 3 + ["json_object", "json_object"]
    schema = server.chat_requests[-1].body["response_format"]["schema"]
    assert schema == without_size_bounds(SCHEMA) and "maxLength" not in str(schema)
    assert model.json_mode == "json_object_with_schema"


async def test_a_500_that_blames_nothing_is_a_failure_not_a_step_down(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(Reply.error(500, "CUDA out of memory"), times=3)
    model = adapter(server)
    with pytest.raises(LLMUnavailable):
        await model.complete(HELLO, json_schema=SCHEMA)
    await model.aclose()
    assert {r.body["response_format"]["type"] for r in server.chat_requests} == {"json_schema"}
    assert model.json_mode == "json_schema"


@pytest.mark.parametrize("status", [400, 422, 500])
@pytest.mark.parametrize("field", ["top_k", "min_p", "seed", "logit_bias"])
async def test_a_sampling_field_the_server_names_is_dropped_and_the_rest_sent(
    server: ScriptedOpenAIServer, field: str, status: int
) -> None:
    server.reject, server.reject_status = {field}, status
    server.reject_message = f"Unrecognized request argument supplied: {field}"
    model = adapter(server, max_retries=0)
    sampling = Sampling(top_k=20, min_p=0.05, seed=7, logit_bias={"50256": -100}, top_p=0.9)
    await model.complete(HELLO, sampling=sampling)
    await model.complete(HELLO, sampling=sampling)
    await model.aclose()

    first, retried, second = (r.body for r in server.chat_requests)
    assert field in first
    for body in (retried, second):  # remembered: the second call does not try it again
        assert field not in body
        assert body["top_p"] == 0.9  # the other fields still go
        assert {"top_k", "min_p", "seed", "logit_bias"} - {field} <= set(body)
    assert model.refused_sampling == {field}


async def test_json_mode_from_the_configuration_is_where_the_client_starts(
    server: ScriptedOpenAIServer,
) -> None:
    model = adapter(server, json_mode="json_object")
    await model.complete(HELLO, json_schema=SCHEMA)
    prompted = adapter(server, json_mode="prompt")
    await prompted.complete(HELLO, json_schema=SCHEMA)
    await model.aclose()
    await prompted.aclose()
    sent = [r.body for r in server.chat_requests]
    assert sent[0]["response_format"] == {"type": "json_object"}
    assert "response_format" not in sent[1]
    assert "JSON Schema" in sent[1]["messages"][0]["content"]


async def test_on_one_slot_server_the_hippocampus_opens_only_once_the_reply_ended(
    server: ScriptedOpenAIServer,
) -> None:
    """Both roles on one local server (``services.reply_first``): a background request
    waits for the streaming reply, which it would otherwise cut short there."""
    from backend.llm.reply_first import ReplyFirst

    turns = ReplyFirst()
    chat = adapter(server, reply_first=turns)
    hippocampus = adapter(server, reply_first=turns, background=True)
    server.enqueue(Reply(chunks=["one", " two", " three"], chunk_delay_s=0.05))
    requests_when_the_reply_ended: list[int] = []
    remembering: list[asyncio.Task[Any]] = []
    async for delta in chat.stream(HELLO):
        if isinstance(delta, TextDelta) and delta.text == "one":  # mid-reply
            remembering.append(asyncio.create_task(hippocampus.complete(HELLO, json_schema=SCHEMA)))
            await asyncio.sleep(0)  # let it try to open its request
    requests_when_the_reply_ended.append(len(server.chat_requests))
    await remembering[0]
    await chat.aclose()
    await hippocampus.aclose()
    assert requests_when_the_reply_ended == [1]  # the hippocampus had not sent yet
    assert len(server.chat_requests) == 2
    assert "response_format" in server.chat_requests[1].body
