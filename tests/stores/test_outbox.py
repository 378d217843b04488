"""The write outbox: long-term writes queued while the store is down, replayed once.

The store here is the in-memory reference behind a switch that makes it raise
``VectorStoreUnavailable`` (as the Chroma adapter does when its server is gone); the
same path against a real ``chroma run`` server that is stopped and restarted, through
the whole app, is ``tests/web/test_chroma_outage.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from backend.clock import FixedClock
from backend.longterm.memory import LongTermMemory, WriteInterrupted
from backend.longterm.outbox import MAX_ATTEMPTS, PendingWrite, WriteOutbox
from backend.longterm.outbox_replay import replay_once
from backend.memory.types import About, Candidate, Emotion, GatePolicy, Memory, Namespace
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.vector_port import VectorStoreUnavailable

from .fakes import BagOfWordsEmbedder

NS = Namespace("alice", "companion")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class SwitchedStore(InMemoryVectorStore):
    """The reference store with an outage switch: ``down``, or down after ``upserts_left``
    more upserts (an outage in the middle of a batch), or ``broken`` (a non-outage bug)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.upserts_left: int | None = None
        self.broken: Exception | None = None

    def _check(self) -> None:
        if self.down:
            raise VectorStoreUnavailable("switched off")

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self._check()
        if self.broken is not None:
            raise self.broken
        if self.upserts_left is not None:
            if self.upserts_left == 0:
                self.down = True
                self._check()
            self.upserts_left -= 1
        super().upsert(ns, memories)

    def get(self, ns: Namespace, ids: Sequence[str]) -> list[Memory]:
        self._check()
        return super().get(ns, ids)

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> list[tuple[Memory, float]]:
        self._check()
        return super().query(ns, vector, n, include_superseded=include_superseded)

    def list(self, ns: Namespace, **kwargs: object) -> list[Memory]:  # type: ignore[override]
        self._check()
        return super().list(ns, **kwargs)  # type: ignore[arg-type]


def fact(content: str, **kw: object) -> Candidate:
    fields: dict[str, object] = {"importance": 0.8, "confidence": 0.9, "category": "personal_fact"}
    fields.update(kw)
    return Candidate(content=content, **fields)  # type: ignore[arg-type]


@pytest.fixture
def store() -> SwitchedStore:
    return SwitchedStore()


@pytest.fixture
def ltm(store: SwitchedStore, tmp_path: Path) -> LongTermMemory:
    counter = iter(range(1, 10_000))
    return LongTermMemory(
        store,
        BagOfWordsEmbedder(),
        FixedClock(T0),
        id_factory=lambda: f"m{next(counter):04d}",
        outbox=WriteOutbox(tmp_path / "outbox.sqlite3"),
    )


def outbox_of(ltm: LongTermMemory) -> WriteOutbox:
    assert ltm.outbox is not None
    return ltm.outbox


def live(ltm: LongTermMemory) -> list[str]:
    return sorted(m.content for m in ltm.store.list(NS, limit=100, include_superseded=False))


def test_an_appended_write_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    write = PendingWrite(
        namespace=NS,
        candidates=(
            fact(
                "Mei lives in Osaka",
                keywords=("mei", "osaka"),
                emotion=Emotion("joy", 0.6),
                about=(About("Mei", "sister"),),
            ),
            fact("The user drinks oolong tea", subject="user", supersedes="coffee"),
        ),
        queued_at=T0,
        recalled_ids=("m1", "m2"),
        source_session="s-1",
        gate_policy=GatePolicy(min_importance=0.3, duplicate_cosine=0.95),
    )
    first = WriteOutbox(path)
    entry_id = first.append(write)
    first.close()
    again = WriteOutbox(path)
    [entry] = again.pending()
    assert (entry.id, entry.done, entry.attempts) == (entry_id, 0, 0)
    assert entry.write == write
    assert again.counts() == (2, 0)
    again.close()


def test_an_outage_queues_the_candidates_and_replay_writes_each_once(
    ltm: LongTermMemory, store: SwitchedStore
) -> None:
    store.down = True
    outcomes = ltm.write_or_queue(
        NS, [fact("Mei lives in Osaka"), fact("The user is a nurse")], source_session="s-1"
    )
    assert [o.action for o in outcomes] == ["queue", "queue"]
    assert outbox_of(ltm).counts() == (2, 0)
    assert replay_once(ltm).stopped is not None  # still down: nothing lost, nothing written
    assert outbox_of(ltm).counts() == (2, 0)
    store.down = False
    report = replay_once(ltm)
    assert report.stopped is None and report.entries == 1
    assert [o.action for o in report.outcomes] == ["write", "write"]
    assert live(ltm) == ["Mei lives in Osaka", "The user is a nurse"]
    assert {m.source_session for m in ltm.store.list(NS)} == {"s-1"}
    assert outbox_of(ltm).counts() == (0, 0)
    assert replay_once(ltm).entries == 0
    assert ltm.store.count(NS) == 2


def test_an_outage_mid_batch_queues_only_what_was_not_applied(
    ltm: LongTermMemory, store: SwitchedStore
) -> None:
    candidates = [fact("Mei lives in Osaka"), fact("The user is a nurse"), fact("Tom plays chess")]
    store.upserts_left = 1  # the first candidate is written, then the store goes away
    with pytest.raises(WriteInterrupted) as raised:
        ltm.write(Namespace("carol", "companion"), candidates)
    assert [o.action for o in raised.value.outcomes] == ["write"]
    assert [c.content for c in raised.value.remaining] == [c.content for c in candidates[1:]]
    store.down, store.upserts_left = False, 1
    outcomes = ltm.write_or_queue(NS, candidates)
    assert [o.action for o in outcomes] == ["write", "queue", "queue"]
    assert outbox_of(ltm).counts() == (2, 0)
    store.down, store.upserts_left = False, None
    replay_once(ltm)
    assert live(ltm) == sorted(c.content for c in candidates)
    assert ltm.store.count(NS) == 3


