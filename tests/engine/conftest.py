from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from backend.clock import FixedClock
from backend.config import Settings
from backend.engine.services import Services, build_services
from backend.engine.turn import TurnEngine
from backend.llm.fake import FakeChatModel
from backend.longterm.memory import LongTermMemory
from backend.sessions.store import SessionStore
from backend.stores.in_memory import InMemoryVectorStore
from tests.stores.fakes import BagOfWordsEmbedder

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fake_settings(data_dir: Path, **sections: dict[str, Any]) -> Settings:
    """Settings for scripted models (``provider: openai``, never called: the fakes stand
    in), the repository's personas and ``data_dir``; ``sections`` merged over them."""
    data: dict[str, dict[str, Any]] = {
        "chat": {"provider": "openai", "model": "fake-chat"},
        "hippocampus": {"provider": "openai", "model": "fake-hippocampus"},
        "storage": {"data_dir": str(data_dir)},
        "server": {"personas_dir": str(REPO / "personas")},
    }
    for section, values in sections.items():
        data[section] = {**data.get(section, {}), **values}
    return Settings.model_validate(data)


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
