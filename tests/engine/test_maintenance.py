from __future__ import annotations

from datetime import UTC, datetime

from backend.clock import FixedClock
from backend.engine.maintenance import run_maintenance
from backend.longterm.memory import LongTermMemory
from backend.memory.types import Candidate, Namespace
from backend.stores.in_memory import InMemoryVectorStore
from tests.stores.fakes import BagOfWordsEmbedder


def test_maintenance_fades_and_backfills_every_namespace() -> None:
    clock = FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
    embedder = BagOfWordsEmbedder()
    ltm = LongTermMemory(InMemoryVectorStore(), embedder, clock)
    weak = Candidate("The user tried a new cafe", "experience", importance=0.45, confidence=0.9)
    strong = Candidate("The user's father is Jun", "relationship", importance=0.9, confidence=0.9)
    ltm.write(Namespace("a", "companion"), [weak, strong])
    embedder.down = True
    ltm.write(Namespace("b", "companion"), [strong])  # stored without a vector
    embedder.down = False
    clock.advance(days=400)
    report = run_maintenance(ltm)
    assert (report.namespaces, report.faded, report.backfilled) == (2, 1, 1)
    assert ltm.store.missing_vectors(Namespace("b", "companion"), 10) == []
