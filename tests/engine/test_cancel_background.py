"""``TurnEngine.cancel_background``: the engine's background work stops unfinished, as in a
process that dies (the cluster tests stand for a killed process with it)."""

from __future__ import annotations

import asyncio

import pytest

from backend.engine.turn import TurnRequest

from .conftest import Rig

pytestmark = pytest.mark.anyio


async def test_a_pending_merge_is_cancelled_and_the_turn_stays_unmerged(rig: Rig) -> None:
    gate = asyncio.Event()  # never set: the hippocampus run would wait for ever
    script = rig.hippocampus.enqueue(['{"background": "never"}'], wait_for=gate)
    rig.chat.enqueue(["Hello there."])
    async with rig.engine.turn(TurnRequest(user_id="alice", text="hi")) as turn:
        async for _ in turn.stream():
            pass
    await asyncio.wait_for(script.started.wait(), 5)

    await asyncio.wait_for(rig.engine.cancel_background(), 5)

    assert [m.content for m in rig.sessions.transcript(turn.session.id)] == ["hi", "Hello there."]
    assert rig.sessions.load_state(turn.session.id).short_term == ()
    assert rig.sessions.turn_reports(turn.session.id) == []
    await asyncio.wait_for(rig.engine.drain(), 1)  # nothing is left to wait for


async def test_with_nothing_in_the_background_it_returns_at_once(rig: Rig) -> None:
    await asyncio.wait_for(rig.engine.cancel_background(), 1)
