"""Whom a fact is about: pronouns and swapped subjects resolved from the user's words,
and the subject recorded with each memory (``backend.memory.subjects``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.memory.entities import Mention, entity_table, introduce
from backend.memory.screening import Evidence, screen_one
from backend.memory.subjects import (
    about,
    named_in,
    named_mention,
    refile,
    reowned,
    resolve_opening,
    still_about,
    things_in,
)
from backend.memory.types import About, Candidate, Memory

from .test_whose_fact import PRIYA

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my sister Anjali is expecting", [Mention("sister", "sister", "Anjali")]),
        ("and then there's Pixel, our pug.", [Mention("dog", "pug", "Pixel")]),
        ("I have a hamster called Tudou", [Mention("hamster", "hamster", "Tudou")]),
        ("my cat is called Dumpling", [Mention("cat", "cat", "Dumpling")]),
        ("my physio says no running", [Mention("physio", "physio", None)]),
        # The relation alone and then named: one entry, the named one.
        ("my sister called. my sister Xiaoyu, I mean", [Mention("sister", "sister", "Xiaoyu")]),
        ("我的仓鼠叫土豆，他两岁了", [Mention("hamster", "仓鼠", "土豆")]),
        ("I'm Priya, long day", []),
    ],
)
def test_the_people_and_pets_the_user_names(text: str, expected: list[Mention]) -> None:
    assert named_in(text) == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # The issue's: the hamster's fact kept, about the hamster.
        ("He's a little golden guy, two years old.",
         "The user's hamster is a little golden guy, two years old."),
        ("She hates the vacuum cleaner.", "The user's pug Pixel hates the vacuum cleaner."),
        ("Her first baby is due in March.",
         "The user's sister Anjali's first baby is due in March."),
    ],
)  # fmt: skip
def test_an_opening_pronoun_takes_the_one_the_user_spoke_of(content: str, expected: str) -> None:
    said = {
        "He's": ["hamsters are nocturnal so yes lol. he's a little golden guy, two years old"],
        "She": ["I'm Priya. and then there's Pixel, our pug. she hates the vacuum cleaner"],
        "Her": ["my sister Anjali is expecting her first baby in March!"],
    }[content.split()[0]]
    resolved = resolve_opening(content, said)
    assert resolved is not None and resolved.content == expected


def test_they_agrees_with_the_one_it_stands_for() -> None:
    resolved = resolve_opening("They need a new kennel.", ["my dog Rex is so big"])
    assert resolved is not None and resolved.content == "The user's dog Rex needs a new kennel."
    resolved = resolve_opening("They're moving here next month.", ["my brother Sam called"])
    assert (
        resolved is not None
        and resolved.content == "The user's brother Sam is moving here next month."
    )


def test_a_pronoun_reaches_back_to_the_recent_turns() -> None:
    # The new message names no one; the turn before named the hamster.
    resolved = resolve_opening(
        "He runs on his wheel all night.",
        ["he runs on his wheel all night lol"],
        context=["I have a hamster called Tudou"],
    )
    assert resolved is not None and resolved.content == (
        "The user's hamster Tudou runs on his wheel all night."
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        # Two of the pronoun's gender: no guess.
        ("She is a teacher.", ["my sister Mei and my mum Li both work at the school, she teaches"]),
        # Someone the user named without saying who: may be the one meant.
        ("He is a coach.", ["I met Tom at the gym. he's a coach"]),
        # The wrong gender for the only one named.
        ("He is pregnant again.", ["my sister Mei called"]),
        # No one at all.
        ("She makes it every autumn.", ["it's my favourite cake"]),
        # Not a pronoun.
        ("The user is a nurse.", ["my sister Mei is a nurse"]),
    ],
)
def test_no_single_referent_resolves_nothing(content: str, said: list[str]) -> None:
    assert resolve_opening(content, said) is None


def test_a_pronoun_whose_one_is_in_its_own_message_does_not_reach_back() -> None:
    # The language tutor's: "they" is the university; the turn before addressed the
    # companion as "Teacher". Filed as the teacher's, it was wrong.
    resolved = resolve_opening(
        "They need 6.5 overall and no band below 6.0.",
        ["Also the university email me. They need 6.5 overall and no band below 6.0."],
        context=["Teacher, bad news. My company send me to a business trip in March"],
    )
    assert resolved is not None
    assert resolved.content == "The university needs 6.5 overall and no band below 6.0."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Also the university email me.", ["The university"]),
        ("My company send me to a business trip", ["The user's company"]),
        ("I like Xiamen beach, I grew up there.", ["Xiamen"]),
        ("I apply a master of data science in Dublin.", ["Dublin"]),
        ("I moved to New York from Leeds in March.", ["Leeds"]),  # "to Tom" is a person
        ("I talked to Tom while walking my dog.", []),
        ("My exam is in March 15.", []),
        ("I met Tom at the gym.", ["The gym"]),
    ],
)
def test_the_places_and_organisations_a_message_speaks_of(text: str, expected: list[str]) -> None:
    assert [m.name for m in things_in(text)] == expected


@pytest.mark.parametrize(
    "text",
    [
        "I like Xiamen beach, I grow up there.",
        "I grew up in Xiamen.",
        "I'm originally from Xiamen, it's by the sea.",
        "My hometown is Xiamen.",
        "Xiamen, my hometown, is by the sea.",
    ],
)
def test_a_place_the_user_grew_up_in_is_their_hometown(text: str) -> None:
    assert things_in(text)[0] == Mention("hometown", "hometown", "Xiamen")


def test_a_place_is_no_hometown_without_saying_so() -> None:
    assert things_in("I was in Xiamen, I loved it there.") == [Mention("", "", "Xiamen")]
    # two places: "there" is not one of them for sure
    assert all(not m.relation for m in things_in("I lived in Leeds and in York, I grew up there."))


@pytest.mark.parametrize(
    ("content", "said", "expected"),
    [
        ("They need 6.5 overall.", "Also the university email me. They need 6.5 overall.",
         "The university needs 6.5 overall."),
        ("Their offer is 40k a year.", "Our company called back. Their offer is 40k a year.",
         "The user's company's offer is 40k a year."),
        # A learner's "he" for a city (他/她/它 sound alike), before "is"
        ("He is very beautiful in summer and the water is clean.",
         "I like Xiamen beach, I grow up there. He is very beautiful in summer and the water "
         "is clean.",
         "The user's hometown Xiamen is very beautiful in summer and the water is clean."),
        ("He is busy all year.", "I was in Xiamen in May. He is busy all year.",
         "Xiamen is busy all year."),
    ],
)  # fmt: skip
def test_a_pronoun_takes_the_one_place_or_organisation_when_no_one_is_in_sight(
    content: str, said: str, expected: str
) -> None:
    resolved = resolve_opening(content, [said])
    assert resolved is not None
    assert resolved.content == expected


@pytest.mark.parametrize(
    ("content", "said"),
    [
        # "she" doing something is someone, not the city
        ("She called me.", "I am back in London. She called me."),
        # a person the user did not place may be the one meant
        ("He is great.", "I met Tom in London. He is great."),
        # "it" mostly names nothing on purpose ("It's normal to…"); two places are no one
        ("It is beautiful.", "I like Xiamen beach. It is beautiful."),
        # "to Tom" is no place: "he" may be Tom, not the dog
        ("He said hi.", "I talked to Tom while walking my dog. He said hi."),
        ("They have great food.", "I went from Paris to Rome. They have great food."),
    ],
)
def test_a_place_or_organisation_is_not_guessed(content: str, said: str) -> None:
    assert resolve_opening(content, [said]) is None


def test_a_person_in_sight_comes_before_a_place() -> None:
    resolved = resolve_opening("She is so busy.", ["My sister lives in Leeds. She is so busy."])
    assert resolved is not None
    assert resolved.content == "The user's sister is so busy."


@pytest.mark.parametrize(
    ("content", "whose", "expected"),
    [
        ("The user is a grumpy old lady.", "she's", "The user's pug Pixel is a grumpy old lady."),
        ("The user hates the vacuum cleaner.", "she",
         "The user's pug Pixel hates the vacuum cleaner."),
        ("The user is expecting her first baby in March.", "my sister",
         "The user's sister Anjali is expecting her first baby in March."),
        ("The user made curry.", "my flatmate", "The user's flatmate Tom made curry."),
        ("The user is a little golden guy, two years old.", "he's",
         "The user's hamster is a little golden guy, two years old."),
    ],
)  # fmt: skip
def test_someone_elses_fact_is_filed_under_them(content: str, whose: str, expected: str) -> None:
    resolved = refile(content, whose, PRIYA)
    assert resolved is not None and resolved.content == expected


def test_the_gate_keeps_the_fact_about_the_right_one_and_records_it() -> None:
    candidate = Candidate("The user is a grumpy old lady.", "personal_fact", 0.8, 0.9)
    screened = screen_one(candidate, Evidence(user=tuple(PRIYA)))
    assert screened.rejected is None
    assert screened.candidate.content == "The user's pug Pixel is a grumpy old lady."
    assert screened.candidate.about == (About("Pixel", "dog"),)
    # The user's own fact records no one.
    own = screen_one(Candidate("The user is allergic to peanuts.", "health", 0.8, 0.9),
                     Evidence(user=tuple(PRIYA)))  # fmt: skip
    assert own.rejected is None and own.candidate.about == ()


def test_the_gate_reads_a_pronoun_against_the_earlier_turns_without_counting_them() -> None:
    evidence = Evidence(
        user=("he runs on his wheel all night lol",), context=("I have a hamster called Tudou",)
    )
    screened = screen_one(Candidate("He runs on his wheel all night.", confidence=0.9), evidence)
    assert screened.rejected is None
    assert screened.candidate.about == (About("Tudou", "hamster"),)
    # Context is never support: a fact said only in an earlier turn is not this turn's.
    old = screen_one(Candidate("The user has a hamster called Tudou.", confidence=0.9), evidence)
    assert old.rejected is not None and "not grounded" in old.rejected


def test_a_subject_the_hippocampus_names_must_be_in_the_users_words() -> None:
    evidence = Evidence(user=("my sister Mei moved to Osaka, she loves it",))
    named = Candidate("She loves Osaka.", confidence=0.9, named="Mei")
    assert screen_one(named, evidence).candidate.content == "The user's sister Mei loves Osaka."
    invented = Candidate("She loves Osaka.", confidence=0.9, named="Hana")
    reason = screen_one(invented, evidence).rejected
    assert reason is not None and "'Hana' is not in the user's words" in reason
    assert named_mention("my sister", evidence.user) == Mention("sister", "sister", "Mei")


def test_about_lists_whom_a_fact_names_with_their_relation() -> None:
    said = ["my sister Xiaoyu moved the wedding to December"]
    assert about("Xiaoyu moved the wedding to December.", said) == (About("Xiaoyu", "sister"),)
    assert about("The user's physio says rest.") == (About(None, "physio"),)
    assert about("The user is allergic to peanuts.", said) == ()


def test_the_entity_table_reads_the_recorded_subject() -> None:
    # A fact that names the hamster by name alone joins it through ``about``.
    intro = Memory("m1", "The user has a hamster called Tudou.", "relationship", 0.8, NOW, NOW)
    alone = Memory(
        "m2", "Tudou runs on his wheel all night.", "general", 0.6, NOW, NOW,
        about=(About("Tudou", "hamster"),),
    )  # fmt: skip
    (tudou,) = entity_table([intro, alone])
    assert (tudou.name, tudou.relation, tudou.memory_ids) == ("Tudou", "hamster", ["m1", "m2"])
    # Read alone, the note says who Tudou is.
    assert (
        introduce(alone.content, [tudou]) == "The user's hamster Tudou runs on his wheel all night."
    )
    # Without the record (an older memory), the words alone do not place it.
    older = Memory("m2", "Tudou runs on his wheel all night.", "general", 0.6, NOW, NOW)
    assert entity_table([intro, older])[0].memory_ids == ["m1"]


def test_an_edit_keeps_only_whom_the_new_words_still_say() -> None:
    recorded = (About("Tudou", "hamster"), About(None, "physio"))
    assert still_about(recorded, "Tudou and the physio agree") == recorded
    assert still_about(recorded, "Tudou sleeps all day") == (About("Tudou", "hamster"),)
    assert still_about(recorded, "The user's Physio says rest") == (About(None, "physio"),)
    assert still_about(recorded, "The user likes tea") == ()


_WEDDING = (
    "also my sister moved the wedding to December. her fiancé's grandma needs hip surgery "
    "in October so they pushed it back"
)


@pytest.mark.parametrize(
    ("content", "said", "expected"),
    [
        # The late-night diary's: the sister's fiancé, not the user's
        ("The user's fiancé's grandma needs hip surgery in October.", [_WEDDING],
         "The user's sister's fiancé's grandma needs hip surgery in October."),
        ("The user's mum loves gardening.", ["my friend Ada says her mum loves gardening"],
         "The user's friend Ada's mum loves gardening."),
    ],
)  # fmt: skip
def test_someone_elses_relation_filed_as_the_users_goes_to_its_owner(
    content: str, said: list[str], expected: str
) -> None:
    resolved = reowned(content, said)
    assert resolved is not None
    assert resolved.content == expected


@pytest.mark.parametrize(
    ("content", "said", "context"),
    [
        # the user has a fiancé of their own
        ("The user's fiancé's grandma needs hip surgery.", [_WEDDING], ["my fiancé is lovely"]),
        # said of no one in sight, or of the user's own relation
        ("The user's mum loves gardening.", ["her mum loves gardening"], []),
        ("The user's sister moved the wedding to December.", [_WEDDING], []),
        # two people of the possessive's gender
        ("The user's boss is strict.", ["my sister and my mum say her boss is strict"], []),
    ],
)  # fmt: skip
def test_a_relation_is_not_moved_without_one_owner(
    content: str, said: list[str], context: list[str]
) -> None:
    assert reowned(content, said, context) is None


def test_the_gate_files_the_relation_under_its_owner() -> None:
    candidate = Candidate(
        content="The user's fiancé's grandma needs hip surgery in October.",
        importance=0.7,
        confidence=0.9,
        category="relationship",
    )
    screened = screen_one(candidate, Evidence(user=[_WEDDING], persona=[]))
    assert screened.rejected is None
    assert screened.candidate.content == (
        "The user's sister's fiancé's grandma needs hip surgery in October."
    )
