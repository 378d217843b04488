"""A client's generation parameters through a whole turn on the real embedded model
(llama.cpp SmolLM2): ``stop``, ``seed`` and ``temperature: 0`` (issue 15). The
adapter-level checks are in tests/llm/test_sampling_real_model.py; these go through the
engine, as ``/v1/chat/completions`` does, including a regeneration of the same turn."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.clock import FixedClock
from backend.engine.services import build_services
from backend.engine.turn import TurnEngine, TurnRequest
from backend.llm.embedded_llama import EmbeddedLlamaChatModel
from backend.llm.port import Sampling
from backend.stores.in_memory import InMemoryVectorStore
from tests.engine.wiring import app_settings
from tests.stores.fakes import BagOfWordsEmbedder
from tests.support import require_embedded_model

pytestmark = [pytest.mark.anyio, pytest.mark.real_model, pytest.mark.slow]

FRUITS = "Name five fruits in one line, separated by commas, like: apple, pear, ..."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[TurnEngine]:
    require_embedded_model()
    settings = app_settings(
        tmp_path / "data",
        chat={"model": "smollm2-135m"},
        hippocampus={"model": "smollm2-135m"},  # embedded: the compact contract
    )
    services = build_services(
        settings,
        clock=FixedClock(datetime(2026, 12, 1, 20, 0, tzinfo=UTC)),
        command="test",
        chat=EmbeddedLlamaChatModel(preset="smollm2-135m", n_ctx=2048, max_tokens=40),
        hippocampus=EmbeddedLlamaChatModel(preset="smollm2-135m", n_ctx=2048, max_tokens=30),
        embedder=BagOfWordsEmbedder(),
        store=InMemoryVectorStore(),
    )
    try:
        yield services.engine
    finally:
        await services.aclose()


async def reply(engine: TurnEngine, request: TurnRequest) -> tuple[str, str]:
    async with engine.turn(request) as turn:
        text = "".join([chunk async for chunk in turn.stream()])
    return turn.session.id, text


async def test_stop_sequence_ends_the_stored_reply(engine: TurnEngine) -> None:
    _, free = await reply(engine, TurnRequest("u", FRUITS, temperature=0))
    assert "," in free  # the prompt does make the model write commas
    # Another user: the same prompt, not a regeneration of the first reply.
    _, stopped = await reply(
        engine,
        TurnRequest("v", FRUITS, temperature=0, sampling=Sampling(stop=(",",))),
    )
    assert "," not in stopped and stopped.strip()
    assert free.startswith(stopped.rstrip())


async def test_temperature_zero_is_greedy_and_a_regeneration_replaces_the_reply(
    engine: TurnEngine,
) -> None:
    session, _ = await reply(engine, TurnRequest("u", FRUITS, temperature=0))
    # Greedy: the same prompt, the same reply. (Compared once the prompt is in llama.cpp's
    # cache: a cold evaluation runs other kernels, whose rounding can tip a near-tie;
    # docs/api.md, "Generation parameters".)
    _, first = await reply(engine, TurnRequest("v", FRUITS, temperature=0))
    _, other = await reply(engine, TurnRequest("w", FRUITS, temperature=0))
    assert other == first
    # The client resends the same conversation: the turn's reply is redone in place.
    same_session, again = await reply(
        engine, TurnRequest("u", FRUITS, temperature=0.9, sampling=Sampling(seed=3))
    )
    assert same_session == session and again.strip()
    rows = engine.sessions.transcript(session)
    assert [(m.role, m.content) for m in rows] == [("user", FRUITS), ("assistant", again)]


async def test_the_same_seed_gives_the_same_reply(engine: TurnEngine) -> None:
    seeded = TurnRequest("u", FRUITS, temperature=0.9, sampling=Sampling(seed=7))
    await reply(engine, seeded)  # the prompt into the cache (see the test above)
    _, one = await reply(engine, dataclasses.replace(seeded, user_id="v"))
    _, two = await reply(engine, dataclasses.replace(seeded, user_id="w"))
    assert one == two
