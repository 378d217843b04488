"""The relevance floor through a turn (issue 27, item 1; docs/memory-model.md, "Retrieval",
step 3): only the memories the message speaks for are injected, plus pinned ones and
salient health notes, and only what was injected for the message is reinforced. The
rig's bag-of-words embedder gives unrelated words no cosine, so this checks the wiring;
how well the local MiniLM tells the pug from the boss is measured in
docs/benchmarks.md ("Relevance floor")."""

from __future__ import annotations

import asyncio

import pytest

from backend.engine.turn import TurnRequest
from backend.memory.types import Memory, Namespace

from .conftest import Rig

NS = Namespace("u1", "companion")
BOSS = "I had a rough day, my boss yelled at me"
# A first chat's memories: one the boss message speaks for, the rest about other things.
UNRELATED = [
    ("The user is a grumpy old pug", "personal_fact", 0.8),
    ("The user works as a pharmacist at a hospital", "work", 0.9),
    ("The user likes hiking on weekends", "interest", 0.6),
    ("The user's sister Mei lives in Osaka", "relationship", 0.8),
    ("The user is learning Japanese", "interest", 0.7),
    ("The user drinks green tea every morning", "preference", 0.5),
]


def remember(rig: Rig, content: str, category: str, importance: float, **kw: bool) -> Memory:
    memory = rig.long_term.new_memory(content, category=category, importance=importance, **kw)
    return rig.long_term.create(NS, memory)


async def one_turn(rig: Rig, text: str) -> str:
    """The notes block shown right before ``text`` (empty when none), after the turn."""
    rig.chat.enqueue(["that sounds hard"])
    rig.hippocampus.enqueue(['{"facts": [], "emotion": "neutral"}'])
    await rig.engine.run(TurnRequest(user_id="u1", text=text))
    await asyncio.wait_for(rig.engine.drain(), 5)
    messages = rig.chat.calls[-1].messages
    assert messages[-1]["content"] == text
    before = messages[-2]["content"] if len(messages) > 1 else ""
    return before if "Recalled notes" in before else ""


def access(rig: Rig, memory: Memory) -> int:
    stored = rig.long_term.get(NS, memory.id)
    assert stored is not None
    return stored.access_count


@pytest.mark.anyio
async def test_only_what_the_message_speaks_for_is_injected_and_reinforced(rig: Rig) -> None:
    boss = remember(rig, "The user's boss often yells in meetings", "work", 0.7)
    others = [remember(rig, *row) for row in UNRELATED]
    pinned = remember(rig, "The user wants to be called Sam", "personal_fact", 0.6, pinned=True)
    allergy = remember(rig, "The user is allergic to peanuts", "health", 0.9)
    block = await one_turn(rig, BOSS)
    assert "boss often yells" in block
    for content, _category, _importance in UNRELATED:  # the pug among them
        assert content.removeprefix("The user").split()[-1] not in block, content
    # Kept below the floor: what the user pinned, and a recent important health note.
    assert "called Sam" in block and "allergic to peanuts" in block
    # Reinforced: what the message asked for; not the rest, nor what was only held.
    assert access(rig, boss) == 1
    assert [access(rig, m) for m in [*others, pinned, allergy]] == [0] * (len(others) + 2)


@pytest.mark.anyio
async def test_a_message_with_nothing_relevant_gets_no_notes(rig: Rig) -> None:
    others = [remember(rig, *row) for row in UNRELATED]
    assert await one_turn(rig, BOSS) == ""
    assert [access(rig, m) for m in others] == [0] * len(others)