def test_replay_resumes_where_an_outage_stopped_it(
    ltm: LongTermMemory, store: SwitchedStore
) -> None:
    store.down = True
    ltm.write_or_queue(NS, [fact("Mei lives in Osaka"), fact("The user is a nurse")])
    store.down, store.upserts_left = False, 1
    report = replay_once(ltm)
    assert report.stopped is not None and [o.action for o in report.outcomes] == ["write"]
    [entry] = outbox_of(ltm).pending()
    assert entry.done == 1
    store.down, store.upserts_left = False, None
    assert [o.action for o in replay_once(ltm).outcomes] == ["write"]  # the second only
    [osaka] = [m for m in ltm.store.list(NS) if "Osaka" in m.content]
    assert osaka.access_count == 0  # not applied a second time (not even reinforced)
    assert ltm.store.count(NS) == 2


def test_writes_of_a_namespace_queue_behind_its_pending_ones(
    ltm: LongTermMemory, store: SwitchedStore
) -> None:
    store.down = True
    ltm.write_or_queue(NS, [fact("The user lives in Berlin", keywords=("lives", "berlin"))])
    store.down = False  # back, but the Berlin fact has not been replayed yet
    update = fact(
        "The user moved to Lisbon", keywords=("lives", "lisbon"), supersedes="lives in Berlin"
    )
    outcomes = ltm.write_or_queue(NS, [update])
    assert [(o.action, o.reason) for o in outcomes] == [
        ("queue", "queued behind earlier writes waiting for the store")
    ]
    other = Namespace("bob", "companion")  # another namespace is not held up
    assert [o.action for o in ltm.write_or_queue(other, [fact("Bob is a baker")])] == ["write"]
    report = replay_once(ltm)
    assert [o.action for o in report.outcomes] == ["write", "supersede"]
    assert live(ltm) == ["The user moved to Lisbon"]  # Berlin kept, superseded
    assert ltm.store.count(NS) == 2


def test_replay_applies_the_echo_rule_with_the_turns_recalled_memories(
    ltm: LongTermMemory, store: SwitchedStore
) -> None:
    [written] = ltm.write(NS, [fact("Mei lives in Osaka")])
    recalled = ltm.store.get(NS, [written.memory_id or ""])
    store.down = True
    outcomes = ltm.write_or_queue(NS, [fact("Mei lives in Osaka")], recalled=recalled)
    assert [o.action for o in outcomes] == ["queue"]
    store.down = False
    [outcome] = replay_once(ltm).outcomes
    assert outcome.action == "reinforce" and outcome.memory_id == written.memory_id
    assert "recalled" in outcome.reason or "echo" in outcome.reason
    assert ltm.store.count(NS) == 1


def test_a_failing_entry_is_parked_and_the_queue_drains(
    ltm: LongTermMemory, store: SwitchedStore
) -> None:
    bob = Namespace("bob", "companion")
    store.down = True
    ltm.write_or_queue(NS, [fact("Mei lives in Osaka")])
    ltm.write_or_queue(bob, [fact("Bob is a baker")])
    store.down, store.broken = False, RuntimeError("a bug, not an outage")
    for _ in range(MAX_ATTEMPTS - 1):  # the oldest entry fails and holds the queue
        report = replay_once(ltm)
        assert report.stopped == "error: RuntimeError" and report.entries == 0
    outbox = outbox_of(ltm)
    assert [e.attempts for e in outbox.pending()] == [MAX_ATTEMPTS - 1, 0]
    replay_once(ltm)  # its last attempt parks it; bob's entry fails once behind it
    assert outbox.counts() == (1, 1)
    store.broken = None
    report = replay_once(ltm)
    assert report.entries == 1 and [o.action for o in report.outcomes] == ["write"]
    assert outbox.counts() == (0, 1)
    assert ltm.store.count(NS) == 0 and ltm.store.count(bob) == 1


def test_an_undecodable_entry_is_parked_not_fatal(ltm: LongTermMemory, tmp_path: Path) -> None:
    outbox = outbox_of(ltm)
    outbox.append(
        PendingWrite(namespace=NS, candidates=(fact("Mei lives in Osaka"),), queued_at=T0)
    )
    with closing(sqlite3.connect(tmp_path / "outbox.sqlite3")) as db, db:
        db.execute(
            "INSERT INTO pending_writes (user_id, persona_id, payload, queued_at)"
            " VALUES ('alice', 'companion', ?, '2026-03-01')",
            ('{"candidates": [{}]}',),
        )
    report = replay_once(ltm)
    assert report.entries == 1
    assert live(ltm) == ["Mei lives in Osaka"]
    assert outbox.counts() == (0, 1)


def test_without_an_outbox_the_outage_is_raised(store: SwitchedStore) -> None:
    plain = LongTermMemory(store, BagOfWordsEmbedder(), FixedClock(T0))
    store.down = True
    with pytest.raises(VectorStoreUnavailable):
        plain.write_or_queue(NS, [fact("Mei lives in Osaka")])
