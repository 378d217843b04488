"""One fact per memory: ``compound.facts_of`` and the screening that uses it."""

from __future__ import annotations

import pytest

from backend.memory.compound import facts_of
from backend.memory.screening import Evidence, screen
from backend.memory.types import Candidate


@pytest.mark.parametrize(
    ("content", "facts"),
    [
        # The default install's first chat (issue 24's notes): two facts in one note.
        (
            "The user is Noor, the user teaches chemistry in Leeds.",
            ("The user is Noor.", "The user teaches chemistry in Leeds."),
        ),
        (
            "The user is a nurse and the user lives in Leeds.",
            ("The user is a nurse.", "The user lives in Leeds."),
        ),
        (
            "The user is a nurse. The user works nights at St Mary's.",
            ("The user is a nurse.", "The user works nights at St Mary's."),
        ),
        (
            "The user's cat Saffron hates the rain; the user walks to work.",
            ("The user's cat Saffron hates the rain.", "The user walks to work."),
        ),
        (
            "The user is allergic to peanuts, and the user avoids satay.",
            ("The user is allergic to peanuts.", "The user avoids satay."),
        ),
        ("用户叫Noor，用户在利兹教化学。", ("用户叫Noor。", "用户在利兹教化学。")),
    ],
)
def test_a_compound_is_cut_into_its_facts(content: str, facts: tuple[str, ...]) -> None:
    assert facts_of(content) == facts


@pytest.mark.parametrize(
    "content",
    [
        "The user is Noor.",
        # A later piece that leans on the one before: cut, it would lose whom it means.
        "The user's sister lives in Leeds, the user visits her every week.",
        "The user loves hiking and the user's sister does too.",
        "用户的姐姐住在成都，用户也想去。",
        # "the user" not at a clause's start, or not the subject of the first clause.
        "The user and the user's sister both love hiking.",
        "The user said the user is tired.",
        "Noor teaches chemistry, the user is Noor.",
        # A piece too short to be a fact.
        "The user is Noor, the user too.",
    ],
)
def test_one_fact_or_an_uncuttable_one_stays_whole(content: str) -> None:
    assert facts_of(content) == (content,)


EVIDENCE = Evidence(
    user=("hi! I'm Noor, I teach chemistry in Leeds. my cat Saffron hates the rain",),
    persona=("Juniper",),
)


def test_screening_keeps_each_fact_apart_with_its_own_keywords() -> None:
    out = screen(
        [
            Candidate(
                content="The user is Noor, the user teaches chemistry in Leeds.",
                importance=0.8,
                confidence=0.9,
                keywords=("noor", "chemistry", "leeds"),
            )
        ],
        EVIDENCE,
    )
    assert [s.rejected for s in out] == [None, None]
    assert [s.candidate.content for s in out] == [
        "The user is Noor.",
        "The user teaches chemistry in Leeds.",
    ]
    assert [s.candidate.keywords for s in out] == [("noor",), ("chemistry", "leeds")]


def test_a_piece_is_screened_on_its_own() -> None:
    # The invented second fact is rejected; the grounded first one is kept.
    out = screen(
        [
            Candidate(
                content="The user is Noor, the user teaches physics in York.",
                importance=0.8,
                confidence=0.9,
            )
        ],
        EVIDENCE,
    )
    assert out[0].rejected is None and out[0].candidate.content == "The user is Noor."
    assert out[1].rejected is not None and "never said" in out[1].rejected


@pytest.mark.parametrize("field", [{"supersedes": "The user lives in York."}, {"named": "Saffron"}])
def test_a_compound_that_names_an_older_fact_or_someone_stays_whole(field: dict[str, str]) -> None:
    content = "The user is Noor, the user teaches chemistry in Leeds."
    out = screen([Candidate(content=content, importance=0.8, confidence=0.9, **field)], EVIDENCE)  # type: ignore[arg-type]
    assert len(out) == 1
