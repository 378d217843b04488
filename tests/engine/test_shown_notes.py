"""Recalled notes stay where they were shown: each prompt extends the previous one."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from backend.engine.prompt import MEMORY_PREAMBLE, NOTES_OPEN, second_person
from backend.engine.shown_notes import (
    Merged,
    ShownNotes,
    answer_ids,
    pertinent_ids,
    verbatim_start,
)
from backend.engine.turn import TurnRequest
from backend.hippocampus import SessionMemoryState, ShortTermItem
from backend.longterm.activation import Activation
from backend.memory.retrieve import Retrieval
from backend.memory.types import (
    Candidate,
    HybridWeights,
    Memory,
    Namespace,
    ScoreBreakdown,
    ScoredMemory,
)
from backend.sessions.store import Message

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


def test_a_trim_shows_the_background_lines_whose_message_has_left_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Compact mode rolls a line a fact into the background. The long session on 19db6ab
    # showed its 1,016-1,504 characters whole at each trim (226-234 tokens read before the
    # first token), most of it said by the window verbatim or by the last such block.
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 0)
    shown = ShownNotes()
    mei, pickle = "The user is Mei.", "The user's cat Pickle is a grey tabby."
    job, moved = "The user is an architect.", "The user's interview moved to Thursday."
    # A session this process has not shown a turn of: the whole background.
    plan = shown.plan("s", window("t0", background=f"{mei}\n{pickle}"), [], "t1")
    assert plan.background == f"{mei}\n{pickle}"
    shown.record("s", plan)
    # Nothing has left the window since: nothing.
    plan = shown.plan("s", window("t0", "t1", background=f"{mei}\n{pickle}\n{job}"), [], "t2")
    assert plan.background == ""
    shown.record("s", plan)  # the job's line first seen with t2
    # t0 left: the job's line is still the window's (t2 is there), Thursday's newer.
    rolled = f"{mei}\n{pickle}\n{job}\n{moved}"
    plan = shown.plan("s", window("t1", "t2", background=rolled), [], "t3")
    assert plan.background == ""
    shown.record("s", plan)
    # t2 left too: only its line; the ones shown are not shown again.
    plan = shown.plan("s", window("t3", background=rolled), [], "t4")
    assert plan.background == job
    assert "You are an architect." in plan.shown.block and "Pickle" not in plan.shown.block
    shown.record("s", plan)
    # A background rewritten whole (the full contract's prose) is shown whole, once
    # something has left the window.
    prose = "Mei is an architect in Manchester; her interview is on Thursday."
    assert shown.plan("s", window("t4", background=prose), [], "t5").background == prose


def test_the_best_notes_are_shown_next_to_the_message_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 3)
    shown = ShownNotes()
    notes = [note(f"m{i}", f"Fact {i}.") for i in range(5)]
    shown.record("s", shown.plan("s", window(), notes, "hi"))
    said = ["hi"]
    for text in ("so?", "and?"):  # shown with one of the last two messages: not again
        plan = shown.plan("s", window(*said), [notes[4], notes[3], notes[0]], text)
        assert plan.memories == []
        shown.record("s", plan)
        said.append(text)
    again = shown.plan("s", window(*said), [notes[4], notes[3], notes[0], notes[1]], "well?")
    assert again.memories == [notes[4], notes[3], notes[0]]  # the top three; not notes[1]


def test_the_best_notes_are_shown_again_only_next_to_a_message_about_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 3)
    shown = ShownNotes()
    shown.record("s", shown.plan("s", window(), [MEI, TAMA], "hi", pertinent=set()))
    # Small talk about neither: nothing new, so no block at all (the cache covers the
    # whole previous prompt: only the reply and the message are read).
    chat = shown.plan("s", window("hi"), [MEI, TAMA], "long day at work", pertinent=set())
    assert chat.memories == [] and chat.shown.block == ""
    shown.record("s", chat)
    again = shown.plan("s", window("hi", "long day at work"), [MEI], "so", pertinent={"m1"})
    assert again.memories == []  # shown with one of the last two messages: still close
    shown.record("s", again)
    # A question about Mei: her note again, right before it; the cat's stays up there.
    window_now = window("hi", "long day at work", "so")
    asked = shown.plan("s", window_now, [MEI, TAMA], "where does Mei live?", pertinent={"m1"})
    assert asked.memories == [MEI]


def test_a_note_that_answers_the_question_is_shown_next_to_it_whatever_its_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 1)
    shown = ShownNotes()
    notes = [note(f"m{i}", f"Fact {i}.") for i in range(4)]
    shown.record("s", shown.plan("s", window(), notes, "plan my week"))
    shown.record("s", shown.plan("s", window("plan my week"), notes, "ok", pertinent=set()))
    said = window("plan my week", "ok")
    # Shown two messages up, ranked fourth: a question it answers shows it again.
    asked = shown.plan("s", said, notes, "which stroke?", pertinent={"m3"}, answers={"m3"})
    assert asked.memories == [notes[3]]
    assert shown.plan("s", said, notes, "which stroke?", pertinent={"m3"}).memories == []
    shown.record("s", asked)
    # ... but not again right after it was shown.
    said = window("plan my week", "ok", "which stroke?")
    again = shown.plan("s", said, notes, "and why?", pertinent={"m3"}, answers={"m3"})
    assert again.memories == []


def test_a_recalled_health_note_is_repeated_whatever_the_message_is_about() -> None:
    peanuts = replace(note("h1", "The user is allergic to peanuts."), category="health")
    shown = ShownNotes()
    shown.record("s", shown.plan("s", window(), [peanuts], "hi", pertinent=set()))
    plan = shown.plan("s", window("hi"), [peanuts, MEI], "dinner plans?", pertinent=set())
    assert plan.memories == [peanuts, MEI]


def test_pertinent_notes_are_the_ones_the_message_itself_speaks_for() -> None:
    def scored(memory: Memory, cosine: float | None, lexical: float) -> ScoredMemory:
        return ScoredMemory(memory, ScoreBreakdown(0.0, 0.9, lexical, 0.0, cosine, 0.0, 0.5))

    items = (scored(MEI, 0.55, 0.4), scored(TAMA, 0.12, 0.0), scored(BENTO, None, 0.0))
    activation = Activation(Retrieval(items=items), None, 0.0, 0.0, 3)
    weights = HybridWeights()
    assert pertinent_ids(activation, "when is Mei's wedding?", weights) == {"m1"}
    # A message in Chinese: the local embedder's cosine is not trusted; the words count.
    assert pertinent_ids(activation, "梅住在哪里？", weights) == {"m1"}
    assert pertinent_ids(None, "hi", weights) == frozenset()
    # Asked about the user as a whole, every recalled note of theirs is what the message
    # asks for, though it names none (the persona's own notes aside).
    persona = replace(note("p1", "The companion likes autumn."), subject="persona")
    items = (*items, scored(persona, 0.05, 0.0))
    activation = Activation(Retrieval(items=items), None, 0.0, 0.0, 4)
    assert pertinent_ids(activation, "what do you know about me?", weights) == {"m1", "m2", "m3"}


def test_the_notes_that_may_answer_a_question_are_its_best_few_over_a_lower_floor() -> None:
    def scored(memory: Memory, cosine: float) -> ScoredMemory:
        return ScoredMemory(memory, ScoreBreakdown(0.0, 0.9, 0.0, 0.0, cosine, 0.0, 0.5))

    # The cosines of bench.reply_quality's race probe ("What's the race I'm training for
    # again, and where?"): the triathlon note is not pertinent (0.3), but may answer.
    race = note("m1", "The user will do freestyle in the race, no more breaststroke.")
    triathlon = note("m2", "The user signed up for her first sprint triathlon, in Geelong.")
    sister = note("m3", "The user's sister is coming to watch her race.")
    coach = note("m4", "The user's swim coach is teaching her freestyle.")
    heel = replace(note("h1", "The user has Achilles tendinopathy."), category="health")
    far = note("m5", "The user used to run a little.")
    cosines = [(race, 0.44), (heel, 0.5), (triathlon, 0.33), (sister, 0.38), (coach, 0.28)]
    items = tuple(scored(m, c) for m, c in [*cosines, (far, 0.2)])
    activation = Activation(Retrieval(items=items), None, 0.0, 0.0, 6)
    weights = HybridWeights()
    question = "What's the race I'm training for again, and where?"
    assert pertinent_ids(activation, question, weights) == {"m1", "h1"}
    assert answer_ids(activation, question, weights, 3) == {"m1", "m2", "m3"}
    assert answer_ids(activation, question, weights, 4) == {"m1", "m2", "m3", "m4"}
    assert answer_ids(None, question, weights, 3) == frozenset()


def test_earlier_blocks_over_their_budget_go_in_one_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 0)
    monkeypatch.setattr("backend.engine.shown_notes.EARLIER_NOTES_TOKENS", 250)
    shown, said = ShownNotes(), []
    carried, brief, blocks = [], [], []
    for i in range(8):
        plan = shown.plan("s", window(*said), [note(f"m{i}", "A long fact. " * 10)], f"t{i}")
        carried.append(list(plan.earlier))
        brief.append(plan.brief)
        blocks.append(plan.shown.block)
        shown.record("s", plan)
        said.append(f"t{i}")
    # The earlier blocks (~110 tokens the first, ~60 the brief ones) grow to the budget,
    # then all go at once, and they grow again: the prompt's start moves every few turns.
    assert [len(c) for c in carried] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert carried[7] == ["t4", "t5", "t6"]
    # The whole preamble once in the prompt; the blocks after it point back to it.
    assert brief == [False, True, True, True] * 2
    assert blocks[0].startswith(MEMORY_PREAMBLE)
    assert blocks[1].startswith(NOTES_OPEN) and MEMORY_PREAMBLE not in blocks[1]


def test_the_block_with_the_current_background_outlives_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 0)
    monkeypatch.setattr("backend.engine.shown_notes.EARLIER_NOTES_TOKENS", 450)
    shown, said = ShownNotes(), ["t0", "t1"]
    background = "What left the window: " + "a long summary. " * 20
    # The window was trimmed: the background is news, shown once with t2.
    plan = shown.plan("s", window(*said, background=background), [], "t2")
    assert plan.background == background.strip()
    shown.record("s", plan)
    said.append("t2")
    for i in range(3, 9):
        # The hippocampus rewrites the background as it goes; nothing left the window since.
        rewritten = background + " Rewritten." * (i % 2)
        plan = shown.plan(
            "s", window(*said, background=rewritten), [note(f"m{i}", "A fact. " * 20)], f"t{i}"
        )
        # Over the budget, the other blocks go; the background's stays, not shown again.
        assert plan.background == "" and "t2" in plan.earlier
        shown.record("s", plan)
        said.append(f"t{i}")
    # The notes of the blocks that went were read in this window: shown again only next
    # to a message about them.
    m3 = note("m3", "A fact. " * 20)
    assert "t3" not in shown.plan("s", window(*said), [m3], "t9", pertinent=set()).earlier
    assert shown.plan("s", window(*said), [m3], "t9", pertinent=set()).memories == []
    assert shown.plan("s", window(*said), [m3], "t9", pertinent={"m3"}).memories == [m3]


def test_notes_from_messages_still_in_the_window_are_left_out() -> None:
    said_here, said_before = replace(MEI, source_session="s"), replace(TAMA, source_session="x")
    plan = ShownNotes().plan("s", window("hi"), [said_here, said_before], "so", whole_session=True)
    assert plan.memories == [said_before]
    trimmed = ShownNotes().plan("s", window("hi"), [said_here, said_before], "so")
    assert trimmed.memories == [said_here, said_before]


def at(minute: int) -> datetime:
    return T + timedelta(minutes=minute)


def formed(memory: Memory, minute: int) -> Memory:
    """``memory`` as written in session "s" at ``minute``."""
    return replace(memory, source_session="s", created_at=at(minute))


def said(*texts: str) -> list[Message]:
    """Session "s"'s transcript: user and assistant messages in turn, seq 1, 2, 3..."""
    roles = ("user", "assistant")
    return [Message(i, "s", i, roles[(i - 1) % 2], text, at(i), "complete")  # type: ignore[arg-type]
            for i, text in enumerate(texts, start=1)]  # fmt: skip


