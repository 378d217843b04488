"""Two app processes' engines on one session database and one long-term store.

Each "process" is its own ``build_services`` (its own session store connections and
locks, its own long-term memory and lexical index) over one shared vector store; turn
ordering needs locks that exclude each other in one test process, which PostgreSQL's
advisory locks do (they are per connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.clock import FixedClock
from backend.engine.maintenance import maintenance_loop
from backend.engine.services import build_services
from backend.engine.session_order import acquire_session
from backend.engine.turn import TurnRequest
from backend.llm.fake import FakeChatModel
from backend.longterm.memory import LongTermMemory
from backend.memory.types import ActivationPolicy, Candidate, Namespace
from backend.sessions.store import SessionStore
from backend.stores.change_feed import ChangeFeed, ChangeLoggingVectorStore, SharedLexicalIndex
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.vector_port import VectorStore
from tests.engine.wiring import fake_settings
from tests.stores.fakes import BagOfWordsEmbedder

T0 = datetime(2026, 9, 1, 21, 0, tzinfo=UTC)
NS = Namespace("alice", "companion")
# The hybrid default of the app's config: lexical candidates on (ActivationPolicy's is 0).
LEXICAL = replace(ActivationPolicy(), lexical_pool=30)


def hippo(
    background: str,
    long_term: list[dict[str, object]] | None = None,
    kept: list[str] | None = None,
) -> str:
    """A full-contract answer; ``kept``: previous short-term texts it keeps verbatim."""
    short_term = [
        {"role": "user" if i % 2 == 0 else "assistant", "text": text}
        for i, text in enumerate(kept or [])
    ]
    return json.dumps(
        {"background": background, "short_term": short_term, "long_term": long_term or [],
         "user_emotion": {"label": "calm", "intensity": 0.3}}
    )  # fmt: skip


def process_ltm(shared: VectorStore, sessions: SessionStore, clock: FixedClock) -> LongTermMemory:
    """One process's long-term memory, wired as services.py wires it in a cluster."""
    feed = ChangeFeed(sessions.db)
    return LongTermMemory(
        ChangeLoggingVectorStore(shared, feed),
        BagOfWordsEmbedder(),
        clock,
        activation=LEXICAL,
        lexical=SharedLexicalIndex(feed, shared),
    )


class Process:
    """One app process, wired by ``build_services`` as the app is in a cluster (its own
    data directory; the session database and the vector store shared)."""

    def __init__(self, data_dir: Path, target: str, shared: VectorStore, clock: FixedClock) -> None:
        self.chat = FakeChatModel("fake-chat")
        self.hippocampus = FakeChatModel("fake-hippocampus")
        settings = fake_settings(
            data_dir,
            hippocampus={"timeout": 5.0},
            memory={"short_term_token_budget": 300},
            storage={"database_url": target},
        )
        self.services = build_services(
            settings,
            clock=clock,
            command="test",
            chat=self.chat,
            hippocampus=self.hippocampus,
            embedder=BagOfWordsEmbedder(),
            store=shared,
        )
        self.engine = self.services.engine
        self.sessions = self.services.sessions


@pytest.fixture
def two(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Process, Process]]:
    clock = FixedClock(T0)
    shared = InMemoryVectorStore()
    a = Process(tmp_path / "a", postgres_url, shared, clock)
    b = Process(tmp_path / "b", postgres_url, shared, clock)
    yield a, b
    a.services.close()
    b.services.close()


@pytest.mark.anyio
async def test_a_turn_in_another_process_never_waits_for_a_merge(
    two: tuple[Process, Process],
) -> None:
    a, b = two
    gate = asyncio.Event()
    a.hippocampus.enqueue([hippo("after turn 1")], wait_for=gate)
    a.chat.enqueue(["one"])
    b.hippocampus.enqueue([hippo("after turn 2", kept=["t1", "one"])])
    b.chat.enqueue(["two"])
    async with a.engine.turn(TurnRequest(user_id="alice", text="t1")) as turn1:
        async for _ in turn1.stream():
            pass
    session = turn1.session.id
    # Process B replies at once, with A's turn verbatim, while A's hippocampus runs.
    async with asyncio.timeout(5):
        async with b.engine.turn(
            TurnRequest(user_id="alice", text="t2", session_id=session)
        ) as turn2:
            async for _ in turn2.stream():
                pass
    prompt = [(m["role"], m["content"]) for m in b.chat.calls[0].messages[1:]]
    assert prompt == [("user", "t1"), ("assistant", "one"), ("user", "t2")]
    await asyncio.sleep(0.3)
    assert b.hippocampus.calls == []  # B's merge waits for A's, across processes
    gate.set()
    report2 = await asyncio.wait_for(turn2.merged, 10)  # type: ignore[arg-type]
    report1 = await turn1.merged  # type: ignore[misc]
    assert report1["hippocampus"]["status"] == report2["hippocampus"]["status"] == "ok"
    assert "after turn 1" in json.dumps(b.hippocampus.calls[0].messages)  # A's state
    assert [(m.seq, m.content) for m in a.sessions.transcript(session)] == [
        (1, "t1"), (2, "one"), (3, "t2"), (4, "two"),
    ]  # fmt: skip
    state = a.sessions.load_state(session)
    assert state.background == "after turn 2" and state.merged_seq == 4
    assert [i["text"] for i in state.short_term] == ["t1", "one", "t2", "two"]
    await a.engine.drain()
    await b.engine.drain()


