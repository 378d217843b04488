from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.llm.scripted_server import Reply
from tests.web.harness import AppHarness


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path) as harness:
        yield harness


def sse_lines(response: httpx.Response) -> list[str]:
    return [line for line in response.iter_lines() if line and not line.startswith(":")]


def test_sdk_streaming_one_id_role_first_finish_and_usage(h: AppHarness) -> None:
    client = openai.OpenAI(base_url=h.base_url + "/v1", api_key="unused")
    h.chat.enqueue(Reply(chunks=["Hel", "lo", "!"]))
    chunks = list(
        client.chat.completions.create(
            model="companion",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello!"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and all(f is None for f in finishes[:-1])
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert {c.model for c in chunks} == {"companion"}


def test_sdk_non_streaming_and_session_header(h: AppHarness) -> None:
    client = openai.OpenAI(base_url=h.base_url + "/v1", api_key="unused")
    raw = client.chat.completions.with_raw_response.create(
        model="companion", messages=[{"role": "user", "content": "hello"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello there!"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    session = raw.headers["x-session-id"]
    # Continue the same session: the server holds the history.
    h.chat.enqueue(Reply(chunks=["again"]))
    client.chat.completions.create(
        model="companion",
        messages=[{"role": "user", "content": "second"}],
        extra_headers={"X-Session-Id": session},
    )
    transcript = h.services.sessions.transcript(session)
    assert [m.content for m in transcript] == ["hello", "Hello there!", "second", "again"]


@pytest.mark.anyio
async def test_async_sdk_streaming(h: AppHarness) -> None:
    client = openai.AsyncOpenAI(base_url=h.base_url + "/v1", api_key="unused")
    stream = await client.chat.completions.create(
        model="companion", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(parts) == "Hello there!"
    done = await client.chat.completions.create(
        model="companion", messages=[{"role": "user", "content": "hi"}]
    )
    assert done.choices[0].message.content == "Hello there!"
    await client.close()


def test_nemo_ui_request_shape_over_http(h: AppHarness) -> None:
    body = {
        "messages": [{"role": "user", "content": "hi from nemo"}],
        "model": "string",
        "temperature": 0,
        "max_tokens": 0,
        "top_p": 0,
        "use_knowledge_base": True,
        "top_k": 0,
        "collection_name": "string",
        "stop": True,
        "stream": True,
        "additional_props": {"enableIntermediateSteps": True},
    }
    headers = {
        "Conversation-Id": "conv-123",
        "X-Timezone": "Asia/Shanghai",
        "User-Message-ID": "m-1",
    }
    with httpx.stream("POST", h.base_url + "/chat/stream", json=body, headers=headers) as r:
        assert r.status_code == 200 and r.headers["x-session-id"] == "conv-123"
        lines = sse_lines(r)
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    steps = [
        json.loads(line[len("intermediate_data: ") :])
        for line in lines
        if line.startswith("intermediate_data: ")
    ]
    assert lines[-1] == "data: [DONE]"
    assert (
        "".join(d["choices"][0]["delta"].get("content", "") for d in data if d["choices"])
        == "Hello there!"
    )
    assert [s["name"] for s in steps] == ["Memory activation", "Memory report"]
    # Placeholders were not forwarded upstream; temperature 0 is greedy (issue 15).
    sent = h.chat.chat_requests[-1].body
    assert "max_tokens" not in sent and "top_p" not in sent and "top_k" not in sent
    assert "stop" not in sent and sent.get("temperature") == 0
    assert sent["model"] == "scripted"


def test_the_nemo_ui_path_always_gets_the_memory_steps(h: AppHarness) -> None:
    # No version of the UI sends a flag for steps, and it shows every one it gets
    # (NeMo-Agent-Toolkit-UI proxy/response-processors.js:21-46, 68-82).
    body = {"messages": [{"role": "user", "content": "hi"}], "model": "placeholder", "stream": True}
    with httpx.stream("POST", h.base_url + "/chat/stream", json=body) as r:
        lines = sse_lines(r)
    steps = [json.loads(line[19:]) for line in lines if line.startswith("intermediate_data: ")]
    assert [s["name"] for s in steps] == ["Memory activation", "Memory report"]
    assert all(s["id"] and isinstance(s["payload"], str) for s in steps)
    assert lines[-1] == "data: [DONE]"


def test_no_intermediate_data_by_default(h: AppHarness) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", h.base_url + "/v1/chat/completions", json=body) as r:
        lines = sse_lines(r)
    assert not any(line.startswith("intermediate_data") for line in lines)


def test_full_history_clients_do_not_duplicate_history(h: AppHarness) -> None:
    client = openai.OpenAI(base_url=h.base_url + "/v1", api_key="unused")
    history = [
        {"role": "system", "content": "Answer like a pirate."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]
    raw = client.chat.completions.with_raw_response.create(model="companion", messages=history)
    session = raw.headers["x-session-id"]
    upstream = h.chat.chat_requests[-1].body["messages"]
    assert upstream[0]["role"] == "system" and upstream[0]["content"].endswith(
        "Answer like a pirate."
    )
    assert [m["content"] for m in upstream[-3:]] == [
        "first question",
        "first answer",
        "second question",
    ]
    # The client resends everything next time: nothing is duplicated.
    client.chat.completions.create(
        model="companion",
        extra_headers={"X-Session-Id": session},
        messages=[
            *history,
            {"role": "assistant", "content": "Hello there!"},
            {"role": "user", "content": "third"},
        ],
    )
    contents = [m.content for m in h.services.sessions.transcript(session)]
    assert contents.count("first question") == 1 and contents[-2:] == ["third", "Hello there!"]


def test_models_lists_personas(h: AppHarness) -> None:
    client = openai.OpenAI(base_url=h.base_url + "/v1", api_key="unused")
    assert "companion" in [m.id for m in client.models.list()]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (
            {"model": "nobody", "messages": [{"role": "user", "content": "x"}]},
            404,
            "model_not_found",
        ),
        ({"messages": []}, 400, "invalid_request"),
        ({"messages": [{"role": "system", "content": "x"}]}, 400, "invalid_messages"),
        ({"messages": [{"role": "user", "content": "  "}]}, 400, "invalid_messages"),
        ({"messages": "nope"}, 400, "invalid_request"),
        (
            {"messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
            400,
            "invalid_request",
        ),
    ],
)
def test_bad_requests_get_openai_errors(h: AppHarness, body: dict, status: int, code: str) -> None:
    r = httpx.post(h.base_url + "/v1/chat/completions", json=body)
    assert r.status_code == status
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]
    assert h.services.sessions.list_sessions("local") == []  # nothing stored half-way


def test_invalid_json_and_oversize_body(h: AppHarness) -> None:
    r = httpx.post(
        h.base_url + "/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400 and "error" in r.json()
    big = {"messages": [{"role": "user", "content": "x" * 2_000_000}]}
    r = httpx.post(h.base_url + "/v1/chat/completions", json=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


def test_upstream_down_before_first_token_is_a_502(h: AppHarness) -> None:
    h.chat.enqueue(Reply.error(500))
    r = httpx.post(
        h.base_url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "stream": True},
    )
    assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_error"
    session = r.headers["x-session-id"]
    rows = h.services.sessions.transcript(session)
    assert [(m.role, m.status) for m in rows] == [("user", "complete"), ("assistant", "incomplete")]


def test_upstream_drop_mid_stream_ends_with_error_event(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["one ", "two ", "three"], drop_after=2))
    with httpx.stream(
        "POST",
        h.base_url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "stream": True},
    ) as r:
        assert r.status_code == 200
        lines = sse_lines(r)
        session = r.headers["x-session-id"]
    assert lines[-1] == "data: [DONE]"
    assert json.loads(lines[-2][6:])["error"]["type"] == "upstream_error"
    rows = h.services.sessions.transcript(session)
    assert (rows[-1].content, rows[-1].status) == ("one two ", "incomplete")
    # The next turn works.
    r = httpx.post(
        h.base_url + "/v1/chat/completions",
        headers={"X-Session-Id": session},
        json={"messages": [{"role": "user", "content": "again"}]},
    )
    assert r.status_code == 200


def test_healthz(h: AppHarness) -> None:
    r = httpx.get(h.base_url + "/healthz")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok"
    assert body["dependencies"]["chat"]["ok"] and body["dependencies"]["vector_store"]["ok"]
    assert h.chat.chat_requests == []  # health never calls a model


def test_client_leaving_mid_stream_does_not_lock_the_session(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=[f"w{i} " for i in range(40)], chunk_delay_s=0.05))
    body = {"messages": [{"role": "user", "content": "long story please"}], "stream": True}
    with httpx.stream("POST", h.base_url + "/v1/chat/completions", json=body) as r:
        session = r.headers["x-session-id"]
        for line in r.iter_lines():
            if '"content"' in line:
                break  # leave after the first token
    # The next turn of that session must not wait forever for the abandoned one.
    r = httpx.post(
        h.base_url + "/v1/chat/completions",
        headers={"X-Session-Id": session},
        json={"messages": [{"role": "user", "content": "still there?"}]},
        timeout=10,
    )
    assert r.status_code == 200
    rows = h.services.sessions.transcript(session)
    assert [(m.role, m.status) for m in rows] == [
        ("user", "complete"),
        ("assistant", "incomplete"),
        ("user", "complete"),
        ("assistant", "complete"),
    ]


def test_stream_asks_proxies_not_to_buffer(h: AppHarness) -> None:
    # docs/deployment.md: nginx passes tokens on at once when the response says so.
    with httpx.stream(
        "POST",
        h.base_url + "/v1/chat/completions",
        json={
            "model": "companion",
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["cache-control"] == "no-store"
        assert sse_lines(response)[-1] == "data: [DONE]"


def test_a_user_field_unfit_for_a_header_still_names_one_session(h: AppHarness) -> None:
    """Found by the fuzz test: a ``user`` with a tab or non-ASCII became the session id and
    broke the ``X-Session-Id`` header mid-response."""
    h.chat.enqueue(Reply(chunks=["one"]))
    h.chat.enqueue(Reply(chunks=["two"]))
    body = {"messages": [{"role": "user", "content": "hi"}], "user": "Zoë\tthe user"}
    first = httpx.post(h.base_url + "/v1/chat/completions", json=body, timeout=30)
    again = httpx.post(h.base_url + "/v1/chat/completions", json=body, timeout=30)
    assert first.status_code == again.status_code == 200
    session = first.headers["x-session-id"]
    assert session.startswith("u-") and session.isascii()
    assert again.headers["x-session-id"] == session


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stream", "yes"),
        ("stream", "1"),
        ("stream", 1),
        ("temperature", "0.5"),
        ("max_tokens", 1.5),
        ("max_tokens", "100"),
        ("top_p", "1"),
        ("n", "2"),
        ("n", True),
        ("seed", "7"),
        ("stop", 5),
        ("user", 12),
    ],
)
def test_fields_take_their_json_type_only(h: AppHarness, field: str, value: object) -> None:
    """As OpenAI answers: a wrong JSON type is a 400 naming the field, never coerced."""
    body = {"messages": [{"role": "user", "content": "hi"}], field: value}
    r = httpx.post(h.base_url + "/v1/chat/completions", json=body)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == field and error["message"].startswith(f"{field}")
    assert h.services.sessions.list_sessions("local") == []  # nothing stored


def test_integers_are_numbers_and_the_nemo_quirks_still_work(h: AppHarness) -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 1,  # an integer is a number
        "top_p": 1,
        "frequency_penalty": 0,
        "stop": True,  # the NeMo Agent Toolkit schema's placeholder
        "max_tokens": 0,
    }
    r = httpx.post(h.base_url + "/v1/chat/completions", json=body)
    assert r.status_code == 200
    sent = h.chat.chat_requests[-1].body
    assert sent["temperature"] == 1 and sent["top_p"] == 1 and "stop" not in sent


def test_a_message_with_a_wrong_type_names_its_place(h: AppHarness) -> None:
    body = {"messages": [{"role": "user", "content": 5}]}
    r = httpx.post(h.base_url + "/v1/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages.0.content"
