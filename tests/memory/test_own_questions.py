"""Questions the user asks about themselves (backend.memory.own_questions), hand-labelled."""

from __future__ import annotations

import pytest

from backend.memory.own_questions import asks_about_user, asks_for_profile


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Which mistake do I keep making that I should drill?", True),  # the tutor demo
        ("When is my exam again?", True),
        ("what should I cook tonight?", True),
        ("Is it okay if I do Saturday's long run fasted?", True),
        ("do you remember my cat's name?", True),
        ("remind me what I said about the flat", True),
        ("我的考试是哪天来着？", True),
        ("我应该先跟老板说吗", True),
        ("I had a rough day, my boss yelled at me", False),  # venting: the floor's case
        ("can you tell me a joke about cats?", False),  # asks nothing about the user
        ("how are you?", False),
        ("hi! I'm Noor, I teach chemistry in Leeds", False),
        ("It has been raining all day. Is that normal here?", False),
        ("我奶奶今年八十三岁了，身体还挺好的", False),
        ("早上好呀", False),
    ],
)
def test_asks_about_user(text: str, expected: bool) -> None:
    assert asks_about_user(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the user as a whole: no note's words match (a first chat on the default install)
        ("what do you know about me?", True),
        ("What do you remember about me so far", True),
        ("how much do u remember about me", True),
        ("tell me about myself", True),
        ("who am I?", True),
        ("what kind of person am I?", True),
        ("What do you think of me?", True),
        ("describe me in three words", True),
        ("can you sum me up?", True),
        ("Can you help me write a short bio for the staff newsletter?", True),
        ("I'm setting up a dating profile, help me write a few lines about myself", True),
        ("你对我了解多少？", True),
        ("我是谁？", True),
        # about someone or something else, or one fact of the user's
        ("tell me about yourself", False),
        ("who am I kidding", False),
        ("what do you know about cats?", False),
        ("I know you care about me", False),
        ("do you remember my cat's name?", False),
        ("what should I cook tonight?", False),
        ("Write me a poem about the sea", False),
    ],
)
def test_asks_for_profile(text: str, expected: bool) -> None:
    assert asks_for_profile(text) is expected
