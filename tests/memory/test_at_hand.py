"""What the user has at hand is no fact about them (backend.memory.at_hand)."""

from __future__ import annotations

import pytest

from backend.memory.at_hand import at_hand
from backend.memory.screening import Evidence, screen_one
from backend.memory.types import Candidate


@pytest.mark.parametrize(
    "content",
    [
        # Stored from "what should I cook tonight? I have eggs, spinach and some feta" and
        # recited in every answer to "what do you know about me?" (2026-12-06).
        "The user has eggs, spinach and some feta.",
        "The user has eggs, spinach, and some feta in the fridge.",
        "The user's fridge has leftover rice and two eggs.",
        "The user only has pasta and a jar of pesto.",
        "用户冰箱里只有鸡蛋和西红柿。",
        "用户家里有一些面条和青菜。",
    ],
)
def test_the_groceries_the_user_has_are_at_hand(content: str) -> None:
    assert at_hand(content)


@pytest.mark.parametrize(
    "content",
    [
        "The user has a peanut allergy.",
        "The user has lactose intolerance.",
        "The user has two cats.",
        "The user has chickens.",  # kept, not cooked
        "The user has fish.",
        "The user has a garden with tomatoes.",
        "The user has a sister named Ana.",
        "The user had eggs for breakfast.",
        "The user loves eggs and spinach.",
        "用户有一只叫饺子的橘猫。",
        "用户对花生过敏。",
    ],
)
def test_facts_that_say_more_are_kept(content: str) -> None:
    assert not at_hand(content)


def test_the_save_gate_rejects_what_the_user_has_at_hand() -> None:
    said = Evidence(user=("what should I cook tonight? I have eggs, spinach and some feta",))
    groceries = Candidate(content="The user has eggs, spinach and some feta.", subject="user")
    result = screen_one(groceries, said)
    assert result.rejected is not None and result.rejected.startswith("passing")
    diet = Evidence(user=("I'm vegetarian, so no meat please. I have eggs and spinach",))
    vegetarian = Candidate(content="The user is vegetarian.", subject="user")
    assert screen_one(vegetarian, diet).rejected is None
