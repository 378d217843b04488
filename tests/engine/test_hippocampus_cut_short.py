"""A hippocampus answer cut short by its server is asked again (issue 26): llama-cpp-python's
server ends a running stream with a bare ``[DONE]`` (no finish reason) when the next
reply's request comes in, and a client may see the connection drop mid-stream."""

from __future__ import annotations

import pytest

from backend.engine.turn_types import TurnRequest
from backend.llm.port import Finish, LLMStreamInterrupted
from tests.engine.conftest import Rig
from tests.engine.test_turn import hippo

pytestmark = pytest.mark.anyio

FACT = {
    "content": "The user is allergic to peanuts.",
    "category": "health",
    "importance": 0.9,
    "confidence": 0.95,
    "subject": "user",
    "keywords": ["peanuts", "allergy"],
}


async def one_turn(rig: Rig) -> dict:
    rig.chat.enqueue(["Noted."])
    request = TurnRequest(user_id="u1", text="I'm allergic to peanuts.")
    async with rig.engine.turn(request) as turn:
        async for _ in turn.stream():
            pass
    await rig.engine.drain()
    return rig.sessions.turn_reports(turn.session.id)[-1].report


@pytest.mark.parametrize(
    "cut",
    [
        ['{"background": "The user is allergic', Finish(None)],  # a bare [DONE]
        ['{"background": "The user', LLMStreamInterrupted("dropped", partial_text="x")],
    ],
    ids=["no-finish-reason", "connection-dropped"],
)
async def test_a_run_cut_short_is_asked_again_and_its_memory_forms(rig: Rig, cut: list) -> None:
    rig.hippocampus.enqueue(cut)
    rig.hippocampus.enqueue([hippo([FACT])])
    report = await one_turn(rig)
    assert report["hippocampus"]["status"] == "ok"
    assert report["hippocampus"]["retried"] == "stream interrupted"
    assert [w["content"] for w in report["written"]] == [FACT["content"]]
    assert len(rig.hippocampus.calls) == 2


async def test_unreadable_text_that_ended_normally_is_not_asked_again(rig: Rig) -> None:
    rig.hippocampus.enqueue(["I'd rather not answer in JSON."])  # finish "stop"
    report = await one_turn(rig)
    assert report["hippocampus"]["status"] == "garbage"
    assert len(rig.hippocampus.calls) == 1


async def test_cut_short_twice_is_left_for_the_next_run_and_is_no_failure(rig: Rig) -> None:
    cut = ['{"background": "The user', Finish(None)]
    rig.hippocampus.enqueue(cut)
    rig.hippocampus.enqueue(cut)
    report = await one_turn(rig)
    assert report["hippocampus"]["status"] == "interrupted"
    health = rig.engine.memory_health.report()
    assert health["hippocampus"]["failures_in_a_row"] == 0  # typing fast breaks nothing
