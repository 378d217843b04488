"""The save gate rejects fragments: a pronoun that names no one, a phrase that says nothing."""

from __future__ import annotations

import pytest

from backend.memory.fragments import fragment_reason

from .screened import rejection


@pytest.mark.parametrize(
    "text",
    [
        "She makes it every autumn.",  # the grandmother's, once the message is gone
        "He's moving here next month.",
        "They've been together nine years.",
        "Her favourite is the red one.",
        "她每年秋天都包饺子。",
        "The user's happy place.",
        "Tudou's wheel.",
        "25 km on the trainer.",  # a value, but of what and whose? (the fitness coach's)
        # an "it" that names nothing (the default 0.5B, a first chat: "I'm pretty nervous
        # about it honestly, I don't know anyone here yet", of the move the message before)
        "The user is pretty nervous about it.",
        "The user has had enough of this.",
        "The user is looking forward to that!",
    ],
)
def test_fragments(text: str) -> None:
    assert fragment_reason(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "Her sister Anjali lives in Toronto.",  # a pronoun, and then a name
        "She is the user's grandmother.",
        "The user's grandmother makes dumplings every autumn.",
        "The user's birthday: 12 March.",  # no verb, but a value
        "The user's dog Pixel, a grumpy old pug.",
        "The user loves dumplings.",
        "The user is allergic to peanuts.",
        "Pixel hates the vacuum cleaner.",
        "It's the user's first triathlon in September.",
        "用户的奶奶每年秋天都包饺子。",
        "The user grew up by the sea.",  # an irregular past: no "-ed" to see
        "The user will be a bridesmaid (伴娘) at her sister's wedding.",
        # an "it" with something to stand for: a second clause, a name, or a subject
        "The user got a new job and is nervous about it.",
        "The user told Priya about it.",
        "The user loves it when it rains.",
        "The user's friend Chen Jing checked it.",
        "It is the user's first race, and she is nervous about it.",
    ],
)
def test_statements(text: str) -> None:
    assert fragment_reason(text) is None


def test_the_gate_rejects_a_fragment_with_its_reason() -> None:
    said = ["the dumplings are the best part, she makes hundreds every autumn"]
    reason = rejection("She makes hundreds every autumn.", said, "relationship")
    assert reason is not None and "names no one" in reason
    # The user's words say who "she" is: resolved (tests/memory/test_subjects.py), kept.
    said = ["my grandma makes dumplings every autumn, she makes hundreds"]
    assert rejection("She makes hundreds every autumn.", said, "relationship") is None
    named = "The user's grandma makes dumplings every autumn."
    assert rejection(named, said, "relationship") is None


def test_the_gate_rejects_an_it_that_names_nothing() -> None:
    said = ["I'm pretty nervous about it honestly, I don't know anyone here yet."]
    reason = rejection("The user is pretty nervous about it honestly.", said, "emotion")
    assert reason is not None and "names nothing" in reason
    said = ["I got the nursing job in Lisbon and I'm pretty nervous about it"]
    assert rejection("The user got a nursing job in Lisbon and is nervous about it.", said) is None
