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
        with pytest.raises(VectorStoreUnavailable, match="not connected"):
            lazy.count(NS)
    assert factory.calls == 1  # no new attempt within retry_s


def test_other_errors_are_not_retried_quietly() -> None:
    def broken() -> VectorStore:
        raise ValueError("incompatible server")

    with pytest.raises(ValueError, match="incompatible"):
        LazyVectorStore(broken)
