from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.clock import FixedClock
from backend.engine.turn import TurnEngine, TurnSettings
from backend.llm.fake import FakeChatModel
from backend.longterm.memory import LongTermMemory
from backend.personas import PersonaRegistry
from backend.sessions.store import SessionStore
from backend.stores.in_memory import InMemoryVectorStore
from tests.stores.fakes import BagOfWordsEmbedder

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Rig:
    engine: TurnEngine
    chat: FakeChatModel
    hippocampus: FakeChatModel
    sessions: SessionStore
    long_term: LongTermMemory
    clock: FixedClock


def make_rig(tmp_path: Path, *, use_tools: bool = False, hippocampus_timeout_s: float = 5.0) -> Rig:
    clock = FixedClock(datetime(2026, 5, 1, 21, 0, tzinfo=UTC))
    sessions = SessionStore(tmp_path / "sessions.sqlite3", clock)
    long_term = LongTermMemory(InMemoryVectorStore(), BagOfWordsEmbedder(), clock)
    chat = FakeChatModel("fake-chat")
    hippocampus = FakeChatModel("fake-hippocampus")
    personas = PersonaRegistry.load(REPO / "personas", "companion")
    engine = TurnEngine(
        sessions=sessions,
        long_term=long_term,
        chat=chat,
        hippocampus=hippocampus,
        personas=personas,
        clock=clock,
        settings=TurnSettings(
            token_budget=300, hippocampus_timeout_s=hippocampus_timeout_s, use_tools=use_tools
        ),
    )
    return Rig(engine, chat, hippocampus, sessions, long_term, clock)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = make_rig(tmp_path)
    yield made
    made.sessions.close()
