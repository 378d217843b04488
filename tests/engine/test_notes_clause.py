"""A reply's clause citing the prompt's notes is left out as it streams."""

from __future__ import annotations

import re

import pytest

from backend.engine.notes_clause import NotesClauseFilter
from backend.engine.reply_guard import ReplyGuard


def streamed(text: str, step: int | None) -> str:
    """``text`` through the filter in words (``None``) or pieces of ``step`` characters."""
    if step is None:
        pieces = re.findall(r"\S+\s*|\s+", text)
    else:
        pieces = [text[i : i + step] for i in range(0, len(text), step)]
    clauses = NotesClauseFilter()
    return "".join(clauses.feed(p) for p in pieces) + clauses.flush()


@pytest.mark.parametrize("step", [None, 1, 3])
@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        # Qwen2.5-Coder-1.5B, bench.reply_quality's probes, seed 2 (five replies so).
        (
            "Your exam is scheduled for May 10, as noted in your recalled notes.",
            "Your exam is scheduled for May 10.",
        ),
        (
            "You are applying for a master's in data science at Dublin, as noted in your "
            "recalled notes.",
            "You are applying for a master's in data science at Dublin.",
        ),
        ("According to my notes, your exam is May 10. Bye!", "Your exam is May 10. Bye!"),
        ("Sure! According to your recalled notes, you scored 6.0.", "Sure! You scored 6.0."),
        ("You scored 6.0, as noted in your notes, which is fine.", "You scored 6.0 which is fine."),
        ("Based on your recalled notes you are lactose intolerant.", "You are lactose intolerant."),
    ],
)  # fmt: skip
def test_a_clause_citing_the_notes_is_left_out(reply: str, shown: str, step: int | None) -> None:
    assert streamed(reply, step) == shown


@pytest.mark.parametrize("step", [None, 1, 3])
@pytest.mark.parametrize(
    "reply",
    [
        "I wrote it in your notes app as you asked, and as noted in the article it works.",
        "Sure, let's go.",
        "Hmm, well, ok,",
        "我奶奶今年八十三岁了，身体还挺好的",
        "As noted in the menu, the soup has peanuts.",
    ],
)
def test_everything_else_is_shown_as_it_came(reply: str, step: int | None) -> None:
    assert streamed(reply, step) == reply


def test_only_a_possible_clause_is_held() -> None:
    clauses = NotesClauseFilter()
    assert clauses.feed("Your exam is on May 10") == "Your exam is on May 10"
    assert clauses.feed(", as") == ""  # may go on "as noted in your recalled notes"
    assert clauses.feed(" you know.") == ", as you know."


def test_the_guard_leaves_the_clause_out_of_a_reply() -> None:
    guard = ReplyGuard("What overall score am I aiming for?")
    reply = "You aim for a total score of 7.0, as noted in your recalled notes."
    shown = "".join(str(guard.feed(p)) for p in re.findall(r"\S+\s*", reply))
    assert shown + str(guard.end()) == "You aim for a total score of 7.0."


def test_a_held_sentence_saying_a_note_as_written_is_said_to_them() -> None:
    # bench.reply_quality's probes, seed 2: next to health notes every sentence is held
    # whole, and the 1.5B said the notes in the third person.
    guard = ReplyGuard(
        "Is it okay if I do Saturday's long run fasted? It starts early.",
        health_notes=["Your physio says no running on consecutive days."],
    )
    reply = (
        "No, it is not okay to do Saturday's long run fasted. The user's physio says no "
        "running on consecutive days. The user stopped fasting after getting dizzy."
    )
    shown = "".join(str(guard.feed(p)) for p in re.findall(r"\S+\s*", reply)) + str(guard.end())
    assert shown == (
        "No, it is not okay to do Saturday's long run fasted. Your physio says no running on "
        "consecutive days. You stopped fasting after getting dizzy."
    )