def verbatim(*messages: Message) -> SessionMemoryState:
    items = [ShortTermItem(m.role, m.content) for m in messages]  # type: ignore[arg-type]
    return SessionMemoryState(short_term=tuple(items))


BENTO = note("m3", "The user packs a bento for work.")


def test_a_trimmed_window_still_leaves_out_the_notes_of_its_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.RECENT_TURNS", 0)  # repeats aside
    # Each turn is merged (and its notes written) before the next message comes.
    hi, ok, mei, sure, cat, nice = said("hi", "hello", "Mei is in Osaka", "sure", "our cat", "aw")
    shown = ShownNotes()
    shown.record("s", shown.plan("s", verbatim(), [], "hi", merged=Merged(0, at(1))))
    notes = [formed(TAMA, 6), formed(MEI, 4), formed(BENTO, 2)]  # from "our cat", Mei, "hi"
    plan = shown.plan("s", verbatim(hi, ok), notes, mei.content, merged=Merged(2, at(3)))
    shown.record("s", plan)
    plan = shown.plan("s", verbatim(hi, ok, mei, sure), notes, cat.content, merged=Merged(4, at(5)))
    shown.record("s", plan)
    # "hi" and its reply were trimmed: the window shows Mei's message on, verbatim.
    window = verbatim(mei, sure, cat, nice)
    start = verbatim_start(window, [hi, ok, mei, sure, cat, nice])
    assert start == mei.seq
    plan = shown.plan("s", window, notes, "so", merged=Merged(6, at(7)), verbatim_from=start)
    # Mei's and the cat's notes are in the window; the bento's message has gone: shown.
    assert plan.memories == [formed(BENTO, 2)]
    shown.record("s", plan)
    # Later, Mei's message has gone too: its note is shown again.
    window = verbatim(cat, nice)
    plan = shown.plan("s", window, notes, "and", merged=Merged(8, at(9)), verbatim_from=cat.seq)
    assert plan.memories == [formed(MEI, 4), formed(BENTO, 2)]


