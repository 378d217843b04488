"""Same topic, another value (backend.memory.contradiction)."""

from __future__ import annotations

import pytest

from backend.memory.contradiction import ceased, contradicts, values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The wedding is on December 20th.", {"month": {"december"}, "number:day": {"20.0"}}),
        ("The user weighs 72 kg.", {"number:kg": {"72.0"}}),
        ("Her IELTS speaking score is now 6.0.", {"number:": {"6.0"}}),
        ("用户的考试改到5月。", {"month": {"may"}}),
        ("用户的雅思考试在三月。", {"month": {"march"}}),
        ("The user may go running on Sunday.", {"weekday": {"sunday"}}),
        ("The exam moved to May.", {"month": {"may"}}),
    ],
)
def test_values(text: str, expected: dict[str, set[str]]) -> None:
    assert {k: set(v) for k, v in values(text).items()} == expected


@pytest.mark.parametrize(
    ("new", "old", "kind"),
    [
        (
            "The user's IELTS speaking score is 6.0.",
            "The user's IELTS speaking score is 5.5.",
            "number:",
        ),
        ("The user now weighs 69.5 kg.", "The user weighs 72 kg.", "number:kg"),
        (
            "The wedding of the user's sister is on December 20th.",
            "The wedding of the user's sister is in October.",
            "month",
        ),
        ("The user's IELTS exam is on May 10.", "The user's IELTS exam is in March.", "month"),
    ],
)
def test_contradictions(new: str, old: str, kind: str) -> None:
    assert contradicts(new, old) == kind


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("The user runs 3 km along the river.", "The user has had a hamster for 2 years."),
        (
            "The user's sister's wedding is on December 20th.",
            "The user will give a speech to 200 people.",
        ),
        ("The user's exam is in May.", "The user's exam is in May, in Beijing."),
        ("The user's exam is in May.", "The user's brother was born in March."),
    ],
)
def test_no_contradiction(new: str, old: str) -> None:
    assert contradicts(new, old) is None


@pytest.mark.parametrize(
    ("new", "old"),
    [
        # A goal does not update the current value, nor the other way round.
        ("The user would like to weigh about 66 kg.", "The user weighs 72 kg right now."),
        ("The user weighs 70.5 kg.", "The user would like to weigh about 66 kg."),
        # Numbers of different events on one topic.
        (
            "The user swam 400 m freestyle today.",
            "The swim coach is teaching the user freestyle; 50 m without panicking.",
        ),
        (
            "The user's university needs 6.5 overall in IELTS.",
            "The user's IELTS target is 7.0 overall.",
        ),
    ],
)
def test_numbers_supersede_only_the_same_measure(new: str, old: str) -> None:
    assert contradicts(new, old) is None


def test_a_number_without_a_unit_is_compared_by_topic() -> None:
    assert values("Last time I got 5.5 in speaking.") == {"number:": frozenset({"5.5"})}
    assert contradicts(
        "The user's speaking is 6.0 now!", "The user's last time got 5.5 in speaking."
    ) == ("number:")
    assert contradicts("The user's weight is 69.5 now.", "The user's weight is 72 kg.") == (
        "number:"
    )


def test_a_change_of_date_needs_one_shared_word() -> None:
    assert (
        contradicts(
            "The user's wedding moved to September 20 because the venue flooded.",
            "The user's sister Lily's wedding is on June 14.",
        )
        == "month"
    )
    unrelated = contradicts("The user's cat moved in on May 3.", "The user's wedding is in June.")
    assert unrelated is None


def test_a_change_that_names_the_old_date_too_still_updates() -> None:
    new = "The user moved his exam to April 28 because the March date was full."
    assert contradicts(new, "The user's B2 exam is on March 3.") == "month"
    same = contradicts("The user's exam in March went well.", "The user's exam is in March.")
    assert same is None


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        ("The user stopped the 16:8 fasting.", "The user is intermittent fasting.", True),
        ("The user quit smoking last year.", "The user smokes a pack a day.", True),
        ("The user no longer plays the piano because of her wrist.",
         "The user plays the piano every Sunday.", True),
        ("用户不再喝奶茶了。", "用户每天喝奶茶。", True),
        # what was stopped is more than the old fact says
        ("The user stopped running on consecutive days.", "The user runs 3 km along the river.",
         False),
        ("The user quit his job at Google.", "The user loves his job.", False),
        # the old fact is itself a giving-up
        ("The user stopped the 16:8 fasting.", "The user stopped the 16:8 fasting.", False),
        ("The user got dizzy in the pool twice.", "The user is intermittent fasting.", False),
    ],
)  # fmt: skip
def test_a_habit_given_up(new: str, old: str, expected: bool) -> None:
    assert ceased(new, old) is expected
    assert (contradicts(new, old) == "ceased") is expected
