"""The reply guard's deadline (backend.engine.turn_reply, chat.retry_deadline): a retry
started before the deadline that has shown nothing by it, or a last attempt that would
start after it, gives way to the app's last resort, so that rejected attempts never keep
the user waiting past it; a first retry after a first attempt that alone took that long
runs. The engine's clock is
a ``FixedClock`` here, moved on by each piece the scripted model writes."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.engine.stand_ins import lost_thread
from backend.engine.turn import TurnRequest
from backend.llm.port import Delta, TextDelta
from backend.memory.types import Namespace

from .conftest import Rig
from .test_turn_guard import reply

pytestmark = pytest.mark.anyio

ECHO = ["I", " had", " a", " rough", " day", ",", " my", " boss", " yelled", " at", " me", "."]
MESSAGE = "I had a rough day, my boss yelled at me"
# A fine reply, held by the guard until its first sentence ends.
FINE = ["That", " sounds", " awful", ",", " what", " set", " him", " off", "?"]


def piece_takes(rig: Rig, seconds: float) -> list[int]:
    """Each text piece the chat model writes moves the engine's clock on by ``seconds``
    (as a slow model would); returns the pieces written per call, as they come."""
    original = rig.chat.stream
    written: list[int] = []

    async def slow(*args: Any, **kwargs: Any) -> AsyncIterator[Delta]:
        written.append(0)
        async for delta in original(*args, **kwargs):
            if isinstance(delta, TextDelta):
                rig.clock.advance(seconds=seconds)
                written[-1] += 1
            yield delta

    rig.chat.stream = slow  # type: ignore[method-assign]
    return written


async def test_a_last_attempt_past_the_deadline_gives_way_to_the_stand_in(rig: Rig) -> None:
    # 0.1 s a piece: the echo is stopped at 1.0 s (ten pieces), the retry echoes again
    # (2.0 s), and the deadline (2.5 s) comes while the guard still holds the third.
    written = piece_takes(rig, 0.1)
    for _ in range(3):
        rig.chat.enqueue(list(ECHO))
    shown, rejected = await reply(rig, MESSAGE)
    assert shown == lost_thread(MESSAGE)
    assert rejected == ["echo", "echo", "late"]
    assert written[:2] == [10, 10] and written[2] < len(ECHO)  # the third was cut off
    assert rig.sessions.transcript("s1")[-1].content == shown


async def test_a_retry_started_before_the_deadline_is_cut_at_it(rig: Rig) -> None:
    # 0.15 s a piece: the echo is stopped at 1.5 s, and the deadline comes while the
    # guard still holds the retry's opening.
    written = piece_takes(rig, 0.15)
    rig.chat.enqueue(list(ECHO))
    rig.chat.enqueue(list(ECHO))
    shown, rejected = await reply(rig, MESSAGE)
    assert rejected == ["echo", "late"] and shown == lost_thread(MESSAGE)
    assert written[0] == 10 and written[1] < len(ECHO)


async def test_no_last_attempt_starts_once_the_deadline_has_passed(rig: Rig) -> None:
    written = piece_takes(rig, 0.3)  # the first attempt alone takes past 2.5 s
    for _ in range(2):
        rig.chat.enqueue(list(ECHO))
    rig.chat.enqueue(list(FINE))
    shown, rejected = await reply(rig, MESSAGE)
    assert rejected == ["echo", "echo", "late"] and shown == lost_thread(MESSAGE)
    assert written == [10, 10] and rig.chat.pending == 1  # no third call was made


async def test_a_first_retry_after_the_deadline_runs(rig: Rig) -> None:
    # The probe sessions: a first attempt that alone took past the deadline (a long
    # prompt read) was answered with a stand-in; its retry's answer is worth a second.
    written = piece_takes(rig, 0.3)
    rig.chat.enqueue(list(ECHO))
    rig.chat.enqueue(list(FINE))
    shown, rejected = await reply(rig, MESSAGE)
    assert rejected == ["echo"] and shown == "".join(FINE)
    assert written == [10, len(FINE)]


async def test_a_retry_that_started_showing_is_never_cut(rig: Rig) -> None:
    written = piece_takes(rig, 0.12)
    rig.chat.enqueue(list(ECHO))
    long_reply = [*FINE, *[" He", " shouted", " again", " and", " again", "."] * 4]
    rig.chat.enqueue(long_reply)
    shown, rejected = await reply(rig, MESSAGE)
    assert rejected == ["echo"]
    assert shown == "".join(long_reply)  # shown before 2.5 s, so let run past it
    assert written[1] == len(long_reply)


async def test_the_last_resort_is_the_health_note_after_go_aheads(rig: Rig) -> None:
    ns = Namespace("u1", "companion")
    note = "The user is allergic to shellfish."
    rig.long_term.create(ns, rig.long_term.new_memory(note, category="health", importance=0.95))
    piece_takes(rig, 0.2)
    go_ahead = ["Definitely", " go", " for", " it", ",", " pile", " it", " high", "!"]
    for _ in range(2):
        rig.chat.enqueue(list(go_ahead))
    shown, rejected = await reply(rig, "my mate is doing a seafood boil, should I pile my plate?")
    assert rejected == ["health", "late"]
    assert "allergic to shellfish" in shown and "go for it" not in shown.lower()


async def test_no_deadline_lets_every_attempt_run(rig: Rig) -> None:
    rig.engine.settings = dataclasses.replace(rig.engine.settings, retry_deadline_s=None)
    written = piece_takes(rig, 0.3)
    rig.chat.enqueue(list(ECHO))
    rig.chat.enqueue(list(ECHO))
    rig.chat.enqueue(list(FINE))
    shown, rejected = await reply(rig, MESSAGE)
    assert rejected == ["echo", "echo"] and shown == "".join(FINE)
    assert written == [10, 10, len(FINE)]


async def test_the_deadline_counts_from_the_request(rig: Rig) -> None:
    # A turn's start is stamped before its session lock and activation, the part of the
    # wait the user also sees.
    rig.hippocampus.enqueue(['{"background": "", "short_term": [], "long_term": []}'])
    before = rig.clock.now()
    rig.chat.enqueue(["Hi", "!"])
    async with rig.engine.turn(TurnRequest(user_id="u1", text="hi", session_id="s9")) as turn:
        assert turn.started == before
        assert "".join([piece async for piece in turn.stream()]) == "Hi!"
    await turn.merged  # type: ignore[misc]