def test_a_note_whose_merge_ran_late_is_shown_once_its_message_has_gone() -> None:
    hi, ok, mei, sure = said("hi, I pack a bento", "nice", "Mei is in Osaka", "sure")
    shown = ShownNotes()
    shown.record("s", shown.plan("s", verbatim(), [], hi.content, merged=Merged(0, at(1))))
    # Mei's message came while the first turn was still being merged: its note (the
    # bento) was written after Mei's message was stored, at minute 4.
    plan = shown.plan("s", verbatim(hi, ok), [], mei.content, merged=Merged(0, at(3)))
    shown.record("s", plan)
    notes = [formed(MEI, 6), formed(BENTO, 4)]
    window = verbatim(mei, sure)  # the first turn was trimmed
    plan = shown.plan("s", window, notes, "so", merged=Merged(4, at(7)), verbatim_from=mei.seq)
    # Only this turn's moment shows the first turn merged: only notes written after it
    # (minute 7) are left out. None here, not even Mei's: the rule errs towards showing.
    assert plan.memories == notes
    # Without the window's start (or the moments), nothing is left out.
    assert shown.plan("s", window, notes, "so", merged=Merged(4, at(7))).memories == notes
    assert ShownNotes().plan("s", window, notes, "so", verbatim_from=mei.seq).memories == notes


