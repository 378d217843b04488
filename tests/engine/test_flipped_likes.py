"""A reply that turns round what the user just said they like or dislike."""

from __future__ import annotations

import pytest

from backend.engine.flipped_likes import flips, stated

SAFFRON = "Saffron hates the rain, she hides under the bed all day"


@pytest.mark.parametrize(
    ("reply", "flipped"),
    [
        # Seen on the default install (issue 24).
        ("Your cat Saffron really loves the rain, right?", True),
        ("She must enjoy the rain then!", True),
        # Said as they said it, or about something else.
        ("Poor Saffron, she really doesn't like the rain.", False),
        ("Saffron hates the rain? Cats often do.", False),
        ("It sounds like she loves her bed though!", False),
        ("Does she hate thunder too?", False),
        ("Would you like to talk about her?", False),
        ("I love rainy days myself.", False),
    ],
)
def test_a_reply_that_says_the_opposite_flips_it(reply: str, flipped: bool) -> None:
    assert flips(reply, stated(SAFFRON)) is flipped


def test_negation_turns_a_liking_round() -> None:
    assert stated("I don't really like the gym anymore") == {"gym": False}
    assert flips("You love the gym!", stated("I don't really like the gym anymore"))
    assert not flips("You never liked the gym.", stated("I don't really like the gym anymore"))


def test_a_thing_both_liked_and_disliked_is_left_alone() -> None:
    assert stated("I love the rain but Saffron hates the rain") == {}
    assert stated("I'd like to learn Spanish") == {}  # a wish, not a liking
