"""Recalled notes stay where they were shown: each prompt extends the previous one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.engine.shown_notes import ShownNotes
from backend.engine.turn import TurnRequest
from backend.hippocampus import SessionMemoryState, ShortTermItem
from backend.memory.types import Candidate, Memory, Namespace

from .conftest import Rig

T = datetime(2026, 5, 1, tzinfo=UTC)


def note(memory_id: str, text: str) -> Memory:
    return Memory(id=memory_id, content=text, category="relationship", importance=0.8,
                  created_at=T, last_accessed=T)  # fmt: skip


def window(*user_texts: str, background: str = "") -> SessionMemoryState:
    items = [ShortTermItem("user", text) for text in user_texts]
    return SessionMemoryState(background=background, short_term=tuple(items))


MEI, TAMA = note("m1", "The user's sister Mei lives in Osaka."), note("m2", "The cat is Tama.")


def test_only_what_the_window_does_not_show_yet_is_shown_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 0)
    shown = ShownNotes()
    first = shown.plan("s", window(background="bg"), [MEI], "hi")
    assert first.memories == [MEI] and first.background == "bg" and first.earlier == {}
    shown.record("s", first)
    second = shown.plan("s", window("hi", background="bg"), [MEI, TAMA], "and?")
    assert second.memories == [TAMA] and second.background == ""  # both already shown
    assert list(second.earlier) == ["hi"] and "Mei" in second.earlier["hi"]
    shown.record("s", second)
    # The background changed, but nothing has left the window: what it gained is there.
    same_start = shown.plan("s", window("hi", "and?", background="bg 2"), [], "so")
    assert same_start.background == ""
    # The background changed: shown again. Mei's turn left the window: Mei shown again.
    third = shown.plan("s", window("and?", background="bg 2"), [MEI, TAMA], "so")
    assert third.memories == [MEI] and third.background == "bg 2"
    assert list(third.earlier) == ["and?"]


def test_the_best_notes_are_shown_next_to_the_message_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 3)
    shown = ShownNotes()
    notes = [note(f"m{i}", f"Fact {i}.") for i in range(5)]
    shown.record("s", shown.plan("s", window(), notes, "hi"))
    again = shown.plan("s", window("hi"), [notes[4], notes[3], notes[0], notes[1]], "so?")
    assert again.memories == [notes[4], notes[3], notes[0]]  # the top three; not notes[1]


def test_earlier_blocks_over_their_budget_go_in_one_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 0)
    monkeypatch.setattr("backend.engine.shown_notes.EARLIER_NOTES_TOKENS", 450)
    shown, said = ShownNotes(), []
    carried = []
    for i in range(8):
        plan = shown.plan("s", window(*said), [note(f"m{i}", "A long fact. " * 10)], f"t{i}")
        carried.append(list(plan.earlier))
        shown.record("s", plan)
        said.append(f"t{i}")
    # The earlier blocks (~140 tokens each) grow to the budget, then all go at once, and
    # they grow again: the prompt's start moves every few turns, not every turn.
    assert [len(c) for c in carried] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert carried[7] == ["t4", "t5", "t6"]


def test_notes_from_messages_still_in_the_window_are_left_out() -> None:
    from dataclasses import replace

    said_here, said_before = replace(MEI, source_session="s"), replace(TAMA, source_session="x")
    plan = ShownNotes().plan("s", window("hi"), [said_here, said_before], "so", whole_session=True)
    assert plan.memories == [said_before]
    trimmed = ShownNotes().plan("s", window("hi"), [said_here, said_before], "so")
    assert trimmed.memories == [said_here, said_before]


def test_sessions_do_not_share_what_they_were_shown() -> None:
    shown = ShownNotes()
    shown.record("a", shown.plan("a", window(), [MEI], "hi"))
    assert shown.plan("b", window("hi"), [MEI], "yo").memories == [MEI]


@pytest.mark.anyio
async def test_each_prompt_starts_with_the_previous_prompt_and_reply(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = Namespace("u1", "companion")
    rig.long_term.write(ns, [Candidate("The user's sister Mei lives in Osaka", "relationship",
                                       importance=0.9, confidence=0.95,
                                       keywords=("mei", "osaka"))])  # fmt: skip
    session = None
    for i, text in enumerate(["Mei called from Osaka", "Osaka is lovely", "Mei again"]):
        rig.chat.enqueue([f"reply {i}"])
        rig.hippocampus.enqueue(['{"facts": [], "emotion": "neutral"}'])
        turn, _ = await rig.engine.run(TurnRequest(user_id="u1", text=text, session_id=session))
        session = turn.session.id
    first, second, third = (call.messages for call in rig.chat.calls)
    # What the model read last time, then its reply, then only the new part.
    assert second[: len(first)] == first
    assert second[len(first)] == {"role": "assistant", "content": "reply 0"}
    assert third[: len(second)] == second
    assert "Mei lives in Osaka" in first[-2]["content"]  # before turn 1, and as one of
    assert "Mei lives in Osaka" in third[-2]["content"]  # the best, before each turn