@pytest.mark.anyio
async def test_a_turn_whose_process_died_unmerged_is_merged_by_the_next(
    two: tuple[Process, Process],
) -> None:
    a, b = two
    never = asyncio.Event()
    a.hippocampus.enqueue([hippo("never")], wait_for=never)
    a.chat.enqueue(["one"])
    b.hippocampus.enqueue([hippo("both turns", kept=["t1", "one"])])
    b.chat.enqueue(["two"])
    async with a.engine.turn(TurnRequest(user_id="alice", text="t1")) as turn1:
        async for _ in turn1.stream():
            pass
    await asyncio.sleep(0.3)  # the reply's turn lock is back; the merge waits on "never"
    # Process A dies with turn 1 stored but not merged: its tasks stop, its locks go.
    await a.engine.cancel_background()
    a.sessions.close()
    turn2, report2 = await asyncio.wait_for(
        b.engine.run(TurnRequest(user_id="alice", text="t2", session_id=turn1.session.id)), 10
    )
    # One run covered both turns, and A's turn has its report too.
    assert len(b.hippocampus.calls) == 1
    assert report2["hippocampus"]["turns"] == [turn1.turn_id, turn2.turn_id]
    state = b.sessions.load_state(turn2.session.id)
    assert [i["text"] for i in state.short_term] == ["t1", "one", "t2", "two"]
    reports = {r.turn_id for r in b.sessions.turn_reports(turn2.session.id)}
    assert reports == {turn1.turn_id, turn2.turn_id}
    await b.engine.drain()


@pytest.mark.anyio
async def test_two_processes_merge_every_turn_once(two: tuple[Process, Process]) -> None:
    a, b = two
    for process in (a, b):
        for i in range(6):
            process.hippocampus.enqueue([hippo(f"bg {i}")], first_token_delay_s=0.05 * (i % 3))
            process.chat.enqueue([f"r{i}"])
    session: str | None = None
    for i in range(6):  # the user's turns land on A and B in turn, replies back to back
        process = (a, b)[i % 2]
        request = TurnRequest(user_id="alice", text=f"t{i}", session_id=session)
        async with process.engine.turn(request) as turn:
            async for _ in turn.stream():
                pass
        session = turn.session.id
    assert session is not None
    await asyncio.gather(a.engine.drain(), b.engine.drain())
    transcript = a.sessions.transcript(session)
    assert len(transcript) == 12
    assert a.sessions.load_state(session).merged_seq == 12
    reports = a.sessions.turn_reports(session)
    assert sorted(r.turn_id for r in reports) == sorted({m.turn_id for m in transcript})
    assert len(a.hippocampus.calls) + len(b.hippocampus.calls) <= 6


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fact(content: str, keywords: list[str], importance: float = 0.9) -> Candidate:
    return Candidate(content, "relationship", importance=importance, confidence=0.95,
                     keywords=tuple(keywords))  # fmt: skip


def found(ltm: LongTermMemory, query: str) -> set[str]:
    """The lexical channel's candidates: BM25 matches and the salient list."""
    return {m.content for m in ltm.lexical_candidates(NS, query)}


MEI = "The user's sister Mei lives in Osaka"
KURO = "The user's cat is called Kuroneko"
TAMA = "The user's cat is called Tama"
SHAMISEN = "The user plays the shamisen"


