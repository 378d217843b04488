"""``outbox_loop``: queued writes are replayed in the background; stopping lets the pass in
flight finish (so a write is never cut by the store being closed under it)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.clock import FixedClock
from backend.longterm.memory import LongTermMemory
from backend.longterm.outbox import WriteOutbox
from backend.longterm.outbox_replay import outbox_loop
from backend.memory.types import Candidate, Memory, Namespace
from tests.stores.fakes import BagOfWordsEmbedder
from tests.stores.test_outbox import SwitchedStore

NS = Namespace("alice", "companion")
FACT = Candidate("Mei lives in Osaka", "personal_fact", importance=0.8, confidence=0.9)
WAIT_S = 10.0  # bound on every wait below (nothing is timed)

pytestmark = pytest.mark.anyio


class HeldStore(SwitchedStore):
    """Its upserts wait for ``release`` (a write in flight when the app stops)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self.entered.set()
        assert self.release.wait(WAIT_S)
        super().upsert(ns, memories)


def memory(store: SwitchedStore, tmp_path: Path) -> LongTermMemory:
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    outbox = WriteOutbox(tmp_path / "outbox.sqlite3")
    return LongTermMemory(store, BagOfWordsEmbedder(), clock, outbox=outbox)


async def until(check: object) -> None:
    for _ in range(int(WAIT_S / 0.01)):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_the_loop_replays_once_the_store_is_back(tmp_path: Path) -> None:
    store = SwitchedStore()
    ltm = memory(store, tmp_path)
    store.down = True
    assert [o.action for o in ltm.write_or_queue(NS, [FACT])] == ["queue"]
    loop = asyncio.ensure_future(
        outbox_loop(ltm, idle_s=0.01, min_backoff_s=0.01, max_backoff_s=0.02)
    )
    try:
        await asyncio.sleep(0.05)  # a few passes against the store that is down
        assert ltm.outbox is not None and ltm.outbox.counts() == (1, 0)  # kept, not parked
        store.down = False
        await until(lambda: ltm.store.count(NS) == 1)
        assert ltm.outbox is not None and ltm.outbox.counts() == (0, 0)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_stopping_waits_for_the_pass_in_flight(tmp_path: Path) -> None:
    store = HeldStore()
    ltm = memory(store, tmp_path)
    store.down = True
    ltm.write_or_queue(NS, [FACT])
    store.down = False
    loop = asyncio.ensure_future(outbox_loop(ltm, idle_s=0.01, min_backoff_s=0.01))
    await until(store.entered.is_set)  # the replay is inside the store's upsert
    loop.cancel()
    threading.Timer(0.1, store.release.set).start()
    await asyncio.gather(loop, return_exceptions=True)
    assert loop.cancelled()
    # The pass finished before the task did: the write is stored and the entry removed.
    assert ltm.store.count(NS) == 1
    assert ltm.outbox is not None and ltm.outbox.counts() == (0, 0)
