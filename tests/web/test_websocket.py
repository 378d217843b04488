"""The NeMo Agent Toolkit UI WebSocket protocol at /websocket, with the real `websockets` client.

``NemoUI`` replays what the UI (NVIDIA/NeMo-Agent-Toolkit-UI, HEAD 360f602) does with the
messages answering one user message, ported from its source (file:line in each comment),
so the tests check what a person would see, not just the wire shapes.
"""

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

from backend.web import turn_steps
from tests.llm.scripted_server import Reply
from tests.web.harness import HIPPOCAMPUS_OK, AppHarness

Message = dict[str, Any]

# types/websocket.ts:162-170 (validateWebSocketMessage): anything else is refused with
# "Invalid WebSocket message structure" and not processed (components/Chat/Chat.tsx:722-738).
UI_TYPES = frozenset(
    {
        "system_response_message",
        "system_intermediate_message",
        "system_interaction_message",
        "observability_trace_message",
        "error_message",
    }
)


class NemoUI:
    """The UI's handling of the messages for one user message it sent (``handleWebSocketMessage``,
    components/Chat/Chat.tsx:722-861). ``trims``: the versions before
    NVIDIA/NeMo-Agent-Toolkit-UI@0a11215 (2026-04-08), which trimmed each chunk and
    skipped whitespace-only ones (utils/chatTransform.ts at 0a11215^)."""

    def __init__(self, conversation_id: str, *, trims: bool = False) -> None:
        self.conversation_id = conversation_id
        self.trims = trims
        self.content = ""
        self.steps: list[Message] = []
        self.errors: list[dict[str, str]] = []
        self.completed = False

    def receive(self, message: Message) -> None:
        # types/websocket.ts:178-200 (validateWebSocketMessageWithConversationId).
        assert message.get("type") in UI_TYPES, f"Invalid WebSocket message structure: {message}"
        cid = message.get("conversation_id")
        assert isinstance(cid, str) and cid.strip(), f"missing conversation_id: {message}"
        if cid != self.conversation_id:  # Chat.tsx:744-749: another conversation's
            return
        # Chat.tsx:753-762: 200 ms after `complete` the message is no longer active and
        # whatever comes later is dropped (:744-749), so nothing may follow it.
        assert not self.completed, f"after complete, dropped by the UI: {message}"
        kind = message["type"]
        if kind == "system_response_message":
            assert message.get("status") in ("in_progress", "complete")  # websocket.ts:16
            if message["status"] == "complete":  # Chat.tsx:807-810: its text is ignored
                self.completed = True
                return
            text = (message.get("content") or {}).get("text")
            # utils/chatTransform.ts:19-28 (shouldAppendResponse), :34-60 (appendAssistantText).
            if self.trims:
                if text and text.strip():
                    prev = self.content
                    new = text.strip() if not prev.strip() else text
                    self.content = new if not prev.strip() else prev + new
            elif text is not None and text != "":
                self.content = text if not self.content.strip() else self.content + text
        elif kind == "system_intermediate_message":
            # utils/app/helper.ts:153: a step without an id is dropped.
            assert message.get("id"), message
            content = message.get("content") or {}
            assert isinstance(content.get("name"), str) and isinstance(content.get("payload"), str)
            self.steps.append(message)
        elif kind == "error_message":
            # types/websocket.ts:60-67; shown as "message: details" (ChatMessage.tsx:53-61).
            content = message.get("content") or {}
            assert all(isinstance(content.get(k), str) for k in ("code", "message", "details"))
            self.errors.append(content)

    def feed(self, messages: list[Message]) -> NemoUI:
        for message in messages:
            self.receive(message)
        return self

    @property
    def step_names(self) -> list[str]:
        return [m["content"]["name"] for m in self.steps]

    @property
    def shown_errors(self) -> list[dict[str, str]]:
        """components/Chat/ChatMessage.tsx:115: a reply with no text and no steps is not
        drawn at all, its error box included."""
        return self.errors if self.content or self.steps else []


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
    """The UI's user message (components/Chat/Chat.tsx:994-1005)."""
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
    ws: ClientConnection, done: Callable[[list[Message]], bool], timeout: float = 30
) -> list[Message]:
    received: list[Message] = []

    async def loop() -> None:
        while not done(received):
            received.append(json.loads(await ws.recv()))

    await asyncio.wait_for(loop(), timeout)
    return received


