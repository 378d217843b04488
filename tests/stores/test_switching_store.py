"""SwitchingVectorStore: forwards, notes what writes touch while tracking, switches."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import numpy as np

from backend.memory.types import Memory, Namespace
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.switching_store import SwitchingVectorStore

NS = Namespace("u", "p")
OTHER = Namespace("u", "q")
WHEN = datetime(2026, 5, 1, tzinfo=UTC)


def memory(memory_id: str, content: str = "tea") -> Memory:
    vector = np.ones(4, dtype=np.float32)
    return Memory(memory_id, content, "general", 0.5, WHEN, WHEN, embedding=vector)


def test_forwards_and_notes_writes_only_while_tracking() -> None:
    inner = InMemoryVectorStore()
    store = SwitchingVectorStore(inner)
    store.upsert(NS, [memory("a")])
    assert not store.tracking and not store.take_written()
    store.track()
    store.upsert(NS, [memory("b"), memory("c")])
    store.delete(NS, ["a"])
    store.upsert(OTHER, [memory("x")])
    store.drop_namespace(OTHER)
    written = store.take_written()
    assert written.ids == {NS: {"a", "b", "c"}} and written.dropped == {OTHER}
    assert not store.take_written()  # taken: reset
    assert [m.id for m in store.get(NS, ["b", "c"])] == ["b", "c"]
    assert inner.count(NS) == 2


def test_switch_replaces_the_store_and_stops_tracking() -> None:
    old, new = InMemoryVectorStore(), InMemoryVectorStore()
    store = SwitchingVectorStore(old, standby=new)
    store.track()
    assert store.switch(new) is old
    assert store.inner is new and store.standby is None and not store.tracking
    store.upsert(NS, [memory("a")])
    assert new.count(NS) == 1 and old.count(NS) == 0


def test_held_blocks_other_writers_until_released() -> None:
    store = SwitchingVectorStore(InMemoryVectorStore())
    done = threading.Event()

    def write() -> None:
        store.upsert(NS, [memory("late")])
        done.set()

    with store.held():
        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.05)
        assert not done.is_set()  # waiting for the hold
        store.upsert(NS, [memory("own")])  # the holder itself may write
    writer.join(timeout=5)
    assert done.is_set() and store.count(NS) == 2
