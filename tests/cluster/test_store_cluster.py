"""What app processes share through the session database: locks, job claims, migrations.

Two ``SessionStore`` objects on one database stand in for two processes (PostgreSQL
advisory locks are per connection, so they exclude each other within one process as
well); where the lock is a per-process ``lockf`` (SQLite), a real child process holds it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from backend.clock import FixedClock
from backend.sessions.cluster_jobs import claim_job, job_owner
from backend.sessions.schema import _SQLITE_V1
from backend.sessions.store import INTERRUPTED, SCHEMA_VERSION, SessionStore, SessionStoreError
from tests.web.harness import REPO

T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def clock() -> FixedClock:
    return FixedClock(T0)


def test_a_session_lock_excludes_the_other_process(postgres_url: str) -> None:
    with SessionStore(postgres_url, clock()) as a, SessionStore(postgres_url, clock()) as b:
        held = a.locks.try_acquire("s1")
        assert held is not None
        assert b.locks.try_acquire("s1") is None
        other = b.locks.try_acquire("s2")  # another session is never blocked
        assert other is not None
        a.locks.release(held)
        again = b.locks.try_acquire("s1")
        assert again is not None
        b.locks.release(again)
        b.locks.release(other)


def test_a_lock_is_exclusive_within_a_process_too(shared_target: str) -> None:
    with SessionStore(shared_target, clock()) as store:
        held = store.locks.try_acquire("s1")
        assert held is not None and store.locks.try_acquire("s1") is None
        store.locks.release(held)
        assert store.locks.try_acquire("s1") is not None


def test_a_dead_connection_frees_its_locks_at_once(postgres_url: str) -> None:
    with SessionStore(postgres_url, clock()) as a, SessionStore(postgres_url, clock()) as b:
        held = a.locks.try_acquire("s1")
        assert held is not None and held.conn is not None
        pid = held.conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        held.conn.commit()
        assert b.locks.try_acquire("s1") is None
        b.db.read("SELECT pg_terminate_backend(:pid)", {"pid": pid})  # the holder "dies"
        deadline = time.monotonic() + 5
        while (got := b.locks.try_acquire("s1")) is None:
            assert time.monotonic() < deadline, "the lock outlived its connection"
            time.sleep(0.05)
        b.locks.release(got)
        a.locks.release(held)  # on a dead connection: logged, never raised


HOLDER = """
import sys
from backend.clock import SystemClock
from backend.sessions.store import SessionStore
store = SessionStore(sys.argv[1], SystemClock())
assert store.locks.try_acquire("s1") is not None
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_sqlite_lock_is_held_by_a_process_until_it_dies(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    SessionStore(path, clock()).close()
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        _hold_and_kill(child, path)


def _hold_and_kill(child: subprocess.Popen[str], path: Path) -> None:
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with SessionStore(path, clock()) as store:
            assert store.locks.try_acquire("s1") is None
            assert store.locks.try_acquire("s2") is not None
            child.kill()  # no cleanup runs: the kernel drops the lock
            child.wait(timeout=10)
            assert store.locks.try_acquire("s1") is not None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)


def test_start_leaves_a_reply_another_process_streams_alone(shared_target: str) -> None:
    with SessionStore(shared_target, clock()) as a:
        for session in ("live", "dead"):
            a.create_session("alice", "companion", session_id=session)
            a.append_message(session, "user", "hi")
            a.append_message(session, "assistant", "Hel", status="pending")
        held = a.locks.try_acquire("live")  # process A is streaming this reply
        assert held is not None
        if a.postgres:
            with SessionStore(shared_target, clock()) as b:  # process B starts
                assert b.mark_incomplete_pending() == 1
        else:
            assert a.mark_incomplete_pending() == 1  # lockf: the holder is this process
        statuses = {s: a.transcript(s)[-1].status for s in ("live", "dead")}
        assert statuses == {"live": "pending", "dead": "incomplete"}
        a.locks.release(held)
        assert a.mark_incomplete_pending("live") == 1  # the next turn's takeover
        last = a.transcript("live")[-1]
        assert (last.status, last.error) == ("incomplete", INTERRUPTED)