def test_compressed_items_are_not_verbatim() -> None:
    hi, ok, mei, sure, cat, nice = said("hi", "hello", "Mei is in Osaka", "sure", "our cat", "aw")
    transcript = [hi, ok, mei, sure, cat, nice]
    squeezed = ShortTermItem("user", "Mei: Osaka", compressed=True)
    same_text = ShortTermItem("user", mei.content, compressed=True)
    tail = verbatim(sure, cat, nice).short_term
    for item in (squeezed, same_text):
        window = SessionMemoryState(short_term=(ShortTermItem("user", "hi"), item, *tail))
        assert verbatim_start(window, transcript) == sure.seq
    # Nor is a message the window does not show as it was said.
    window = verbatim(hi, ok, mei, sure, nice)
    assert verbatim_start(window, transcript) == nice.seq
    assert verbatim_start(verbatim(), transcript) is None
    # Empty messages are not in a window: they do not end its verbatim part.
    blank = replace(ok, content=" ")
    assert verbatim_start(verbatim(hi, mei), [hi, blank, mei]) == hi.seq
    # Mei's note in a window whose Mei message is compressed: shown.
    shown = ShownNotes()
    for seq, minute in ((0, 1), (2, 3), (4, 5)):
        shown.record(
            "s", shown.plan("s", verbatim(), [], f"t{seq}", merged=Merged(seq, at(minute)))
        )
    window = SessionMemoryState(short_term=(squeezed, *tail))
    start = verbatim_start(window, transcript)
    notes = [formed(MEI, 4), formed(TAMA, 6)]
    plan = shown.plan("s", window, notes, "so", merged=Merged(6, at(7)), verbatim_from=start)
    assert plan.memories == [formed(MEI, 4)]


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
    assert "Mei lives in Osaka" in first[-2]["content"]  # before turn 1
    # Shown with one of the last two messages, it is not repeated: no block at all, and
    # the prompt still holds it where it was shown.
    assert third[-2] == {"role": "assistant", "content": "reply 1"}
    assert third[-1] == {"role": "user", "content": "Mei again"}
    assert sum("Mei lives in Osaka" in str(m["content"]) for m in third) == 1


