"""Questions the user asks about themselves (backend.memory.own_questions), hand-labelled."""

from __future__ import annotations

import pytest

from backend.memory.own_questions import asks_about_user


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