def test_exactly_one_claimant_runs_each_pass(shared_target: str) -> None:
    # An interval no test run outlasts: however slowly the 8 threads get their turn, the
    # pass stays claimed (a short one let a late thread claim the next pass as well).
    hour = 3600.0
    stores = [SessionStore(shared_target, clock()) for _ in range(2)]
    try:
        barrier = threading.Barrier(8)
        won: list[str] = []

        def claim(n: int) -> None:
            barrier.wait()
            if claim_job(stores[n % 2].db, "maintenance", f"p{n}", hour):
                won.append(f"p{n}")

        threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1 and job_owner(stores[0].db, "maintenance") == won[0]
        assert not claim_job(stores[1].db, "maintenance", "late", hour)  # not due yet
        # One interval later, without waiting it out: the pass fell due an hour earlier.
        with stores[0].db.write() as conn:
            conn.execute(text("UPDATE cluster_jobs SET due_at = due_at - :hour"), {"hour": hour})
        assert claim_job(stores[1].db, "maintenance", "next", hour)
        assert not claim_job(stores[0].db, "maintenance", "again", hour)
        assert job_owner(stores[0].db, "maintenance") == "next"
    finally:
        for store in stores:
            store.close()


def test_a_version_1_sqlite_database_upgrades_in_place(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    old = sqlite3.connect(path)  # what the previous release created
    for statement in _SQLITE_V1:
        old.execute(statement)
    old.execute("PRAGMA user_version = 1")
    stamp = "2026-08-26T22:30:00.000000+00:00"
    old.execute(
        "INSERT INTO sessions (id, user_id, persona_id, created_at, updated_at, background)"
        " VALUES ('s1', 'alice', 'companion', ?, ?, 'kept')",
        (stamp, stamp),
    )
    old.execute(
        "INSERT INTO messages (session_id, seq, role, content, created_at, status)"
        " VALUES ('s1', 1, 'user', 'hello', ?, 'complete')",
        (stamp,),
    )
    old.execute("INSERT INTO turn_reports VALUES ('s1', 't1', '{\"ok\": true}', ?)", (stamp,))
    old.commit()
    old.close()
    with SessionStore(path, clock()) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        assert store.load_state("s1").background == "kept"
        assert store.load_state("s1").missed == ()  # version 3's column, defaulted
        # Version 4: what existed was merged (its turns are not waiting for a merge).
        assert store.load_state("s1").merged_seq == 1
        assert [m.content for m in store.transcript("s1")] == ["hello"]
        assert store.append_message("s1", "assistant", "hi again").seq == 2
        assert store.turn_reports("s1")[0].report == {"ok": True}
        assert claim_job(store.db, "maintenance", "me", 60)  # the new tables exist
        assert store.entity_edits("alice", "companion") == []  # version 5's, empty


def test_a_newer_postgres_schema_is_refused(postgres_url: str) -> None:
    SessionStore(postgres_url, clock()).close()
    with SessionStore(postgres_url, clock()) as store, store.db.write() as conn:
        conn.execute(text("UPDATE schema_version SET version = version + 1"))
    with pytest.raises(SessionStoreError, match="schema version"):
        SessionStore(postgres_url, clock())


def test_processes_starting_together_migrate_once(postgres_url: str) -> None:
    errors: list[BaseException] = []
    opened: list[SessionStore] = []

    def start() -> None:
        try:
            opened.append(SessionStore(postgres_url, clock()))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert opened[0].db.read("SELECT COUNT(*) FROM schema_version")[0][0] == 1
    assert all(store.schema_version == SCHEMA_VERSION for store in opened)
    for store in opened:
        store.close()


def test_an_unreachable_server_fails_at_start_without_the_password() -> None:
    with pytest.raises(SessionStoreError) as failed:
        SessionStore("postgresql://limbic:s3cret-pw@127.0.0.1:1/limbic", clock())
    assert "s3cret-pw" not in str(failed.value)
    assert "cannot open the session database postgresql" in str(failed.value)
