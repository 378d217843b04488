"""``LazyVectorStore``: an HTTP store whose server is down at start connects later."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.memory.types import Memory, Namespace
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.lazy_store import LazyVectorStore
from backend.stores.vector_port import VectorStore, VectorStoreUnavailable

NS = Namespace("alice", "companion")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Factory:
    """Fails while ``down``; counts its calls."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0
        self.store = InMemoryVectorStore()

    def __call__(self) -> VectorStore:
        self.calls += 1
        if self.down:
            raise VectorStoreUnavailable("connection refused")
        return self.store


def memory() -> Memory:
    return Memory(
        id="m1", content="Mei lives in Osaka", category="personal_fact", importance=0.8,
        created_at=T0, last_accessed=T0,
    )  # fmt: skip


def test_a_store_down_at_start_connects_once_it_is_up() -> None:
    factory = Factory()
    lazy = LazyVectorStore(factory, retry_s=0.0)  # construction does not raise
    assert not lazy.connected
    with pytest.raises(VectorStoreUnavailable):
        lazy.upsert(NS, [memory()])
    factory.down = False
    lazy.upsert(NS, [memory()])
    assert lazy.connected and [m.id for m in lazy.get(NS, ["m1"])] == ["m1"]
    assert lazy.count(NS) == 1 and lazy.namespaces() == [NS]
    calls = factory.calls
    lazy.count(NS)
    assert factory.calls == calls  # connected: the factory is not called again


def test_attempts_are_spaced_by_retry_s() -> None:
    factory = Factory()
    lazy = LazyVectorStore(factory, retry_s=3600.0)
    assert factory.calls == 1
    for _ in range(3):
        with pytest.raises(VectorStoreUnavailable, match="vector store down"):
            lazy.count(NS)
    assert factory.calls == 1  # no new attempt within retry_s


def test_other_errors_are_not_retried_quietly() -> None:
    def broken() -> VectorStore:
        raise ValueError("incompatible server")

    with pytest.raises(ValueError, match="incompatible"):
        LazyVectorStore(broken)


class Outage(InMemoryVectorStore):
    """The reference store whose server can go away; counts the calls that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def count(self, ns: Namespace, **kwargs: object) -> int:  # type: ignore[override]
        self.calls += 1
        if self.down:
            raise VectorStoreUnavailable("timed out")
        return super().count(ns, **kwargs)  # type: ignore[arg-type]


def test_after_an_outage_calls_fail_fast_until_the_probe_passes() -> None:
    inner = Outage()
    heartbeat = {"ok": True, "calls": 0}

    def probe() -> None:
        heartbeat["calls"] += 1
        if not heartbeat["ok"]:
            raise VectorStoreUnavailable("heartbeat timed out")

    lazy = LazyVectorStore(lambda: inner, probe=probe, retry_s=3600.0)
    assert lazy.count(NS) == 0 and not lazy.down
    inner.down, heartbeat["ok"] = True, False
    with pytest.raises(VectorStoreUnavailable, match="timed out"):
        lazy.count(NS)  # the one call that waits for the hung server
    assert lazy.down
    for _ in range(5):
        with pytest.raises(VectorStoreUnavailable, match="vector store down"):
            lazy.count(NS)
    assert inner.calls == 2 and heartbeat["calls"] == 0  # failed fast, nothing was sent

    lazy = LazyVectorStore(lambda: inner, probe=probe, retry_s=0.0)  # checks on every call
    with pytest.raises(VectorStoreUnavailable, match="timed out"):
        lazy.count(NS)
    inner.down = False  # the server is back, but its heartbeat does not answer yet
    with pytest.raises(VectorStoreUnavailable, match="heartbeat"):
        lazy.count(NS)
    assert heartbeat["calls"] == 1 and lazy.down
    heartbeat["ok"] = True
    assert lazy.count(NS) == 0 and not lazy.down  # the probe passed: calls go through
