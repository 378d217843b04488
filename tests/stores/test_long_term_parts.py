"""``LongTermMemory``'s public API for deleting (version chains spliced), forgetting a
namespace and writing while the store may be down; and the package's shape: small parts
that never reach into each other's private fields nor import ``memory.py``."""

from __future__ import annotations

import ast
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.clock import FixedClock
from backend.config import MemorySettings
from backend.longterm.memory import LongTermMemory
from backend.longterm.outbox import WriteOutbox
from backend.memory.hybrid import lexical_tokens
from backend.memory.types import Candidate, Namespace
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.vector_port import VectorStoreUnavailable

from .fakes import BagOfWordsEmbedder
from .test_outbox import SwitchedStore

NS = Namespace("alice", "companion")
OTHER = Namespace("bob", "companion")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
PACKAGE = Path(__file__).resolve().parents[2] / "backend" / "longterm"


def memory(**activation: object) -> LongTermMemory:
    counter = iter(range(1, 10_000))
    policy = replace(MemorySettings().activation_policy(), **activation)  # type: ignore[arg-type]
    return LongTermMemory(
        InMemoryVectorStore(), BagOfWordsEmbedder(), FixedClock(T0),
        activation=policy, id_factory=lambda: f"m{next(counter):04d}",
    )  # fmt: skip


def fact(content: str, **kw: object) -> Candidate:
    fields: dict[str, object] = {"importance": 0.8, "confidence": 0.9, "category": "personal_fact"}
    fields.update(kw)
    return Candidate(content=content, **fields)  # type: ignore[arg-type]


def chain_of_three(ltm: LongTermMemory) -> list[str]:
    """Three versions of one fact, oldest first."""
    ids = [ltm.write(NS, [fact("The user lives in Guangzhou")])[0].memory_id or ""]
    for city in ("Hangzhou", "Shanghai"):
        out = ltm.write(NS, [fact(f"The user moved to {city}", supersedes=ids[-1])])
        assert out[0].action == "supersede"
        ids.append(out[0].memory_id or "")
    assert [m.id for m in ltm.version_chain(NS, ids[0])] == ids
    return ids


def test_deleting_a_middle_version_links_its_neighbours() -> None:
    ltm = memory()
    old, middle, new = chain_of_three(ltm)
    assert ltm.delete_memories(NS, [middle, middle]) == 1
    assert [m.id for m in ltm.version_chain(NS, old)] == [old, new]
    kept_old, kept_new = ltm.get(NS, old), ltm.get(NS, new)
    assert kept_old is not None and kept_old.superseded_by == new
    assert kept_new is not None and kept_new.supersedes == old


def test_deleting_the_newest_versions_makes_the_oldest_live_again() -> None:
    ltm = memory()
    old, middle, new = chain_of_three(ltm)
    assert ltm.delete_memories(NS, [new, middle]) == 2
    revived = ltm.get(NS, old)
    assert revived is not None and revived.superseded_by is None and not revived.is_superseded
    assert old in [m.id for m in ltm.activate(NS, "where does the user live").memories]


def test_deleting_one_memory_splices_its_chain_too() -> None:
    """``delete`` (MCP's ``memory_forget``) is the one-id form of ``delete_memories``:
    forgetting a fact's newest version brings the one before it back into recall."""
    ltm = memory()
    old, middle, new = chain_of_three(ltm)
    assert ltm.delete(NS, new)
    assert not ltm.delete(NS, new)
    revived = ltm.get(NS, middle)
    assert revived is not None and revived.superseded_by is None
    assert [m.id for m in ltm.version_chain(NS, old)] == [old, middle]


def test_deleting_unknown_or_foreign_ids_deletes_nothing() -> None:
    ltm = memory()
    [mine] = chain_of_three(ltm)[-1:]
    assert ltm.delete_memories(OTHER, [mine]) == 0  # another namespace's id reads as unknown
    assert ltm.delete_memories(NS, ["nope"]) == 0
    assert ltm.delete_memories(NS, []) == 0
    assert ltm.get(NS, mine) is not None


def test_forgetting_a_namespace_drops_its_memories_and_index_entries_only() -> None:
    ltm = memory(lexical_pool=20)
    ltm.write(NS, [fact("The user plays the cello"), fact("The user keeps bees")])
    ltm.write(OTHER, [fact("Bob plays the cello too")])
    ltm.activate(NS, "cello")  # loads the namespace into the lexical index
    index = ltm.lexical
    assert index is not None and index.search(NS, lexical_tokens("cello"), 5)
    assert ltm.forget_namespace(NS) == 2
    assert ltm.store.count(NS) == 0 and ltm.store.count(OTHER) == 1
    assert ltm.activate(NS, "cello").memories == []
    assert [m.content for m in ltm.activate(OTHER, "cello").memories] == ["Bob plays the cello too"]
    assert ltm.forget_namespace(NS) == 0


def test_write_or_queue_queues_on_an_outage_and_raises_without_an_outbox(
    tmp_path: Path,
) -> None:
    store = SwitchedStore()
    clock = FixedClock(T0)
    queued = LongTermMemory(
        store, BagOfWordsEmbedder(), clock, outbox=WriteOutbox(tmp_path / "outbox.sqlite3")
    )
    plain = LongTermMemory(store, BagOfWordsEmbedder(), clock)
    assert plain.outbox is None and queued.outbox is not None
    assert [o.action for o in queued.write_or_queue(NS, [fact("Mei lives in Osaka")])] == ["write"]
    store.down = True
    assert [o.action for o in queued.write_or_queue(NS, [fact("The user is a nurse")])] == ["queue"]
    assert queued.outbox.counts() == (1, 0)
    with pytest.raises(VectorStoreUnavailable):
        plain.write_or_queue(NS, [fact("The user is a nurse")])


def test_a_replaced_activation_policy_reaches_the_gate() -> None:
    ltm = memory()
    ltm.write(NS, [fact("The user has a hamster named Bean")])
    ltm.activation = replace(ltm.activation, gate_neighbours=0)  # the gate sees no neighbour
    assert ltm.write(NS, [fact("The user has a hamster named Bean")])[0].action == "write"


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_parts_neither_import_the_facade_nor_touch_private_fields() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path.name not in {"memory.py", "outbox_replay.py"}:  # outbox_replay drives it
            assert "backend.longterm.memory" not in _imports(tree), path.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                if node.attr.startswith("__"):
                    continue
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id in {"self", "cls"}, (
                    f"{path.name}:{node.lineno}: {ast.unparse(node)}"
                )
