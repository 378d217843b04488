"""A user fact in the third person (``backend.memory.wording``)."""

from __future__ import annotations

import pytest

from backend.memory.screening import Evidence, screen_one
from backend.memory.types import Candidate
from backend.memory.wording import third_person


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        # The default install wrote the first one as is (docs/memory-formation.md).
        ("The user is Noor, I teach chemistry in Leeds.",
         "The user is Noor, the user teaches chemistry in Leeds."),
        ("I just started a job as a nurse in Sapporo.",
         "The user just started a job as a nurse in Sapporo."),
        ("My sister Mei lives in Osaka.", "The user's sister Mei lives in Osaka."),
        ("I'm allergic to peanuts.", "The user is allergic to peanuts."),
        ("I study French and I have two kids.",
         "The user studies French and the user has two kids."),
        ("I don't eat meat.", "The user doesn't eat meat."),
        ("I went to Paris and I moved to Lyon.",
         "The user went to Paris and the user moved to Lyon."),
        ("Mochi knocked my coffee over.", "Mochi knocked the user's coffee over."),
    ],
)  # fmt: skip
def test_first_person_words_become_the_users(said: str, stored: str) -> None:
    assert third_person(said) == stored


@pytest.mark.parametrize(
    "text",
    [
        "The user has a cat.",
        "Iris likes tea.",
        "Myra lives in Oslo.",
        "The user said: my dog Biscuit is a beagle.",
    ],
)
def test_third_person_text_is_left_alone(text: str) -> None:
    assert third_person(text) == text


def test_the_gate_stores_a_user_fact_in_the_third_person() -> None:
    evidence = Evidence(user=("hi! I'm Noor, I teach chemistry in Leeds",), persona=())
    candidate = Candidate(
        "The user is Noor, I teach chemistry in Leeds.", importance=0.7, confidence=0.9
    )
    screened = screen_one(candidate, evidence)
    assert screened.rejected is None
    assert screened.candidate.content == "The user is Noor, the user teaches chemistry in Leeds."