def is_complete(message: Message) -> bool:
    return message["type"] == "system_response_message" and message["status"] == "complete"


def completes(count: int) -> Callable[[list[Message]], bool]:
    """Done once ``count`` answers have ended (``complete`` is always a message's last)."""
    return lambda got: sum(is_complete(m) for m in got) >= count


def is_step(message: Message, name: str) -> bool:
    return message["type"] == "system_intermediate_message" and message["content"]["name"] == name


def errors_of(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m["type"] == "error_message"]


def reply_text(messages: list[Message]) -> str:
    return "".join(
        m["content"]["text"]
        for m in messages
        if m["type"] == "system_response_message" and m["status"] == "in_progress"
    )


@pytest.mark.anyio
async def test_nemo_message_streams_chunks_then_complete_with_steps(h: AppHarness) -> None:
    # An opening of three words: the reply guard releases it once its last word is whole,
    # at the next piece (reply_guard.py).
    h.chat.enqueue(Reply(chunks=["Hello there, friend", " and", " welcome", "!"]))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi from nemo", "conv-1", id="m-7"))
        got = await receive_until(ws, completes(1))
    kinds = [(m["type"], m.get("status")) for m in got]
    assert kinds == [
        ("system_intermediate_message", "complete"),
        ("system_response_message", "in_progress"),
        ("system_response_message", "in_progress"),
        ("system_response_message", "in_progress"),
        ("system_intermediate_message", "complete"),
        ("system_response_message", "complete"),
    ]
    assert is_step(got[0], "Memory activation") and is_step(got[-2], "Memory report")
    assert got[-1]["content"] == {"text": ""}
    assert json.loads(got[0]["content"]["payload"]) == {"activated": []}
    report = json.loads(got[-2]["content"]["payload"])
    assert report["reply"]["status"] == "complete"
    assert [m["content"]["text"] for m in got[1:4]] == ["Hello there, friend and", " welcome", "!"]
    assert reply_text(got) == "Hello there, friend and welcome!"
    for m in got:
        assert m["conversation_id"] == "conv-1" and m["parent_id"] == "m-7"
        assert m["id"] and datetime.fromisoformat(m["timestamp"])
    assert len({m["id"] for m in got}) == len(got)
    # conversation_id is the session id: the server holds the conversation.
    transcript = h.services.sessions.transcript("conv-1")
    assert [(m.role, m.content) for m in transcript] == [
        ("user", "hi from nemo"),
        ("assistant", "Hello there, friend and welcome!"),
    ]


@pytest.mark.anyio
async def test_plain_string_content_and_a_new_conversation(h: AppHarness) -> None:
    async with connect(ws_url(h)) as ws:
        await ws.send(json.dumps({"type": "user_message", "id": "m-1", "content": "hello"}))
        got = await receive_until(ws, completes(1))
        conversation = got[0]["conversation_id"]
        assert conversation and {m["conversation_id"] for m in got} == {conversation}
        assert reply_text(got) == "Hello there!"
        # The new id continues the conversation.
        h.chat.enqueue(Reply(chunks=["again"]))
        await ws.send(user_message("second", conversation, id="m-2"))
        await receive_until(ws, completes(1))
    contents = [m.content for m in h.services.sessions.transcript(conversation)]
    assert contents == ["hello", "Hello there!", "second", "again"]


@pytest.mark.anyio
async def test_non_streaming_schema_sends_one_complete_message(h: AppHarness) -> None:
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-batch", schema_type="chat"))
        got = await receive_until(ws, completes(1))
    responses = [m for m in got if m["type"] == "system_response_message"]
    assert [(m["status"], m["content"]["text"]) for m in responses] == [
        ("in_progress", "Hello there!"),
        ("complete", ""),
    ]


