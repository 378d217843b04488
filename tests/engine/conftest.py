from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.clock import FixedClock
from backend.engine.services import Services, build_services
from backend.engine.turn import TurnEngine
from backend.llm.fake import FakeChatModel
from backend.longterm.memory import LongTermMemory
from backend.sessions.store import SessionStore
from backend.stores.in_memory import InMemoryVectorStore
from tests.engine.wiring import fake_settings
from tests.stores.fakes import BagOfWordsEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Rig:
    services: Services
    chat: FakeChatModel
    hippocampus: FakeChatModel
    clock: FixedClock

    @property
    def engine(self) -> TurnEngine:
        return self.services.engine

    @property
    def sessions(self) -> SessionStore:
        return self.services.sessions

    @property
    def long_term(self) -> LongTermMemory:
        return self.services.long_term


def make_rig(tmp_path: Path, *, use_tools: bool = False, hippocampus_timeout_s: float = 5.0) -> Rig:
    """The app's wiring (``build_services``) with fake models, a bag-of-words embedder
    and the in-memory vector store; sessions and the outbox in ``tmp_path / "data"``."""
    clock = FixedClock(datetime(2026, 5, 1, 21, 0, tzinfo=UTC))
    chat = FakeChatModel("fake-chat")
    hippocampus = FakeChatModel("fake-hippocampus")
    settings = fake_settings(
        tmp_path / "data",
        chat={"tools": use_tools},
        hippocampus={"timeout": hippocampus_timeout_s},
        memory={"short_term_token_budget": 300},
    )
    services = build_services(
        settings,
        clock=clock,
        command="test",
        chat=chat,
        hippocampus=hippocampus,
        embedder=BagOfWordsEmbedder(),
        store=InMemoryVectorStore(),
    )
    return Rig(services, chat, hippocampus, clock)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = make_rig(tmp_path)
    yield made
    made.services.close()
