"""The NeMo Agent Toolkit UI WebSocket protocol at /websocket, with the real `websockets` client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.llm.scripted_server import Reply
from tests.web.harness import AppHarness

Message = dict[str, Any]


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path, config={"server": {"max_message_chars": 200}}) as harness:
        yield harness


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[AppHarness]:
    config = {"server": {"api_keys": {"alice-key": "alice"}}}
    with AppHarness(tmp_path, config=config) as harness:
        yield harness


def ws_url(h: AppHarness, query: str = "") -> str:
    return f"ws://127.0.0.1:{h.port}/websocket{query}"


def user_message(text: Any, conversation_id: str | None = None, **extra: Any) -> str:
    message: Message = {
        "type": "user_message",
        "schema_type": "chat_stream",
        "id": extra.pop("id", "m-1"),
        "content": {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]},
        "timestamp": "2025-01-13T10:00:00Z",
        **extra,
    }
    if conversation_id is not None:
        message["conversation_id"] = conversation_id
    return json.dumps(message)


async def receive_until(
    ws: ClientConnection, done: Callable[[list[Message]], bool], timeout: float = 10
) -> list[Message]:
    received: list[Message] = []

    async def loop() -> None:
        while not done(received):
            received.append(json.loads(await ws.recv()))

    await asyncio.wait_for(loop(), timeout)
    return received


def reports(count: int) -> Callable[[list[Message]], bool]:
    """Done once ``count`` memory reports (the last message of a turn) have arrived."""
    return lambda got: sum(is_step(m, "Memory report") for m in got) >= count


def is_step(message: Message, name: str) -> bool:
    return message["type"] == "system_intermediate_message" and message["content"]["name"] == name


def errors(count: int) -> Callable[[list[Message]], bool]:
    return lambda got: sum(m["type"] == "error" for m in got) >= count


def reply_text(messages: list[Message]) -> str:
    return "".join(
        m["content"]["text"]
        for m in messages
        if m["type"] == "system_response_message" and m["status"] == "in_progress"
    )


@pytest.mark.anyio
async def test_nemo_message_streams_chunks_then_complete_with_steps(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["Hel", "lo", "!"]))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi from nemo", "conv-1", id="m-7"))
        got = await receive_until(ws, reports(1))
    kinds = [(m["type"], m.get("status")) for m in got]
    assert kinds == [
        ("system_intermediate_message", "complete"),
        ("system_response_message", "in_progress"),
        ("system_response_message", "in_progress"),
        ("system_response_message", "in_progress"),
        ("system_response_message", "complete"),
        ("system_intermediate_message", "complete"),
    ]
    assert is_step(got[0], "Memory activation") and is_step(got[-1], "Memory report")
    assert json.loads(got[0]["content"]["payload"]) == {"activated": []}
    report = json.loads(got[-1]["content"]["payload"])
    assert report["reply"]["status"] == "complete"
    assert [m["content"]["text"] for m in got[1:4]] == ["Hel", "lo", "!"]
    assert reply_text(got) == "Hello!"
    for m in got:
        assert m["conversation_id"] == "conv-1" and m["parent_id"] == "m-7"
        assert m["id"] and datetime.fromisoformat(m["timestamp"])
    assert len({m["id"] for m in got}) == len(got)
    # conversation_id is the session id: the server holds the conversation.
    transcript = h.services.sessions.transcript("conv-1")
    assert [(m.role, m.content) for m in transcript] == [
        ("user", "hi from nemo"),
        ("assistant", "Hello!"),
    ]


@pytest.mark.anyio
async def test_plain_string_content_and_a_new_conversation(h: AppHarness) -> None:
    async with connect(ws_url(h)) as ws:
        await ws.send(json.dumps({"type": "user_message", "id": "m-1", "content": "hello"}))
        got = await receive_until(ws, reports(1))
        conversation = got[0]["conversation_id"]
        assert conversation and {m["conversation_id"] for m in got} == {conversation}
        assert reply_text(got) == "Hello there!"
        # The new id continues the conversation.
        h.chat.enqueue(Reply(chunks=["again"]))
        await ws.send(user_message("second", conversation, id="m-2"))
        await receive_until(ws, reports(1))
    contents = [m.content for m in h.services.sessions.transcript(conversation)]
    assert contents == ["hello", "Hello there!", "second", "again"]


@pytest.mark.anyio
async def test_non_streaming_schema_sends_one_complete_message(h: AppHarness) -> None:
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-batch", schema_type="chat"))
        got = await receive_until(ws, reports(1))
    responses = [m for m in got if m["type"] == "system_response_message"]
    assert [(m["status"], m["content"]["text"]) for m in responses] == [
        ("complete", "Hello there!")
    ]


@pytest.mark.anyio
async def test_two_conversations_interleave_over_one_socket(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["a1 ", "a2 ", "a3"], chunk_delay_s=0.15))
    h.chat.enqueue(Reply(chunks=["b1 ", "b2 ", "b3"], chunk_delay_s=0.15))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("first", "conv-a", id="ma"))
        await ws.send(user_message("second", "conv-b", id="mb"))
        got = await receive_until(ws, reports(2))
    by_conversation = {
        cid: [m for m in got if m["conversation_id"] == cid] for cid in ("conv-a", "conv-b")
    }
    assert sum(len(ms) for ms in by_conversation.values()) == len(got)
    texts = {cid: reply_text(ms) for cid, ms in by_conversation.items()}
    assert sorted(texts.values()) == ["a1 a2 a3", "b1 b2 b3"]
    for cid, messages in by_conversation.items():
        assert {m["parent_id"] for m in messages} == {"ma" if cid == "conv-a" else "mb"}
        completes = [m for m in messages if m.get("status") == "complete"]
        assert any(m["type"] == "system_response_message" for m in completes)
        # Each conversation got the reply that was stored for its own session.
        transcript = h.services.sessions.transcript(cid)
        assert transcript[-1].content == texts[cid]
    # The turns ran at the same time: chunks of both arrived before either completed.
    first_complete = next(
        i
        for i, m in enumerate(got)
        if m["type"] == "system_response_message" and m["status"] == "complete"
    )
    early = {m["conversation_id"] for m in got[:first_complete] if m.get("status") == "in_progress"}
    assert early == {"conv-a", "conv-b"}


@pytest.mark.anyio
async def test_turns_of_one_conversation_run_in_order(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["one"], first_token_delay_s=0.2))
    h.chat.enqueue(Reply(chunks=["two"]))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("first", "conv-o", id="m-1"))
        await ws.send(user_message("second", "conv-o", id="m-2"))
        got = await receive_until(ws, reports(2))
    assert not [m for m in got if m["type"] == "error"]
    contents = [m.content for m in h.services.sessions.transcript("conv-o")]
    assert contents == ["first", "one", "second", "two"]


@pytest.mark.anyio
async def test_malformed_messages_get_errors_and_the_socket_stays_usable(h: AppHarness) -> None:
    bad = [
        ("{not json", "invalid_json"),
        ("[1, 2]", "invalid_message"),
        (
            json.dumps({"type": "user_interaction_message", "conversation_id": "c"}),
            "unsupported_type",
        ),
        (json.dumps({"type": "user_message", "content": {"messages": []}}), "invalid_messages"),
        (user_message("   "), "invalid_messages"),
        (json.dumps({"type": "user_message"}), "invalid_messages"),
        (user_message("x" * 201), "message_too_large"),
        (user_message("hi", model="nobody"), "model_not_found"),
        (user_message("hi", conversation_id=["nope"]), "invalid_conversation_id"),  # type: ignore[arg-type]
        (user_message("nul \x00 inside"), "invalid_messages"),
        ('{"type": "user_message", "content": "lone \\ud800 surrogate"}', "invalid_messages"),
        (
            '{"type": "user_message", "content": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "invalid_json",
        ),
    ]
    async with connect(ws_url(h)) as ws:
        for raw, code in bad:
            await ws.send(raw)
            (error,) = await receive_until(ws, errors(1))
            assert error["type"] == "error" and error["content"]["code"] == code, raw
            assert error["content"]["message"] == error["content"]["text"]
            assert isinstance(error["conversation_id"], str) and error["conversation_id"]
        await ws.send(b'{"type": "user_message", "content": "bytes work too"}')
        got = await receive_until(ws, reports(1))
        assert reply_text(got) == "Hello there!"
    assert h.chat.chat_requests and len(h.chat.chat_requests) == 1  # bad input reached no model


@pytest.mark.anyio
async def test_oversize_frame_is_refused_before_parsing(h: AppHarness) -> None:
    async with connect(ws_url(h), max_size=None) as ws:
        await ws.send("x" * (h.settings.server.max_body_bytes + 1))
        (error,) = await receive_until(ws, errors(1))
        assert error["content"]["code"] == "request_too_large"
        await ws.send(user_message("still here", "conv-big"))
        await receive_until(ws, reports(1))


@pytest.mark.anyio
async def test_upstream_failure_is_an_error_then_complete(h: AppHarness) -> None:
    h.chat.enqueue(Reply.error(500))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-err"))
        got = await receive_until(ws, reports(1))
    kinds = [m["type"] for m in got]
    assert kinds.index("error") < kinds.index("system_response_message")
    error = got[kinds.index("error")]
    assert error["content"]["code"] == "upstream_error" and error["conversation_id"] == "conv-err"
    assert json.loads(got[-1]["content"]["payload"])["reply"]["status"] == "incomplete"


@pytest.mark.anyio
async def test_persona_from_query_parameter(h: AppHarness) -> None:
    async with connect(ws_url(h, "?persona=nobody")) as ws:
        await ws.send(user_message("hi", "conv-p"))
        (error,) = await receive_until(ws, errors(1))
        assert error["content"]["code"] == "model_not_found"
    async with connect(ws_url(h, "?persona=companion")) as ws:
        await ws.send(user_message("hi", "conv-p"))
        await receive_until(ws, reports(1))
    session = h.services.sessions.get_session("conv-p", "local")
    assert session is not None and session.persona_id == "companion"


@pytest.mark.anyio
async def test_api_keys_missing_or_wrong_key_is_closed_with_1008(keyed: AppHarness) -> None:
    for url, headers in (
        (ws_url(keyed), {}),
        (ws_url(keyed), {"Authorization": "Bearer wrong"}),
        (ws_url(keyed, "?api_key=wrong"), {}),
    ):
        async with connect(url, additional_headers=headers) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert keyed.services.sessions.list_sessions("alice") == []


@pytest.mark.anyio
async def test_api_keys_right_key_in_header_or_query(keyed: AppHarness) -> None:
    for url, headers, cid in (
        (ws_url(keyed), {"Authorization": "Bearer alice-key"}, "conv-h"),
        (ws_url(keyed, "?api_key=alice-key"), {}, "conv-q"),
    ):
        async with connect(url, additional_headers=headers) as ws:
            await ws.send(user_message("hi", cid))
            got = await receive_until(ws, reports(1))
            assert reply_text(got) == "Hello there!"
        assert keyed.services.sessions.get_session(cid, "alice") is not None


@pytest.mark.anyio
async def test_client_leaving_mid_reply_stores_it_incomplete(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["one ", "two ", "three"], chunk_delay_s=0.3))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-gone"))
        await receive_until(ws, lambda got: any(m.get("status") == "in_progress" for m in got))
    for _ in range(100):  # the server notices the close and cancels the turn
        rows = h.services.sessions.transcript("conv-gone")
        if rows[-1].status != "pending":
            break
        await asyncio.sleep(0.05)
    assert (rows[-1].role, rows[-1].status) == ("assistant", "incomplete")
    # The conversation is not stuck: the next turn runs.
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("back", "conv-gone"))
        got = await receive_until(ws, reports(1))
    assert reply_text(got) == "Hello there!"