@pytest.mark.anyio
async def test_two_conversations_interleave_over_one_socket(h: AppHarness) -> None:
    # openings of three words: shown at once (the reply guard holds shorter ones)
    h.chat.enqueue(Reply(chunks=["a1 a2 a3 ", "a4 ", "a5"], chunk_delay_s=0.15))
    h.chat.enqueue(Reply(chunks=["b1 b2 b3 ", "b4 ", "b5"], chunk_delay_s=0.15))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("first", "conv-a", id="ma"))
        await ws.send(user_message("second", "conv-b", id="mb"))
        got = await receive_until(ws, completes(2))
    by_conversation = {
        cid: [m for m in got if m["conversation_id"] == cid] for cid in ("conv-a", "conv-b")
    }
    assert sum(len(ms) for ms in by_conversation.values()) == len(got)
    texts = {cid: reply_text(ms) for cid, ms in by_conversation.items()}
    assert sorted(texts.values()) == ["a1 a2 a3 a4 a5", "b1 b2 b3 b4 b5"]
    for cid, messages in by_conversation.items():
        assert {m["parent_id"] for m in messages} == {"ma" if cid == "conv-a" else "mb"}
        assert is_complete(messages[-1])
        assert NemoUI(cid).feed(messages).content == texts[cid]
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
        got = await receive_until(ws, completes(2))
    assert not errors_of(got)
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
            got = await receive_until(ws, completes(1))
            # The refusal as text, as an error_message, then complete: one conversation.
            assert [m["type"] for m in got] == [
                "system_response_message",
                "error_message",
                "system_response_message",
            ], raw
            (error,) = errors_of(got)
            assert error["content"]["code"] == code, raw
            assert reply_text(got) == f"[{error['content']['message']}]"
            assert len({m["conversation_id"] for m in got}) == 1
            ui = NemoUI(got[0]["conversation_id"]).feed(got)
            assert ui.completed and ui.shown_errors == [error["content"]]
        await ws.send(b'{"type": "user_message", "content": "bytes work too"}')
        got = await receive_until(ws, completes(1))
        assert reply_text(got) == "Hello there!"
    assert h.chat.chat_requests and len(h.chat.chat_requests) == 1  # bad input reached no model


@pytest.mark.anyio
async def test_oversize_frame_is_refused_before_parsing(h: AppHarness) -> None:
    async with connect(ws_url(h), max_size=None) as ws:
        await ws.send("x" * (h.settings.server.max_body_bytes + 1))
        (error,) = errors_of(await receive_until(ws, completes(1)))
        assert error["content"]["code"] == "request_too_large"
        await ws.send(user_message("still here", "conv-big"))
        await receive_until(ws, completes(1))


@pytest.mark.anyio
async def test_upstream_failure_is_text_an_error_then_complete(h: AppHarness) -> None:
    h.chat.enqueue(Reply.error(500))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-err"))
        got = await receive_until(ws, completes(1))
    kinds = [(m["type"], m.get("status")) for m in got]
    assert kinds == [
        ("system_intermediate_message", "complete"),  # Memory activation
        ("system_response_message", "in_progress"),  # the failure, as text
        ("error_message", "complete"),
        ("system_intermediate_message", "complete"),  # Memory report
        ("system_response_message", "complete"),
    ]
    (error,) = errors_of(got)
    assert error["content"]["code"] == "upstream_error" and error["conversation_id"] == "conv-err"
    assert reply_text(got).startswith("[the chat model failed: ")
    assert json.loads(got[-2]["content"]["payload"])["reply"]["status"] == "incomplete"


@pytest.mark.anyio
async def test_persona_from_query_parameter(h: AppHarness) -> None:
    async with connect(ws_url(h, "?persona=nobody")) as ws:
        await ws.send(user_message("hi", "conv-p"))
        (error,) = errors_of(await receive_until(ws, completes(1)))
        assert error["content"]["code"] == "model_not_found"
    async with connect(ws_url(h, "?persona=companion")) as ws:
        await ws.send(user_message("hi", "conv-p"))
        await receive_until(ws, completes(1))
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
            got = await receive_until(ws, completes(1))
            assert reply_text(got) == "Hello there!"
        assert keyed.services.sessions.get_session(cid, "alice") is not None


@pytest.mark.anyio
async def test_client_leaving_mid_reply_stores_it_incomplete(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["one two three ", "four ", "five"], chunk_delay_s=0.3))
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
        got = await receive_until(ws, completes(1))
    assert reply_text(got) == "Hello there!"


