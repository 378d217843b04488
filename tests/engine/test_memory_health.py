"""``MemoryHealth``: a memory that stops forming is never silent (issue 26)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.clock import FixedClock
from backend.engine.memory_health import FAILURES_TO_WARN, INVALID_TO_SWITCH, MemoryHealth
from backend.engine.turn_types import TurnRequest
from backend.longterm.memory import WriteOutcome
from tests.engine.conftest import Rig

REFUSED = {
    "status": "failed",
    "model": "qwen15",
    "mode": "full",
    "error": "qwen15 at http://127.0.0.1:8080: unavailable: HTTP 500: response_format.type",
}
OK = {"status": "ok", "model": "qwen15", "mode": "full"}


def health() -> MemoryHealth:
    return MemoryHealth(FixedClock(datetime(2026, 12, 2, tzinfo=UTC)))


def test_three_failed_runs_in_a_row_warn_in_plain_words_and_one_success_clears() -> None:
    memory = health()
    for _ in range(FAILURES_TO_WARN - 1):
        memory.hippocampus_ran(REFUSED)
    assert memory.warning() is None  # one or two failures are weather
    memory.hippocampus_ran(REFUSED)
    warning = memory.warning()
    assert warning is not None
    assert warning.startswith("Memory is not being saved: the memory model failed: qwen15 at ")
    assert "HTTP 500" in warning
    report = memory.report()
    assert report["ok"] is False and report["warning"] == warning
    assert report["hippocampus"]["failures_in_a_row"] == FAILURES_TO_WARN
    memory.hippocampus_ran(OK)
    assert memory.warning() is None
    assert memory.report()["ok"] is True


def test_a_success_between_failures_restarts_the_count() -> None:
    memory = health()
    for info in (REFUSED, REFUSED, OK, REFUSED, REFUSED):
        memory.hippocampus_ran(info)
    assert memory.warning() is None


def test_timeouts_and_invalid_json_count_as_failures_with_their_own_words() -> None:
    memory = health()
    for _ in range(FAILURES_TO_WARN):
        memory.hippocampus_ran({"status": "timeout", "model": "m"})
    assert (
        memory.warning() == "Memory is not being saved: the memory model (m) did not answer in time"
    )
    memory = health()
    for _ in range(FAILURES_TO_WARN):
        memory.hippocampus_ran({"status": "garbage", "model": "m", "error": "no JSON object"})
    assert "no valid memory JSON (no JSON object)" in (memory.warning() or "")


def test_store_writes_queued_or_failed_warn_and_an_applied_write_clears() -> None:
    memory = health()
    queued = [WriteOutcome("queue", "The user likes tea.", "store down")]
    for _ in range(FAILURES_TO_WARN):
        memory.writes_done(queued, None)
    assert "memory store is unreachable" in (memory.warning() or "")
    memory.writes_done([WriteOutcome("reject", "x", "too short")], None)  # says nothing
    assert memory.warning() is not None
    memory.writes_done([WriteOutcome("write", "The user likes tea.", "new")], None)
    assert memory.warning() is None
    for _ in range(FAILURES_TO_WARN):
        memory.writes_done([], "OSError")
    assert memory.warning() == "Memory is not being saved: the memory store failed: OSError"


def test_an_embedder_that_keeps_failing_warns_only_when_there_is_one() -> None:
    memory = health()
    for _ in range(FAILURES_TO_WARN):
        memory.activation_done("no query vector: keywords only", embedder=False)
    assert memory.warning() is None  # no embedder configured: keywords are the design
    for _ in range(FAILURES_TO_WARN):
        memory.activation_done("no query vector: keywords only", embedder=True)
    assert memory.warning() == "Memory is not being saved: the embedding model did not answer"
    memory.activation_done(None, embedder=True)
    assert memory.warning() is None


def test_invalid_full_contract_runs_ask_for_the_switch_once() -> None:
    memory = health()
    garbage = {"status": "garbage", "model": "m", "mode": "full", "error": "not JSON"}
    for _ in range(2):
        memory.hippocampus_ran(garbage)
    assert not memory.should_switch_to_compact()
    memory.hippocampus_ran(garbage)
    assert memory.should_switch_to_compact()
    memory.note_switch("m gave no valid JSON")
    assert not memory.should_switch_to_compact()
    assert memory.report()["contract_switched"] == "m gave no valid JSON"
    # a failure that is not invalid output (a dead server) never switches the contract
    other = health()
    for _ in range(5):
        other.hippocampus_ran(REFUSED)
    assert not other.should_switch_to_compact()


@pytest.mark.anyio
async def test_auto_mode_turns_to_the_compact_contract_when_full_runs_keep_failing(
    rig: Rig,
) -> None:
    """``hippocampus.mode: auto`` with a remote model (full contract): three runs in a row
    with no valid JSON, and the next run is asked for facts only, said in the health."""
    assert rig.engine.settings.hippocampus_mode == "full"
    assert rig.engine.settings.hippocampus_auto
    session = None
    for number in range(INVALID_TO_SWITCH):
        rig.chat.enqueue([f"reply {number}"])
        rig.hippocampus.enqueue(["Sure! Here are the memories you asked for."])
        request = TurnRequest(user_id="u1", text=f"I'm message {number}.", session_id=session)
        async with rig.engine.turn(request) as turn:
            async for _ in turn.stream():
                pass
        session = turn.session.id
        await rig.engine.drain()
    assert rig.engine.settings.hippocampus_mode == "compact"
    report = rig.engine.memory_health.report()
    assert "compact contract" in report["contract_switched"]
    assert report["warning"] is not None  # three failures: said until a run succeeds

    rig.chat.enqueue(["fine"])
    rig.hippocampus.enqueue(['{"facts": ["The user has a dog named Pixel."], "emotion": "calm"}'])
    request = TurnRequest(user_id="u1", text="I have a dog named Pixel.", session_id=session)
    async with rig.engine.turn(request) as turn:
        async for _ in turn.stream():
            pass
    await rig.engine.drain()
    compact_call = rig.hippocampus.calls[-1]
    assert "facts" in str(compact_call.json_schema)
    assert rig.engine.memory_health.warning() is None