@pytest.mark.anyio
async def test_a_question_gets_the_note_that_answers_it_next_to_it_again(rig: Rig) -> None:
    ns = Namespace("u1", "companion")
    rig.long_term.write(ns, [Candidate("The user will swim freestyle in the race",
                                       "personal_fact", importance=0.9, confidence=0.95,
                                       keywords=("freestyle", "race"))])  # fmt: skip
    session = None
    said = [
        "which stroke for the race, freestyle or breaststroke?",
        "ok, thanks, off to the pool now",
        "so which stroke should I swim in the race?",
        "ok, got it, the race is in June",
    ]
    for i, text in enumerate(said):
        rig.chat.enqueue([f"reply {i}"])
        rig.hippocampus.enqueue(['{"facts": [], "emotion": "neutral"}'])
        turn, _ = await rig.engine.run(TurnRequest(user_id="u1", text=text, session_id=session))
        session = turn.session.id
    calls = [call.messages for call in rig.chat.calls]
    assert "You will swim freestyle" in calls[0][-2]["content"]
    # Shown two messages up (still in the window): the question it answers gets it again,
    # right before it ...
    assert "You will swim freestyle" in calls[2][-2]["content"]
    assert sum("You will swim freestyle" in str(m["content"]) for m in calls[2]) == 2
    # ... and a message right after it, about the race but no question, does not.
    assert calls[3][-2] == {"role": "assistant", "content": "reply 2"}


