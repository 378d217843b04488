"""The entity table (backend.memory.entities), read from memories as the hippocampus and
the perfect hippocampus of bench/data/formation_oracle write them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.memory.entities import (
    Mention,
    about,
    asked_relations,
    entity_table,
    mentions,
    names_for,
    surface_words,
)
from backend.memory.types import Memory

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def memories(*texts: str) -> list[Memory]:
    return [Memory(f"m{n}", text, "personal_fact", 0.7, T0, T0) for n, text in enumerate(texts, 1)]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("The user's pug Pixel snores like a tractor.", [Mention("dog", "pug", "Pixel")]),
        (
            "The user's older sister Xiaoyu is getting married in October in Chengdu.",
            [Mention("sister", "sister", "Xiaoyu")],
        ),
        ("The user's friend Chen Jing checked his essay.",
         [Mention("friend", "friend", "Chen Jing")]),
        ("Tudou, the user's hamster, is a little golden hamster.",
         [Mention("hamster", "hamster", "Tudou")]),
        ("The user has a hamster called Tudou.", [Mention("hamster", "hamster", "Tudou")]),
        ("The user's cat is called Dumpling.", [Mention("cat", "cat", "Dumpling")]),
        ("The user's physio says no running on consecutive days.",
         [Mention("physio", "physio", None)]),
        (
            "The user will be a bridesmaid at her sister Xiaoyu's wedding.",
            [Mention("sister", "sister", "Xiaoyu")],
        ),
        # The fiancé's grandma is no one of the user's; the sister is.
        (
            "The user's sister moved her wedding, because her fiancé's grandma needs surgery.",
            [Mention("sister", "sister", None)],
        ),
        # A month after the relation is no name; "is" is not one either.
        ("The user's sister is expecting in March.", [Mention("sister", "sister", None)]),
        ("用户的柯基叫豆豆，特别能吃。", [Mention("dog", "柯基", "豆豆")]),
        ("用户的妹妹下个月结婚。", [Mention("sister", "妹妹", None)]),
        ("The user is a nurse on the night shift at St Mary's in Leeds.", []),
        ("The user's IELTS exam is on March 15.", []),
    ],
)  # fmt: skip
def test_mentions(content: str, expected: list[Mention]) -> None:
    assert mentions(content) == expected


def test_the_table_joins_a_relation_to_its_one_named_entity() -> None:
    stored = memories(
        "The user's older sister Xiaoyu is getting married in October in Chengdu.",
        "The user's sister teaches math in a middle school.",
        "The user's sister's wedding is on December 20th, still in Chengdu.",
        "The user has a hamster called Tudou.",
        "Tudou, the user's hamster, is a little golden hamster, two years old.",
        "The user's physio says no running on consecutive days.",
        "The user's pug Pixel snores like a tractor.",
        "Pixel, the user's dog, hates the vacuum cleaner.",
        "The user lives in Guangzhou.",
    )
    table = entity_table(stored)
    labels = {e.label: (e.kind, e.memory_ids) for e in table}
    assert labels == {
        "Xiaoyu (sister)": ("person", ["m1", "m2", "m3"]),
        "Tudou (hamster)": ("pet", ["m4", "m5"]),
        "Pixel (dog: pug)": ("pet", ["m7", "m8"]),
        "physio": ("person", ["m6"]),
    }
    assert table[0].name == "Xiaoyu"  # most mentioned first
    assert about(stored[8], table) == []  # about the user alone
    assert [e.name for e in about(stored[6], table)] == ["Pixel"]


def test_two_named_sisters_keep_an_unnamed_mention_apart() -> None:
    table = entity_table(
        memories(
            "The user's sister Anjali lives in Toronto.",
            "The user's sister Priti is a vet.",
            "The user's sister is getting married.",
        )
    )
    assert sorted(e.label for e in table) == ["Anjali (sister)", "Priti (sister)", "sister"]


def test_english_and_chinese_words_meet_in_one_relation() -> None:
    table = entity_table(memories("用户的妹妹叫小雨。", "The user's sister Xiaoyu is a teacher."))
    assert asked_relations("how is my sister doing?") == {"sister"}
    assert asked_relations("我妹妹最近怎么样") == {"sister"}
    assert asked_relations("what's my dog called?") == {"dog"}
    assert "cat" in asked_relations("any news from my pet?")
    assert asked_relations("I had a rough day") == set()
    assert sorted(names_for({"sister"}, table)) == ["Xiaoyu", "小雨"]
    assert {"sister", "妹妹", "姐姐"} <= set(surface_words({"sister"}))


@pytest.mark.parametrize(
    ("note", "shown"),
    [
        ("Xiaoyu moved the wedding to December.",
         "The user's sister Xiaoyu moved the wedding to December."),
        ("Xiaoyu's wedding is on December 20th.",
         "The user's sister Xiaoyu's wedding is on December 20th."),
        ("The user will visit Xiaoyu in May.",
         "The user will visit the user's sister Xiaoyu in May."),
        ("小雨下个月结婚。", "用户的妹妹小雨下个月结婚。"),
        ("Tudou bit the user.", "The user's hamster Tudou bit the user."),
        # Already said, in either language: left as it is.
        ("The user's sister Xiaoyu is a teacher.", "The user's sister Xiaoyu is a teacher."),
        ("姐姐小雨下个月结婚。", "姐姐小雨下个月结婚。"),
        ("The user likes tea.", "The user likes tea."),
    ],
)  # fmt: skip
def test_a_note_that_names_someone_alone_is_introduced(note: str, shown: str) -> None:
    from backend.memory.entities import introduce

    table = entity_table(
        memories(
            "The user's older sister Xiaoyu lives in Chengdu.",
            "用户的妹妹叫小雨。",
            "Tudou, the user's hamster, is two.",
        )
    )
    assert introduce(note, table) == shown
