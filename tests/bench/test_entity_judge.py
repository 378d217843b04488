"""The entity judge on hand-labelled memories, the ones the issue reported among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.entity_judge import (
    Entity,
    Fact,
    Gold,
    fragment_reason,
    judge_memory,
    judge_store,
    load_gold,
    subject_of,
)
from bench.formation_script import UsageError, load_script

USER = Entity(id="user", kind="user", relation="the user", aliases=("Priya",))
PIXEL = Entity(id="Pixel", kind="pet", relation="the user's dog", aliases=("Pixel", "pug", "dog"))
ANJALI = Entity(
    id="Anjali", kind="person", relation="the user's sister", aliases=("Anjali", "sister")
)
NANI = Entity(id="grandma", kind="person", relation="the user's grandmother",
              aliases=("grandma", "grandmother", "奶奶"))  # fmt: skip


def fact(number: int, about: str, text: str, *cues: tuple[str, ...]) -> Fact:
    return Fact(number, frozenset(about.split("|")), text, tuple(cues))


GOLD = Gold(
    (USER, PIXEL, ANJALI, NANI),
    (
        fact(0, "user", "The user is a nurse on the night shift.", ("nurse",)),
        fact(1, "Pixel", "Pixel is a grumpy old pug.", ("grumpy",)),
        fact(1, "Pixel", "Pixel hates the vacuum cleaner.", ("vacuum*", "hoover*")),
        fact(
            2,
            "Anjali",
            "Anjali is expecting her first baby in March.",
            ("baby", "pregnan*", "expecting"),
            ("march",),
        ),
        fact(2, "Anjali|user", "The user will be an aunt.", ("aunt", "auntie")),
        fact(3, "grandma", "The grandmother makes dumplings every autumn.", ("dumpling*",)),
        fact(5, "user", "The user is learning to swim.", ("swim*",)),
    ),
)


@pytest.mark.parametrize(
    ("memory", "verdict"),
    [
        # The issue's: someone else's fact filed as the user's; the user "being" the pet.
        ("The user is a grumpy old pug.", "wrong_entity"),
        ("The user is expecting her first baby in March.", "wrong_entity"),
        ("The user hates the vacuum cleaner.", "wrong_entity"),
        ("The user makes dumplings every autumn.", "wrong_entity"),
        # The same facts about the right one, however the sentence is built.
        ("Pixel, the user's pug, is grumpy and old.", "correct"),
        ("The user's dog Pixel hates the vacuum cleaner.", "correct"),
        ("The user's sister Anjali is expecting her first baby in March.", "correct"),
        ("The user's sister's first baby is expected in March.", "correct"),
        ("The user's grandma makes dumplings every autumn.", "correct"),
        ("The user is a nurse on the night shift.", "correct"),
        ("The user's job: a nurse who works nights.", "correct"),
        # Either may be the subject of a fact about both.
        ("The user is going to be an aunt.", "correct"),
        ("Anjali will make the user an aunt.", "correct"),
        # Fragments: a pronoun that names no one, or no statement at all.
        ("She makes it every autumn.", "fragment"),
        ("He's moving here next month.", "fragment"),
        ("The user's happy place.", "fragment"),
        # Irregular past forms, base forms and a Chinese gloss are statements too.
        ("Most people call the user Priya.", "unsupported"),
        ("The user always mix the vacuum up with the hoover.", "wrong_entity"),
        ("The user's grandma made dumplings every autumn.", "correct"),
        ("The user's grandma (奶奶) makes dumplings every autumn.", "correct"),
        # Never said.
        ("The user has a pet dragon called Ember.", "unsupported"),
    ],
)
def test_verdicts_on_hand_labelled_memories(memory: str, verdict: str) -> None:
    judged = judge_memory(memory, GOLD)
    assert judged.verdict == verdict, judged.reason


def test_a_pronoun_is_no_fragment_once_the_memory_names_someone() -> None:
    assert fragment_reason("She is Pixel's vet.", GOLD) is None
    assert fragment_reason("Her sister Anjali lives in Toronto.", GOLD) is None
    assert fragment_reason("她每年秋天包饺子。") == "opens with a pronoun that names no one"
    assert fragment_reason("奶奶每年秋天包饺子。", GOLD) is None


def test_the_subject_is_who_the_sentence_is_about() -> None:
    assert subject_of("The user's dog Pixel hates the vacuum cleaner.", GOLD) == "Pixel"
    assert subject_of("The user's favourite food is dumplings from grandma.", GOLD) == "user"
    assert subject_of("Priya walks Pixel every morning.", GOLD) == "user"
    assert subject_of("The picture book is about a fox.", GOLD) is None


def test_a_fact_said_after_the_memory_was_written_does_not_support_it() -> None:
    assert judge_memory("The user is learning to swim.", GOLD, written_at=2).verdict == (
        "unsupported"
    )
    assert judge_memory("The user is learning to swim.", GOLD, written_at=5).verdict == "correct"


def test_the_store_is_judged_on_the_users_side_with_precision() -> None:
    judged = judge_store(
        [
            ("The user is a grumpy old pug.", "user", 1),
            ("Pixel hates the vacuum cleaner.", "user", 1),
            ("The companion likes rain.", "persona", 1),
            ("She makes it every autumn.", "user", 3),
        ],
        GOLD,
    )
    assert judged.persona_memories == 1
    assert [j.verdict for _, j in judged.verdicts] == ["wrong_entity", "correct", "fragment"]
    assert judged.precision == pytest.approx(1 / 3)


def test_gold_files_belong_to_their_scripts(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "bench" / "data"
    script = load_script(root / "eval" / "conversations" / "late_night_diary.json")
    first = script.sessions[0][0].text
    good = {
        "script": "late_night_diary",
        "entities": [{"id": "me", "kind": "user", "relation": "the user", "aliases": []}],
        "facts": [{"session": 0, "turn": 0, "user_starts": first[:20], "about": ["me"],
                   "fact": "x", "cues": [["x"]]}],
    }  # fmt: skip
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(good), encoding="utf-8")
    assert load_gold(path, script).facts[0].about == frozenset({"user"})
    for broken in (
        {**good, "facts": [{**good["facts"][0], "user_starts": "not the message"}]},
        {**good, "facts": [{**good["facts"][0], "about": ["nobody"]}]},
        {**good, "facts": [{**good["facts"][0], "turn": 999}]},
        {**good, "entities": []},
        {**good, "surprise": 1},
    ):
        path.write_text(json.dumps(broken), encoding="utf-8")
        with pytest.raises(UsageError):
            load_gold(path, script)


# --- the entity table ------------------------------------------------------------------------


def test_the_table_judge_finds_missing_doubled_and_misfiled_entities() -> None:
    from bench.entity_judge import TableEntity, judge_table

    memories = [
        "The user's pug Pixel snores like a tractor.",
        "The user's sister Anjali is expecting her first baby in March.",
        "The user is a nurse.",
    ]
    right = [TableEntity("Pixel", "dog", ("pug",)), TableEntity("Anjali", "sister", ("sister",))]
    judged = judge_table(right, GOLD, memories)
    assert judged.expected == ["Pixel", "Anjali"] and judged.found == ["Pixel", "Anjali"]
    assert judged.duplicates == [] and judged.unknown == []  # grandma: no memory names her
    wrong = [
        TableEntity("Pixel", "cat", ("cat",)),  # misfiled: the gold says dog
        TableEntity("Anjali", "sister", ("sister",)),
        TableEntity(None, "sister", ("sister",)),  # the sister twice
        TableEntity("Tom", "flatmate", ("flatmate",)),  # no one of the gold
    ]
    judged = judge_table(wrong, GOLD, memories)
    assert judged.found == ["Anjali"] and judged.wrong_relation == [("Pixel", "Pixel (cat)")]
    assert judged.duplicates == ["Anjali"] and judged.unknown == ["Tom (flatmate)"]


@pytest.mark.parametrize(
    ("stem", "named"),
    [("late_night_diary", ["Tudou", "Xiaoyu", "Ada"]), ("language_tutor", ["Chen Jing"]),
     ("fitness_coach", [])],  # the coach's conversation names the physio, the swim coach
)  # fmt: skip
def test_the_apps_table_of_the_perfect_store_matches_the_gold(stem: str, named: list[str]) -> None:
    """The oracle's memories (what a perfect hippocampus writes) read into the app's table
    (backend.memory.entities): every person and pet of the user's they name, once, with
    the right relation."""
    from backend.memory.entities import entity_table
    from bench.entity_judge import TableEntity, judge_table
    from bench.memory_formation import load_script as load_formation_script
    from tests.memory.test_entities import memories as as_memories

    data = Path(__file__).resolve().parents[2] / "bench" / "data"
    script = load_formation_script(data / "eval" / "conversations" / f"{stem}.json")
    gold = load_gold(data / "formation_gold" / f"{stem}.json", script)
    oracle = json.loads((data / "formation_oracle" / f"{stem}.json").read_text("utf-8"))
    texts = [m["content"] for turn in oracle["turns"] for m in turn["long_term"]]
    rows = [
        TableEntity(e.name, e.relation, tuple(e.described_as))
        for e in entity_table(as_memories(*texts))
    ]
    judged = judge_table(rows, gold, texts)
    assert sorted(judged.expected) == sorted(named)
    assert judged.found == judged.expected, (judged.wrong_relation, rows)
    assert judged.duplicates == []
