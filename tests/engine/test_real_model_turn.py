"""The whole turn on the real embedded models (llama.cpp SmolLM2 for both roles, MiniLM),
with the compact hippocampus contract the app uses for an embedded model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.clock import FixedClock
from backend.engine.services import build_services
from backend.engine.turn import TurnRequest
from backend.llm.embedded_llama import EmbeddedLlamaChatModel
from backend.memory.grounding import grounding
from backend.memory.types import Namespace
from bench.reply_judges import is_echo, is_refusal
from tests.engine.wiring import app_settings
from tests.support import require_embedded_model

pytestmark = [pytest.mark.anyio, pytest.mark.real_model, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_multi_turn_conversation_on_the_embedded_models(tmp_path: Path) -> None:
    require_embedded_model()
    settings = app_settings(
        tmp_path / "data",
        chat={"model": "smollm2-135m"},
        hippocampus={"model": "smollm2-135m"},  # embedded: the compact contract
        memory={"short_term_token_budget": 600},
    )
    # The app's wiring: Chroma in the data directory, MiniLM, SQLite sessions, the outbox.
    # One model instance per role, as the app builds them; fixed seeds keep the run
    # repeatable.
    services = build_services(
        settings,
        clock=FixedClock(datetime(2026, 5, 1, 21, 0, tzinfo=UTC)),
        command="test",
        chat=EmbeddedLlamaChatModel(
            preset="smollm2-135m", n_ctx=2048, temperature=0.0, max_tokens=48, seed=1
        ),
        hippocampus=EmbeddedLlamaChatModel(
            preset="smollm2-135m", n_ctx=4096, temperature=0.0, max_tokens=300, seed=2
        ),
    )
    engine, sessions, store = services.engine, services.sessions, services.store
    messages = [
        "Hi! My name is Lin and I am allergic to peanuts.",
        "My sister Mei lives in Osaka and she is getting married in October.",
    ]
    session_id = None
    reports = []
    replies = []
    try:
        for text in messages:
            request = TurnRequest(user_id="lin", text=text, session_id=session_id)
            async with engine.turn(request) as turn:
                chunks = [chunk async for chunk in turn.stream()]
            session_id = turn.session.id
            assert len(chunks) > 1  # streamed in pieces
            replies.append("".join(chunks))
            assert turn.merged is not None
            reports.append(await turn.merged)
    finally:
        await engine.drain()
        await services.chat.aclose()
        await services.hippocampus.aclose()
    assert all(r["reply"]["status"] == "complete" for r in reports)
    # Each reply answers (bench/reply_judges.py, the judges of the reply benches): not
    # empty, not the user's message said back, not a refusal.
    for text, reply in zip(messages, replies, strict=True):
        assert reply.strip(), text
        assert not is_echo(reply, text), (text, reply)
        assert not is_refusal(reply), reply
    # The hippocampus answered with schema-valid JSON at least once...
    assert any(r["hippocampus"]["status"] == "ok" for r in reports), [
        r["hippocampus"] for r in reports
    ]
    # ...and whatever the small model proposed went through the gate: something was
    # written (else the check below would pass with nothing checked), each memory grounded
    # in the user's own words up to its turn (backend.memory.grounding, at the gate's
    # threshold; the replies are no evidence), everything else rejected with a reason.
    written = [(i, w["content"]) for i, r in enumerate(reports) for w in r["written"]]
    assert written, [(r["hippocampus"], r["rejected"]) for r in reports]
    min_support = services.long_term.gate_policy.min_support
    for turn_index, content in written:
        grounded = grounding(content, messages[: turn_index + 1])
        assert grounded.ok(min_support), (content, grounded)
    assert all(r["reason"] for rep in reports for r in rep["rejected"])
    assert store.count(Namespace("lin", "companion")) == sum(len(r["written"]) for r in reports)
    transcript = sessions.transcript(session_id or "")
    assert [m.role for m in transcript] == ["user", "assistant", "user", "assistant"]
    services.close()
