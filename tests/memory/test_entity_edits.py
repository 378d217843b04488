"""The user's edits over the entity table (backend.memory.entities: ``EntityEdit``,
``entity_table(memories, edits)``, ``merge_edits``, ``edit_entity``, ``forgotten_with``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.memory.entities import (
    EntityEdit,
    edit_entity,
    entity_table,
    find_entity,
    forgotten_with,
    introduce,
    merge_edits,
    names_for,
)
from backend.memory.types import Memory

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def memories(*texts: str) -> list[Memory]:
    return [
        Memory(f"m{n}", text, "personal_fact", 0.7, T0 + timedelta(minutes=n), T0)
        for n, text in enumerate(texts, 1)
    ]


TOM = memories(
    "Tom, the user's friend, plays the bass.",
    "The user's friend Tommy is moving to Berlin.",
    "The user's dog Pixel hates the vacuum cleaner.",
)


def test_without_edits_the_table_is_the_derived_one() -> None:
    table = entity_table(TOM)
    assert {e.key for e in table} == {"tom", "tommy", "pixel"}
    assert all(e.aliases == [] for e in table)


def test_a_merge_makes_two_names_one_entity_with_aliases() -> None:
    table = entity_table(TOM)
    edits = merge_edits([], table, "tom", ["tommy"])
    assert edits == [EntityEdit("tom", aliases=("Tommy",), merged=("tommy",))]
    merged = entity_table(TOM, edits)
    tom = find_entity(merged, "tom")
    assert tom is not None and tom.name == "Tom" and tom.aliases == ["Tommy"]
    assert tom.memory_ids == ["m1", "m2"]
    assert find_entity(merged, "tommy") is tom  # an alias finds it too
    assert len(merged) == 2
    assert names_for({"friend"}, merged) == ["Tom", "Tommy"]


def test_chinese_and_english_names_meet_through_a_merge() -> None:
    mems = memories(
        "The user's grandma Nainai grows tomatoes.",
        "用户的奶奶每年秋天做月饼。",
        "The user's grandma Lily plays mahjong.",  # two grandmas: 奶奶 joins neither alone
    )
    table = entity_table(mems)
    assert {e.key for e in table} == {"nainai", "lily", "~grandma"}
    edits = merge_edits([], table, "nainai", ["~grandma"])
    table = entity_table(mems, edits)
    nainai = find_entity(table, "nainai")
    assert nainai is not None and nainai.memory_ids == ["m1", "m2"]
    assert {e.key for e in table} == {"nainai", "lily"}  # no grandma left known by relation


def test_an_alias_reaches_the_memories_that_say_it() -> None:
    mems = memories(
        "The user's grandma Nainai grows tomatoes.",
        "奶奶每年秋天做月饼。",  # no relation said: not an entity's until the alias
        "Nainai's tomatoes won a prize.",
    )
    assert find_entity(entity_table(mems), "nainai").memory_ids == ["m1"]  # type: ignore[union-attr]
    edits = edit_entity([], "nainai", aliases=["奶奶"])
    nainai = find_entity(entity_table(mems, edits), "nainai")
    assert nainai is not None and nainai.memory_ids == ["m1", "m2"]
    assert nainai.aliases == ["奶奶"]


def test_a_rename_keeps_the_key_and_the_old_name_as_an_alias() -> None:
    edits = edit_entity([], "tommy", name="Thomas")
    thomas = find_entity(entity_table(TOM, edits), "tommy")
    assert thomas is not None and thomas.name == "Thomas" and thomas.aliases == ["Tommy"]
    # A note that names it by the old name is still introduced.
    assert introduce("Tommy got the job.", [thomas]) == "The user's friend Tommy got the job."


def test_a_relation_or_kind_edit_changes_what_recall_and_notes_read() -> None:
    edits = edit_entity([], "tom", relation="brother")
    table = entity_table(TOM, edits)
    tom = find_entity(table, "tom")
    assert tom is not None and tom.relation == "brother" and tom.kind == "person"
    assert names_for({"brother"}, table) == ["Tom"]
    assert introduce("Tom got the job.", table) == "The user's brother Tom got the job."
    # A Chinese word of a relation is read as its canonical one; a kind may be set alone.
    edits = edit_entity(edits, "pixel", relation="狗", kind="pet")
    pixel = find_entity(entity_table(TOM, edits), "pixel")
    assert pixel is not None and pixel.relation == "dog" and pixel.kind == "pet"


def test_an_unnamed_mention_joins_the_one_entity_of_its_edited_relation() -> None:
    mems = memories("The user's friend Nainai grows tomatoes.", "The user's grandma is 90.")
    assert len(entity_table(mems)) == 2
    table = entity_table(mems, edit_entity([], "nainai", relation="grandma"))
    assert [(e.name, e.memory_ids) for e in table] == [("Nainai", ["m1", "m2"])]


def test_a_deleted_entity_is_hidden_and_forgotten_with_reads_its_memories_alone() -> None:
    mems = memories(
        "Tom, the user's friend, plays the bass.",
        "The user's friend Tom and the user's dog Pixel went to the beach.",
    )
    table = entity_table(mems)
    tom = find_entity(table, "tom")
    assert tom is not None and forgotten_with(tom, table) == ["m1"]
    hidden = entity_table(mems, edit_entity([], "tom", deleted=True))
    assert [e.key for e in hidden] == ["pixel"]
    assert names_for({"friend"}, hidden) == []


def test_merges_chain_and_edits_round_trip() -> None:
    mems = memories(
        "Tom, the user's friend, plays the bass.",
        "The user's friend Tommy is moving.",
        "The user's friend Thomas is tall.",
    )
    edits = merge_edits([], entity_table(mems), "tommy", ["thomas"])
    edits = edit_entity(edits, "tommy", relation="brother")
    edits = merge_edits(edits, entity_table(mems, edits), "tom", ["tommy"])
    (only,) = entity_table(mems, edits)
    assert only.key == "tom" and only.memory_ids == ["m1", "m2", "m3"]
    assert set(only.aliases) == {"Tommy", "Thomas"}
    assert [EntityEdit.from_dict(e.to_dict()) for e in edits] == edits
    # A cycle (stored by hand) ends where it closes instead of looping.
    cyclic = [EntityEdit("tom", merged=("tommy",)), EntityEdit("tommy", merged=("tom",))]
    assert len(entity_table(mems, cyclic)) >= 1
