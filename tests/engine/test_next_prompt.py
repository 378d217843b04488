"""Between turns, a local chat model reads the start of the session's next prompt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from backend.engine.next_prompt import NextPrompt
from backend.engine.prompt import NOTES_CLOSE
from backend.engine.shown_notes import ShownNotes
from backend.engine.turn import TurnRequest
from backend.hippocampus import SessionMemoryState, ShortTermItem
from backend.llm.fake import FakeChatModel

from .conftest import Rig

pytestmark = pytest.mark.anyio

LONG = "The train was late again and work ran long, as it does on most Mondays. " * 15


class ReadingModel(FakeChatModel):
    """A fake local model that reads ahead: records each prompt start it was given."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.read: list[list[dict[str, Any]]] = []

    async def read_ahead(self, messages: Sequence[dict[str, Any]]) -> int:
        self.read.append([dict(m) for m in messages])
        return len(messages)


def starts(prompt: list[dict[str, Any]], ahead: list[dict[str, Any]]) -> bool:
    """``ahead`` is the start of ``prompt``: every message but the last the same, and the
    last one (the new notes block, cut after its background) a start of the prompt's."""
    *same, last = ahead
    if prompt[: len(same)] != same or len(prompt) <= len(same):
        return False
    there = prompt[len(same)]
    text = str(last["content"]).removesuffix(NOTES_CLOSE)
    return there["role"] == last["role"] and str(there["content"]).startswith(text)


async def test_what_the_next_turn_starts_with_is_read_while_the_user_types(rig: Rig) -> None:
    chat = ReadingModel("local-chat")
    rig.engine.chat = chat
    # Compact mode: trimmed turns go into the background, which the next turn shows.
    rig.engine.settings = replace(rig.engine.settings, hippocampus_mode="compact")
    script = [
        (LONG, ["The user's train was late again on Monday."]),
        ("My sister Mei lives in Osaka", ["The user's sister Mei lives in Osaka."]),
        ("Mei called", []),
        ("again", []),
        (LONG, []),
        ("and so on", []),
    ]
    session = None
    for i, (text, facts) in enumerate(script):
        chat.enqueue([f"reply {i}"])
        rig.hippocampus.enqueue([json.dumps({"facts": facts, "emotion": "neutral"})])
        turn, _ = await rig.engine.run(TurnRequest(user_id="u1", text=text, session_id=session))
        session = turn.session.id
        await rig.engine.drain()  # the merge, then the read-ahead it leaves behind
        assert len(chat.read) == i + 1
    prompts = [call.messages for call in chat.calls]
    for ahead, prompt in zip(chat.read, prompts[1:], strict=False):
        assert starts(prompt, ahead)
        assert ahead[-1]["role"] == "assistant" or "Summary of the conversation" in str(
            ahead[-1]["content"]
        )
    # Short-term was trimmed: the new background was read before the message came.
    with_background = [a for a in chat.read if "Summary of the conversation" in str(a[-1])]
    assert with_background
    assert "train was late" in str(with_background[0][-1]["content"])


async def test_no_read_ahead_while_a_turn_of_the_session_runs(rig: Rig) -> None:
    chat = ReadingModel("local-chat")
    rig.engine.chat = chat
    chat.enqueue(["reply 0"])
    rig.hippocampus.enqueue([json.dumps({"facts": [], "emotion": "neutral"})])
    first, _ = await rig.engine.run(TurnRequest(user_id="u1", text="hi"))
    await rig.engine.drain()
    assert len(chat.read) == 1
    chat.enqueue(["reply 1"])
    rig.hippocampus.enqueue([json.dumps({"facts": [], "emotion": "neutral"})])
    request = TurnRequest(user_id="u1", text="and?", session_id=first.session.id)
    async with rig.engine.turn(request) as turn:
        await rig.engine.read_ahead(first.session.id)  # the turn's prompt is the newer one
        assert len(chat.read) == 1
        async for _ in turn.stream():
            await asyncio.sleep(0)
    await rig.engine.drain()
    assert len(chat.read) == 2


async def test_a_chat_model_that_does_not_read_ahead_is_left_alone(rig: Rig) -> None:
    rig.chat.enqueue(["reply"])
    rig.hippocampus.enqueue([json.dumps({"facts": [], "emotion": "neutral"})])
    turn, _ = await rig.engine.run(TurnRequest(user_id="u1", text="hi"))
    await rig.engine.drain()
    await rig.engine.read_ahead(turn.session.id)  # nothing to call, nothing raised
    assert len(rig.chat.calls) == 1


def test_a_session_with_no_turn_in_this_process_is_not_read_ahead() -> None:
    view = SessionMemoryState(short_term=(ShortTermItem("user", "hi"),))
    prompts = NextPrompt()
    assert prompts.start("s", view, ShownNotes()) is None
    prompts.remember("s", system_prompt="You are kind.", client_system="Be brief.")
    start = prompts.start("s", view, ShownNotes())
    assert start == [
        {"role": "system", "content": "You are kind.\n\nBe brief."},
        {"role": "user", "content": "hi"},
    ]