# --- what the NeMo Agent Toolkit UI shows ----------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("schema", ["chat_stream", "chat", "generate_stream", "generate"])
async def test_every_schema_shows_the_reply_and_both_steps_in_the_ui(
    h: AppHarness, schema: str
) -> None:
    # The UI's schema choices: pages/api/home/home.state.tsx:63-64.
    h.chat.enqueue(Reply(chunks=["Hel", "lo", "!"]))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", f"conv-{schema}", schema_type=schema))
        got = await receive_until(ws, completes(1))
    assert is_complete(got[-1])
    ui = NemoUI(f"conv-{schema}").feed(got)
    assert ui.completed and ui.content == "Hello!" and not ui.errors
    assert ui.step_names == ["Memory activation", "Memory report"]
    report = json.loads(ui.steps[1]["content"]["payload"])
    assert report["reply"]["status"] == "complete"


@pytest.mark.anyio
@pytest.mark.parametrize("trims", [False, True], ids=["current-ui", "ui-before-0a11215"])
async def test_whitespace_chunks_reach_every_ui_version(h: AppHarness, trims: bool) -> None:
    h.chat.enqueue(Reply(chunks=["Hello, my friend", " ", "world.", "\n\n", "Bye", " "]))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-ws"))
        got = await receive_until(ws, completes(1))
    texts = [m["content"]["text"] for m in got if m.get("status") == "in_progress"]
    assert texts == ["Hello, my friend", " world.", "\n\nBye"]  # a trailing " " is not needed
    content = "Hello, my friend world.\n\nBye"
    assert NemoUI("conv-ws", trims=trims).feed(got).content == content
    assert h.services.sessions.transcript("conv-ws")[-1].content == content + " "


@pytest.mark.anyio
@pytest.mark.parametrize("trims", [False, True], ids=["current-ui", "ui-before-0a11215"])
async def test_a_model_failing_mid_reply_is_shown_after_the_partial_reply(
    h: AppHarness, trims: bool
) -> None:
    h.chat.enqueue(Reply(chunks=["Hel", "lo"], error_event_after=2, error_message="overloaded"))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-mid"))
        got = await receive_until(ws, completes(1))
    ui = NemoUI("conv-mid", trims=trims).feed(got)
    assert ui.completed  # the spinner stops
    assert ui.content.startswith("Hello\n\n[the chat model failed: ")
    assert "overloaded" in ui.content and ui.content.endswith("]")
    (error,) = ui.shown_errors
    assert error["code"] == "upstream_error" and "overloaded" in error["message"]
    assert ui.step_names == ["Memory activation", "Memory report"]
    assert h.services.sessions.transcript("conv-mid")[-1].status == "incomplete"


@pytest.mark.anyio
async def test_a_refused_message_is_shown_and_ends_the_spinner(h: AppHarness) -> None:
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("x" * 201, "conv-long"))
        got = await receive_until(ws, completes(1))
    ui = NemoUI("conv-long").feed(got)
    assert ui.completed and ui.content == "[the message is longer than 200 characters]"
    assert [e["code"] for e in ui.shown_errors] == ["message_too_large"]
    assert h.services.sessions.get_session("conv-long", "local") is None


@pytest.mark.anyio
async def test_a_slow_merge_is_reported_pending_before_complete(
    h: AppHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turn_steps, "MEMORY_REPORT_WAIT_S", 0.05)
    h.hippocampus.enqueue(Reply(chunks=[HIPPOCAMPUS_OK], first_token_delay_s=3))
    async with connect(ws_url(h)) as ws:
        await ws.send(user_message("hi", "conv-slow"))
        got = await receive_until(ws, completes(1))
    ui = NemoUI("conv-slow").feed(got)
    assert ui.completed and ui.content == "Hello there!"
    assert ui.step_names == ["Memory activation", "Memory report"]
    report = json.loads(ui.steps[1]["content"]["payload"])
    assert report["pending"] is True and "/api/sessions/conv-slow" in report["detail"]


@pytest.mark.anyio
async def test_custom_query_parameters_of_the_ui_settings_authenticate(keyed: AppHarness) -> None:
    # The UI appends the "query" object of its WebSocket settings to the URL
    # (components/Chat/Chat.tsx:401-420), after ?conversation_id= (:375-380).
    async with connect(ws_url(keyed, "?conversation_id=conv-k&api_key=alice-key")) as ws:
        await ws.send(user_message("hi", "conv-k"))
        got = await receive_until(ws, completes(1))
    assert NemoUI("conv-k").feed(got).content == "Hello there!"
