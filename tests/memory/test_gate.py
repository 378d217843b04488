from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from backend.memory.gate import decide, link_supersession, reinforce
from backend.memory.types import Candidate, GatePolicy

from .helpers import NOW, memory, unit


def candidate(content: str = "The user's sister Mei lives in Osaka", **kw: object) -> Candidate:
    fields: dict[str, object] = {"importance": 0.8, "confidence": 0.9, "category": "relationship"}
    fields.update(kw)
    return Candidate(content=content, **fields)  # type: ignore[arg-type]


def rotated(base: np.ndarray, cos: float) -> np.ndarray:
    """A unit vector at exactly ``cos`` from ``base`` (base along axis 0)."""
    assert base[0] == 1.0
    return unit(cos, float(np.sqrt(1 - cos * cos)), 0.0, 0.0)


E0 = unit(1, 0, 0, 0)


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"importance": 0.39}, "importance 0.39 < 0.40"),
        ({"confidence": 0.59}, "confidence 0.59 < 0.60"),
    ],
)
def test_gate_thresholds_reject_with_reason(kw: dict[str, float], reason: str) -> None:
    decision = decide(candidate(**kw), E0)
    assert (decision.action, decision.reason) == ("reject", reason)


def test_thresholds_are_inclusive_and_configurable() -> None:
    assert decide(candidate(importance=0.4, confidence=0.6), E0).action == "write"
    strict = GatePolicy(min_importance=0.9)
    assert decide(candidate(importance=0.8), E0, policy=strict).action == "reject"


def test_empty_content_is_rejected() -> None:
    assert decide(candidate("   "), None).reason == "empty content"


def test_echo_of_recalled_memory_reinforces_it() -> None:
    recalled = [memory("a", vector=rotated(E0, 0.95)), memory("b", vector=rotated(E0, 0.5))]
    decision = decide(candidate(), E0, recalled=recalled)
    assert (decision.action, decision.target_id) == ("reinforce", "a")
    assert decision.similarity == pytest.approx(0.95, abs=1e-6)


def test_echo_threshold_is_looser_than_duplicate_threshold() -> None:
    # 0.91 is an echo when recalled this turn, but not a duplicate of a stored neighbour.
    near = memory("a", vector=rotated(E0, 0.91))
    assert decide(candidate(), E0, recalled=[near]).action == "reinforce"
    assert decide(candidate(), E0, neighbours=[near]).action == "write"


def test_near_duplicate_neighbour_reinforces_the_closest() -> None:
    neighbours = [
        memory("b", vector=rotated(E0, 0.93)),
        memory("a", vector=rotated(E0, 0.97)),
        memory("c", vector=rotated(E0, 0.2)),
    ]
    decision = decide(candidate(), E0, neighbours=neighbours)
    assert (decision.action, decision.target_id) == ("reinforce", "a")


def test_duplicate_threshold_is_configurable() -> None:
    neighbours = [memory("a", vector=rotated(E0, 0.95))]
    policy = GatePolicy(duplicate_cosine=0.96)
    assert decide(candidate(), E0, neighbours=neighbours, policy=policy).action == "write"


def test_superseded_memories_are_never_reinforced() -> None:
    old = memory("a", vector=E0, superseded_by="z")
    assert decide(candidate(), E0, neighbours=[old]).action == "write"


def test_explicit_supersedes_by_id_wins_over_echo() -> None:
    old = memory("old1", "The user lives in Guangzhou", vector=rotated(E0, 0.95))
    c = candidate("The user moved to Hangzhou", supersedes="old1")
    decision = decide(c, E0, recalled=[old], neighbours=[old])
    assert (decision.action, decision.target_id) == ("supersede", "old1")


def test_supersedes_by_text_and_by_keywords() -> None:
    old = memory("m1", "The user's wedding is in October", vector=rotated(E0, 0.8))
    other = memory("m2", "The user has a hamster named Bean", vector=rotated(E0, 0.3))
    by_text = candidate(
        "The wedding moved to December", supersedes="the user's wedding is in October."
    )
    assert decide(by_text, E0, neighbours=[other, old]).target_id == "m1"
    by_words = candidate("The wedding moved to December", supersedes="wedding in October")
    decision = decide(by_words, E0, neighbours=[other, old])
    assert (decision.action, decision.target_id) == ("supersede", "m1")


def test_supersedes_naming_nothing_known_is_a_plain_write() -> None:
    c = candidate("The user now lives in Hangzhou", supersedes="something else entirely")
    assert (
        decide(
            c, E0, neighbours=[memory("m1", "The user likes tea", vector=unit(0, 1, 0, 0))]
        ).action
        == "write"
    )


def test_restating_the_fact_it_claims_to_update_reinforces() -> None:
    old = memory("m1", "The user's sister Mei lives in Osaka", vector=E0)
    decision = decide(candidate(supersedes="m1"), E0, neighbours=[old])
    assert (decision.action, decision.target_id) == ("reinforce", "m1")


def test_without_embedding_identical_text_still_deduplicates() -> None:
    stored = memory("m1", "The user's sister Mei lives in Osaka!", vector=E0)
    assert decide(candidate(), None, neighbours=[stored]).action == "reinforce"
    assert decide(candidate("The user has a cat"), None, neighbours=[stored]).action == "write"


def test_reinforce_and_link_supersession() -> None:
    old = memory("a", importance=0.5, days_ago=10)
    later = reinforce(old, NOW, importance=0.9)
    assert (later.access_count, later.last_accessed, later.importance) == (1, NOW, 0.9)
    assert reinforce(old, NOW, importance=0.1).importance == 0.5
    new = memory("b")
    old2, new2 = link_supersession(old, new)
    assert (old2.superseded_by, new2.supersedes) == ("b", "a")
    assert old2.is_superseded and not new2.is_superseded
    assert replace(old2, superseded_by=None) == old