def test_another_process_writes_reach_the_lexical_index(shared_target: str) -> None:
    clock = FixedClock(T0)
    shared = InMemoryVectorStore()
    with SessionStore(shared_target, clock) as sa, SessionStore(shared_target, clock) as sb:
        a, b = process_ltm(shared, sa, clock), process_ltm(shared, sb, clock)
        plain = LongTermMemory(shared, BagOfWordsEmbedder(), clock, activation=LEXICAL)
        a.write(NS, [fact(MEI, ["mei", "osaka"])])
        assert MEI in found(b, "Osaka") and MEI in found(plain, "Osaka")  # loaded now
        # A writes again: B (with the feed) sees it; a process without it does not.
        written = a.write(NS, [fact(KURO, ["kuroneko"])])
        assert KURO in found(b, "Kuroneko")
        assert KURO not in found(plain, "Kuroneko")  # the bug this fixes
        # Edits and deletions travel too.
        memory_id = written[0].memory_id
        assert memory_id is not None
        a.update(NS, memory_id, content=TAMA)
        assert TAMA in found(b, "Tama") and KURO not in found(b, "Kuroneko")
        a.delete(NS, memory_id)
        assert TAMA not in found(b, "Tama")
        # B's writes reach A the same way.
        b.write(NS, [fact(SHAMISEN, ["shamisen"])])
        assert SHAMISEN in found(a, "shamisen")


def test_pruned_changes_make_a_stale_process_reload(shared_target: str) -> None:
    clock = FixedClock(T0)
    shared = InMemoryVectorStore()
    with SessionStore(shared_target, clock) as sa, SessionStore(shared_target, clock) as sb:
        a, b = process_ltm(shared, sa, clock), process_ltm(shared, sb, clock)
        b.activate(NS, "anything")  # B has the (empty) namespace loaded
        a.write(NS, [fact("The user's brother Ken is a nurse", ["ken", "nurse"])])
        assert ChangeFeed(sa.db).prune(older_than_s=-1.0) >= 1  # every change pruned
        assert "The user's brother Ken is a nurse" in found(b, "nurse")


def test_the_salient_list_sees_another_process(shared_target: str) -> None:
    clock = FixedClock(T0)
    shared = InMemoryVectorStore()
    policy = replace(LEXICAL, salient_n=5)
    with SessionStore(shared_target, clock) as sa, SessionStore(shared_target, clock) as sb:
        a = process_ltm(shared, sa, clock)
        b = process_ltm(shared, sb, clock)
        b.activation = policy
        plain = LongTermMemory(shared, BagOfWordsEmbedder(), clock, activation=policy)
        b.activate(NS, "hello")
        plain.activate(NS, "hello")
        a.write(NS, [fact("The user is getting married in June", ["married", "june"])])
        clock.advance(minutes=1)
        news = "The user is getting married in June"
        assert news in [m.content for m in b.activate(NS, "what's new?").memories]
        index = b.lexical
        assert index is not None
        assert len(index.salient(NS, since=T0, min_importance=0.7, n=5) or []) == 1
        # Without the feed the salient list (no word in common with the query) misses it.
        assert news in found(b, "what's new?") and news not in found(plain, "what's new?")


@pytest.mark.anyio
async def test_maintenance_runs_once_per_cluster(
    shared_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FixedClock(T0)
    ran: list[str] = []
    monkeypatch.setattr(
        "backend.engine.maintenance.run_maintenance", lambda ltm: ran.append(ltm.owner)
    )
    stores = [SessionStore(shared_target, clock) for _ in range(3)]
    loops = []
    for n, store in enumerate(stores):
        ltm = LongTermMemory(InMemoryVectorStore(), None, clock)
        ltm.owner = f"p{n}"  # type: ignore[attr-defined]
        loops.append(
            asyncio.ensure_future(
                maintenance_loop(ltm, 1.0, jobs=store.db, owner=f"p{n}", first_delay_s=0)
            )
        )
    await asyncio.sleep(1.0)
    for loop in loops:
        loop.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    for store in stores:
        store.close()
    assert len(ran) == 1  # three processes, one pass per interval (an hour)


@pytest.mark.anyio
async def test_a_cancelled_wait_never_keeps_the_lock(postgres_url: str) -> None:
    clock = FixedClock(T0)
    with SessionStore(postgres_url, clock) as a, SessionStore(postgres_url, clock) as b:
        held = a.locks.try_acquire("s1")
        assert held is not None
        waiter = asyncio.ensure_future(acquire_session(b.locks, "s1"))
        await asyncio.sleep(0.1)  # polling: A holds it
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        a.locks.release(held)
        for _ in range(10):  # cancelled while an attempt that succeeds is in its thread
            task = asyncio.ensure_future(acquire_session(b.locks, "s1"))
            await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                b.locks.release(await task)  # it finished first
        await asyncio.sleep(0.3)  # late attempts hand their lock back
        again = a.locks.try_acquire("s1")
        assert again is not None
        a.locks.release(again)