@pytest.mark.anyio
async def test_a_session_note_is_left_out_while_its_message_is_in_the_window(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.engine.settings = replace(rig.engine.settings, hippocampus_mode="compact")
    start, ticks = rig.clock.now(), itertools.count()  # each reading a millisecond on
    monkeypatch.setattr(rig.clock, "now", lambda: start + timedelta(milliseconds=next(ticks)))
    long = "The train was late again and work ran long, as it does on most Mondays. " * 15
    mei = "The user's sister Mei lives in Osaka."
    script = [
        (long, []),  # ~280 tokens: trimmed after the third turn (the budget is 300)
        ("My sister Mei lives in Osaka", [mei]),
        ("Mei called from Osaka", []),
        ("Mei called from Osaka again", []),
        (long, []),  # trims the Mei turns
        ("Mei is moving away from Osaka", []),
    ]
    session = None
    for i, (text, facts) in enumerate(script):
        rig.chat.enqueue([f"reply {i}"])
        rig.hippocampus.enqueue([json.dumps({"facts": facts, "emotion": "neutral"})])
        turn, _ = await rig.engine.run(TurnRequest(user_id="u1", text=text, session_id=session))
        session = turn.session.id
    notes = [call.messages[-2]["content"] for call in rig.chat.calls]  # each turn's block
    # The whole session in the window, then its first turn trimmed: Mei's message is
    # still there, so the note is not (the background says it anyway, in compact mode).
    assert rig.chat.calls[3].messages[1]["content"] == "reply 0"
    assert "Recalled notes" not in notes[2] and "Recalled notes" not in notes[3]
    # Mei's message has left the window: the note is shown.
    assert rig.chat.calls[5].messages[1]["content"] == long
    assert f") {second_person(mei)}" in notes[5]


def test_a_health_note_is_always_shown_next_to_the_message_with_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from backend.engine.prompt import HEALTH_RULE

    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 0)
    peanuts = replace(note("m3", "The user is allergic to peanuts."), category="health")
    peanuts = replace(peanuts, source_session="s")
    shown = ShownNotes()
    first = shown.plan("s", window(), [peanuts, MEI], "hi")
    assert first.memories == [peanuts, MEI] and HEALTH_RULE in first.shown.block
    shown.record("s", first)
    # Already shown in the window, and formed in this very session (whose messages are
    # all in the window): a relationship note is left out, the health note never is.
    mei_here = replace(MEI, source_session="s")
    again = shown.plan("s", window("hi"), [mei_here, peanuts], "curry?", whole_session=True)
    assert again.memories == [peanuts] and HEALTH_RULE in again.shown.block
    # no health note, no rule
    plain = ShownNotes().plan("t", window(), [MEI], "hi")
    assert HEALTH_RULE not in plain.shown.block


def test_a_note_the_shown_background_says_is_not_shown_under_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("backend.engine.shown_notes.ALWAYS_SHOWN", 3)
    job = note("m4", "The user is a junior architect in Manchester.")
    cat = note("m5", "The user's cat Pickle is a grey tabby.")
    background = "The user is Mei.\nThe user is a junior architect in Manchester."
    shown = ShownNotes()
    # Compact mode rolls the session's facts into the background: the job is said there.
    plan = shown.plan("s", window(background=background), [job, cat], "hi", pertinent=set())
    assert plan.background == background and plan.memories == [cat]
    shown.record("s", plan)
    # Still said by the background the window carries, two turns on; unless the message
    # is about it and it was not next to one of the last two messages.
    said = ["hi", "so", "and"]
    for text in said[1:]:
        shown.record("s", shown.plan("s", window(*said, background=background), [], text))
    later = shown.plan("s", window(*said, background=background), [job], "ok", pertinent=set())
    assert later.memories == []
    asked = shown.plan("s", window(*said, background=background), [job], "my job?",
                       pertinent={"m4"})  # fmt: skip
    assert asked.memories == [job]
