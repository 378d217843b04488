"""The reply never waits for a hippocampus run; merges stay ordered and exactly-once.

docs/architecture.md, "The rule between turns": turn t+1 answers from the last merged
state plus the turns not merged yet, verbatim; the memory worker merges a session's turns
in order, one hippocampus run per batch of waiting turns.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from backend.engine.services import build_services
from backend.engine.turn import Turn, TurnRequest
from backend.llm.fake import FakeChatModel
from backend.stores.in_memory import InMemoryVectorStore
from tests.engine.wiring import fake_settings
from tests.stores.fakes import BagOfWordsEmbedder

from .conftest import Rig, make_rig

pytestmark = pytest.mark.anyio


def hippo(background: str, *kept: str) -> str:
    """A full-contract answer that keeps the previous short-term items ``kept`` verbatim
    (user and assistant alternating)."""
    short_term = [
        {"role": "user" if i % 2 == 0 else "assistant", "text": text} for i, text in enumerate(kept)
    ]
    return json.dumps(
        {"background": background, "short_term": short_term, "long_term": [],
         "user_emotion": {"label": "calm", "intensity": 0.3}}
    )  # fmt: skip


async def reply(rig: Rig, text: str, session_id: str | None = None) -> Turn:
    """One turn, its reply streamed to the end (its merge may still be running)."""
    async with rig.engine.turn(TurnRequest(user_id="u1", text=text, session_id=session_id)) as turn:
        async for _ in turn.stream():
            pass
    return turn


async def test_a_blocked_hippocampus_never_delays_the_next_reply(rig: Rig) -> None:
    never = asyncio.Event()  # turn 1's hippocampus does not answer during the test
    rig.hippocampus.enqueue([hippo("after turn 1")], wait_for=never)
    rig.chat.enqueue(["one"])
    rig.chat.enqueue(["two"])
    rig.chat.enqueue(["three"])
    turn1 = await reply(rig, "t1")
    session = turn1.session.id
    # Under the old rule turn 2 began only after turn 1's merge: this would time out.
    await asyncio.wait_for(reply(rig, "t2", session), 5)
    turn3 = await asyncio.wait_for(reply(rig, "t3", session), 5)
    assert turn3.reply == "three"
    # Each reply saw the turns not merged yet, verbatim and in order.
    prompt = [(m["role"], m["content"]) for m in rig.chat.calls[2].messages[1:]]
    assert prompt == [("user", "t1"), ("assistant", "one"), ("user", "t2"),
                      ("assistant", "two"), ("user", "t3")]  # fmt: skip
    assert rig.sessions.load_state(session).merged_seq == 0
    never.set()
    await rig.engine.drain()


async def test_waiting_turns_are_merged_in_one_run_in_order(rig: Rig) -> None:
    gate = asyncio.Event()
    rig.hippocampus.enqueue([hippo("after turn 1")], wait_for=gate)
    rig.hippocampus.enqueue([hippo("after turns 2 and 3", "t1", "one", "t2", "two")])
    for text in ("one", "two", "three"):
        rig.chat.enqueue([text])
    turn1 = await reply(rig, "t1")
    session = turn1.session.id
    turn2 = await reply(rig, "t2", session)
    turn3 = await reply(rig, "t3", session)
    gate.set()
    reports = [await t.merged for t in (turn1, turn2, turn3) if t.merged]
    # Two runs: turn 1's, then one for the two turns that waited behind it.
    assert len(rig.hippocampus.calls) == 2
    second = json.dumps(rig.hippocampus.calls[1].messages)
    assert "after turn 1" in second and "t2" in second and "two" in second and "t3" in second
    ids = [turn2.turn_id, turn3.turn_id]
    assert reports[1]["hippocampus"]["turns"] == ids == reports[2]["hippocampus"]["turns"]
    state = rig.sessions.load_state(session)
    assert [i["text"] for i in state.short_term] == ["t1", "one", "t2", "two", "t3", "three"]
    assert state.background == "after turns 2 and 3" and state.merged_seq == 6
    stored = [r.turn_id for r in rig.sessions.turn_reports(session)]
    assert sorted(stored) == sorted(t.turn_id for t in (turn1, turn2, turn3))


async def test_a_compact_batch_reads_every_waiting_message(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    rig.engine.settings = replace(rig.engine.settings, hippocampus_mode="compact")
    gate = asyncio.Event()
    rig.hippocampus.enqueue([json.dumps({"facts": [], "emotion": "neutral"})], wait_for=gate)
    answer = {"facts": ["The user's sister Mei lives in Osaka.",
                        "The user has a cat named Biscuit."], "emotion": "joy"}  # fmt: skip
    rig.hippocampus.enqueue([json.dumps(answer)])
    for text in ("hi!", "lovely", "aww"):
        rig.chat.enqueue([text])
    turn1 = await reply(rig, "Hello there")
    session = turn1.session.id
    await reply(rig, "My sister Mei lives in Osaka.", session)
    turn3 = await reply(rig, "And I have a cat named Biscuit.", session)
    gate.set()
    report = await turn3.merged
    read = rig.hippocampus.calls[1].messages[-1]["content"]
    assert "Mei lives in Osaka" in read and "cat named Biscuit" in read
    # The fact from the earlier waiting message is grounded in what that message said.
    assert {w["content"] for w in report["written"]} == set(answer["facts"])
    state = rig.sessions.load_state(session)
    assert state.missed == () and len(state.short_term) == 6
    rig.sessions.close()


async def test_many_sessions_merge_every_turn_exactly_once(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    # The compact contract: code keeps short-term verbatim, so it must equal the transcript.
    rig.engine.settings = replace(rig.engine.settings, hippocampus_mode="compact")
    rng = random.Random(7)
    sessions, turns = 4, 5
    for i in range(sessions * turns):
        answer = json.dumps({"facts": [], "emotion": "neutral"})
        rig.hippocampus.enqueue([answer], first_token_delay_s=rng.uniform(0, 0.05))
        rig.chat.enqueue([f"r{i}"], first_token_delay_s=rng.uniform(0, 0.01))

    async def converse(n: int) -> str:
        first = await reply(rig, f"s{n} t0")
        session = first.session.id
        for t in range(1, turns):
            await asyncio.sleep(rng.uniform(0, 0.03))
            await reply(rig, f"s{n} t{t}", session)
        return session

    ids = await asyncio.gather(*(converse(n) for n in range(sessions)))
    await rig.engine.drain()
    assert len(rig.hippocampus.calls) <= sessions * turns
    for session in ids:
        transcript = rig.sessions.transcript(session)
        state = rig.sessions.load_state(session)
        assert [i["text"] for i in state.short_term] == [m.content for m in transcript]
        assert state.merged_seq == transcript[-1].seq
        reports = rig.sessions.turn_reports(session)
        assert sorted(r.turn_id for r in reports) == sorted(
            {m.turn_id for m in transcript if m.turn_id}
        )
    rig.sessions.close()


async def test_a_stale_merge_never_lands(rig: Rig, tmp_path: Path) -> None:
    """Two merges of the same turn race: the one that saves second never lands.

    The second process is a second ``build_services`` over the rig's session database.
    In one test process their file locks do not exclude each other (POSIX record locks
    are per process), which stands for a memory lock lost mid-merge (a dropped
    PostgreSQL connection): only ``expected_seq`` is left to keep the merges apart."""
    settings = fake_settings(
        tmp_path / "b",
        hippocampus={"timeout": 5.0},
        memory={"short_term_token_budget": 300},
        storage={"sessions_db": str(rig.services.settings.storage.sessions_db)},
    )
    other_chat, other_hippocampus = FakeChatModel("chat-b"), FakeChatModel("hippocampus-b")
    other = build_services(
        settings, clock=rig.clock, command="test", chat=other_chat,
        hippocampus=other_hippocampus, embedder=BagOfWordsEmbedder(),
        store=InMemoryVectorStore(),
    )  # fmt: skip
    held = asyncio.Event()
    late = rig.hippocampus.enqueue([hippo("merged by A")], wait_for=held)
    rig.chat.enqueue(["one"])
    turn1 = await reply(rig, "t1")
    session = turn1.session.id
    await late.started.wait()  # A's merge read the state at merged_seq 0 and waits
    # B's turn in the same session: B's worker merges A's turn with its own and lands.
    other_hippocampus.enqueue([hippo("merged by B")])
    other_chat.enqueue(["two"])
    request = TurnRequest(user_id="u1", text="t2", session_id=session)
    async with other.engine.turn(request) as turn2:
        async for _ in turn2.stream():
            pass
    assert turn2.merged is not None
    landed = await turn2.merged
    assert landed["hippocampus"]["turns"] == [turn1.turn_id, turn2.turn_id]
    merged_by_b = rig.sessions.load_state(session)
    assert merged_by_b.background == "merged by B"
    assert merged_by_b.merged_seq == rig.sessions.transcript(session)[-1].seq
    # A's merge finishes on the state it read: it must not land over B's.
    held.set()
    report = await turn1.merged
    await rig.engine.drain()
    assert rig.sessions.load_state(session) == merged_by_b
    # A's turn is reported as B merged it.
    assert report["hippocampus"]["model"] == "hippocampus-b"
    await other.engine.drain()
    other.close()
    rig.sessions.close()


async def test_turns_left_by_a_failed_round_are_merged_by_the_next(rig: Rig) -> None:
    rig.hippocampus.enqueue([hippo("never used")])
    rig.hippocampus.enqueue([hippo("both", "t1", "one")])
    rig.chat.enqueue(["one"])
    rig.chat.enqueue(["two"])
    real = rig.sessions.save_state
    broken = {"on": True}

    def flaky(*args: object, **kwargs: object) -> None:
        if broken["on"]:
            raise RuntimeError("database gone")
        real(*args, **kwargs)  # type: ignore[arg-type]

    rig.sessions.save_state = flaky  # type: ignore[method-assign]
    turn1 = await reply(rig, "t1")
    with pytest.raises(RuntimeError):
        await turn1.merged
    broken["on"] = False
    turn2 = await reply(rig, "t2", turn1.session.id)
    report = await turn2.merged
    assert report["hippocampus"]["turns"] == [turn1.turn_id, turn2.turn_id]
    state = rig.sessions.load_state(turn1.session.id)
    assert [i["text"] for i in state.short_term] == ["t1", "one", "t2", "two"]