def test_a_restatement_of_a_recalled_memory_reinforces_it_even_below_echo_cosine() -> None:
    recalled = memory(
        "m1",
        "The user's brother Kenji just started a job as a nurse in Sapporo.",
        keywords=("kenji", "nurse", "sapporo"),
        vector=E0,
    )
    restated = candidate(
        "The user's brother Kenji is a nurse in Sapporo.", keywords=("kenji", "nurse", "sapporo")
    )
    decision = decide(restated, rotated(E0, 0.8), recalled=[recalled])
    assert (decision.action, decision.target_id) == ("reinforce", "m1")
    assert decision.reason == "echo of a memory recalled this turn"


def test_one_fact_said_twice_in_one_turn_is_one_memory() -> None:
    first = memory("m1", "My brother Kenji just started a job as a nurse in Sapporo.", vector=E0)
    decision = decide(
        candidate("The user's brother Kenji is a nurse in Sapporo."),
        rotated(E0, 0.85),
        siblings=[first],
    )
    assert (decision.action, decision.target_id) == ("reinforce", "m1")
    assert decision.reason == "the same fact as this turn"


def test_related_but_distinct_facts_are_both_written() -> None:
    wedding = memory(
        "m1",
        "The user's sister Xiaoyu is getting married in Chengdu in December.",
        keywords=("sister", "wedding", "chengdu"),
    )
    speech = candidate(
        "Xiaoyu asked the user to give a speech at the wedding.", keywords=("speech", "wedding")
    )
    assert decide(speech, None, siblings=[wedding], recalled=[wedding]).action == "write"


def test_the_same_topic_with_another_value_supersedes_without_being_told() -> None:
    old = memory("m1", "The user's IELTS exam is in March.", vector=E0)
    new = candidate("The user's IELTS exam moved to May.")
    decision = decide(new, rotated(E0, 0.7), neighbours=[old])
    assert (decision.action, decision.target_id) == ("supersede", "m1")
    assert "another month" in decision.reason
    weight = memory("m2", "The user weighs 72 kg.")
    assert decide(candidate("The user now weighs 69.5 kg."), None, neighbours=[weight]).action == (
        "supersede"
    )


def test_a_habit_given_up_supersedes_the_habit() -> None:
    # The fitness coach's: "Also I stopped the 16:8 fasting." left "The user is
    # intermittent fasting." current beside it.
    fasting = memory("m1", "The user is intermittent fasting.")
    decision = decide(candidate("The user stopped the 16:8 fasting."), None, neighbours=[fasting])
    assert (decision.action, decision.target_id) == ("supersede", "m1")
    assert "given up" in decision.reason
    running = memory("m2", "The user runs 3 km along the river.")
    stopped = candidate("The user stopped running on consecutive days.")
    assert decide(stopped, None, neighbours=[running]).action == "write"


def test_other_units_or_other_topics_do_not_supersede() -> None:
    hamster = memory("m1", "The user's hamster Tudou is 2 years old.")
    assert decide(candidate("The user runs 3 km at night."), None, neighbours=[hamster]).action == (
        "write"
    )
    persona = replace(memory("m2", "The companion's exam is in March."), subject="persona")
    assert decide(candidate("The user's exam is in May."), None, neighbours=[persona]).action == (
        "write"
    )


def test_a_turn_does_not_contradict_itself() -> None:
    weight = memory("m1", "The user weighs 72 kg.")
    decision = decide(
        candidate("The user weighs 70 kg."), None, neighbours=[weight], siblings=[weight]
    )
    assert decision.action != "supersede"


def test_a_look_alike_with_new_details_is_written() -> None:
    known = memory("m1", "The user has a hamster called Tudou.", vector=E0)
    richer = candidate("Tudou is a little golden hamster, two years old.")
    assert decide(richer, rotated(E0, 0.85), recalled=[known]).action == "write"


def test_a_look_alike_with_another_name_is_not_an_echo() -> None:
    known = memory("m1", "The user's friend Ada loves green tea.", vector=E0)
    other = candidate("The user's friend Chen loves green tea.")
    assert decide(other, rotated(E0, 0.85), recalled=[known]).action == "write"
    same = candidate("The user's friend Ada really loves green tea.")
    assert decide(same, rotated(E0, 0.85), recalled=[known]).action == "reinforce"


def test_a_stored_fact_said_again_in_other_words_is_reinforced() -> None:
    stored = memory("m1", "The user is a software tester.", vector=E0)
    decision = decide(candidate("I'm a software tester."), rotated(E0, 0.68), neighbours=[stored])
    assert (decision.action, decision.target_id) == ("reinforce", "m1")
    assert decision.reason == "the same fact as a stored memory"


def test_a_neighbour_on_the_same_subject_is_written_not_merged() -> None:
    """Vectors at 0.85 (the same subject) with other words are two facts, on the write side
    as on retrieval's (one notion of "same fact": the cosine counts from
    ``duplicate_cosine``); the same words at that cosine are one."""
    signup = memory("m1", "The user signed up for a pottery class.", vector=E0)
    plate = candidate("The user made a plate in pottery class.")
    assert decide(plate, rotated(E0, 0.85), siblings=[signup]).action == "write"
    again = candidate("The user signed up for a pottery class!")
    decision = decide(again, rotated(E0, 0.85), siblings=[signup])
    assert (decision.action, decision.target_id) == ("reinforce", "m1")
