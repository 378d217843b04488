from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from backend.clock import FixedClock
from backend.memory.entities import EntityEdit
from backend.sessions.store import (
    INTERRUPTED,
    SCHEMA_VERSION,
    SessionExists,
    SessionNotFound,
    SessionState,
    SessionStore,
    SessionStoreError,
)

T0 = datetime(2026, 8, 26, 22, 30, tzinfo=UTC)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the store lives: a SQLite file, or a fresh database on a real PostgreSQL."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "db" / "sessions.sqlite3")


@pytest.fixture
def store(target: str, clock: FixedClock) -> Iterator[SessionStore]:
    with SessionStore(target, clock) as opened:
        yield opened


def test_pragmas_wal_and_foreign_keys(tmp_path: Path, clock: FixedClock) -> None:
    store = SessionStore(tmp_path / "db" / "sessions.sqlite3", clock)
    assert store.postgres is False
    assert store.journal_mode == "wal"
    assert store._read("PRAGMA journal_mode")[0][0] == "wal"
    assert store._read("PRAGMA foreign_keys")[0][0] == 1
    assert store._read("PRAGMA synchronous")[0][0] == 1  # NORMAL
    assert store.schema_version == SCHEMA_VERSION
    store.close()


def test_session_round_trip(store: SessionStore, clock: FixedClock) -> None:
    created = store.create_session("alice", "companion", title="Night talk", session_id="s1")
    assert created.created_at == T0 and created.created_at.tzinfo is not None
    assert store.get_session("s1", "alice") == created
    clock.advance(minutes=5)
    renamed = store.rename("s1", "alice", "Renamed")
    assert renamed is not None and renamed.title == "Renamed"
    assert renamed.updated_at == datetime(2026, 8, 26, 22, 35, tzinfo=UTC)
    generated = store.create_session("alice", "companion")
    assert len(generated.id) == 32 and generated.title is None


def test_duplicate_and_bad_session_ids(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="s1")
    with pytest.raises(SessionExists):
        store.create_session("bob", "companion", session_id="s1")
    with pytest.raises(ValueError):
        store.create_session("bob", "companion", session_id="x" * 201)


def test_users_never_see_each_other(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="a1")
    store.create_session("bob", "companion", session_id="b1")
    assert store.get_session("a1", "bob") is None
    assert [s.id for s in store.list_sessions("bob")] == ["b1"]
    assert store.rename("a1", "bob", "mine now") is None
    assert store.delete_session("a1", "bob") is False
    assert store.get_session("a1", "alice") is not None
    assert store.get_session("a1", "alice").title is None  # type: ignore[union-attr]


def test_list_sessions_order_filter_and_paging(store: SessionStore, clock: FixedClock) -> None:
    for index, persona in enumerate(["companion", "coach", "companion"]):
        clock.advance(minutes=1)
        store.create_session("alice", persona, session_id=f"s{index}")
    clock.advance(minutes=1)
    store.append_message("s0", "user", "hello again")  # s0 becomes the most recent
    assert [s.id for s in store.list_sessions("alice")] == ["s0", "s2", "s1"]
    assert [s.id for s in store.list_sessions("alice", persona_id="companion")] == ["s0", "s2"]
    assert [s.id for s in store.list_sessions("alice", limit=1, offset=1)] == ["s2"]


def test_transcript_in_seq_order(store: SessionStore, clock: FixedClock) -> None:
    store.create_session("alice", "companion", session_id="s1")
    store.create_session("alice", "companion", session_id="s2")
    first = store.append_message("s1", "user", "我今天面试了", turn_id="t1")
    store.append_message("s2", "user", "other session")
    clock.advance(seconds=1)
    second = store.append_message("s1", "assistant", "怎么样？", turn_id="t1")
    assert (first.seq, second.seq) == (1, 2)
    transcript = store.transcript("s1")
    assert [(m.seq, m.role, m.content) for m in transcript] == [
        (1, "user", "我今天面试了"),
        (2, "assistant", "怎么样？"),
    ]
    assert transcript[0] == first and transcript[0].status == "complete"
    assert transcript[1].created_at == datetime(2026, 8, 26, 22, 30, 1, tzinfo=UTC)
    assert store.transcript("missing") == []


def test_append_validates(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.append_message("missing", "user", "hi")
    store.create_session("alice", "companion", session_id="s1")
    with pytest.raises(ValueError):
        store.append_message("s1", "robot", "hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.append_message("s1", "user", "hi", status="done")  # type: ignore[arg-type]


def test_reply_cut_off_is_kept_incomplete_with_partial_text(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="s1")
    store.append_message("s1", "user", "tell me a story", turn_id="t1")
    reply = store.append_message("s1", "assistant", "", status="pending", turn_id="t1")
    store.save_partial(reply.id, "Once upon")
    assert store.transcript("s1")[-1].content == "Once upon"
    done = store.finish_message(reply.id, "Once upon a", "incomplete", error="upstream 502")
    assert (done.status, done.content, done.error, done.seq) == (
        "incomplete",
        "Once upon a",
        "upstream 502",
        2,
    )
    with pytest.raises(ValueError, match="already incomplete"):
        store.finish_message(reply.id, "again", "complete")
    with pytest.raises(KeyError):
        store.finish_message(9999, "x", "complete")
    with pytest.raises(ValueError):
        store.finish_message(reply.id, "x", "pending")


def test_reply_finished_complete(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="s1")
    reply = store.append_message("s1", "assistant", "", status="pending", turn_id="t1")
    done = store.finish_message(reply.id, "Good evening.", "complete")
    assert (done.status, done.content, done.error) == ("complete", "Good evening.", None)


def test_pending_replies_become_incomplete_after_a_crash(target: str, clock: FixedClock) -> None:
    path = target
    store = SessionStore(path, clock)
    store.create_session("alice", "companion", session_id="s1")
    store.append_message("s1", "user", "hi")
    pending = store.append_message("s1", "assistant", "", status="pending")
    store.save_partial(pending.id, "Hel")
    store.close()  # the process "dies" with a pending reply

    with SessionStore(path, clock) as reopened:
        assert reopened.mark_incomplete_pending() == 1
        last = reopened.transcript("s1")[-1]
        assert (last.status, last.content, last.error) == ("incomplete", "Hel", INTERRUPTED)
        assert reopened.mark_incomplete_pending() == 0


def test_state_round_trip(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="s1")
    assert store.load_state("s1") == SessionState()
    short_term = [{"role": "user", "text": "我妹妹搬去大阪了"}, {"role": "note", "text": "moved"}]
    emotion = {"label": "anxious", "intensity": 0.7}
    store.save_state("s1", "Alice's sister Mei moved to Osaka.", short_term, emotion)
    state = store.load_state("s1")
    assert state.background == "Alice's sister Mei moved to Osaka."
    assert list(state.short_term) == short_term and state.user_emotion == emotion
    store.save_state("s1", "", [], None)
    assert store.load_state("s1") == SessionState()
    with pytest.raises(SessionNotFound):
        store.save_state("missing", "", [], None)
    with pytest.raises(SessionNotFound):
        store.load_state("missing")
    with pytest.raises(TypeError):
        store.save_state("s1", "", ["not a dict"], None)  # type: ignore[list-item]


def test_turn_reports(store: SessionStore, clock: FixedClock) -> None:
    store.create_session("alice", "companion", session_id="s1")
    store.save_turn_report("s1", "t1", {"written": ["a"], "rejected": []})
    clock.advance(seconds=1)
    store.save_turn_report("s1", "t2", {"written": []})
    store.save_turn_report("s1", "t1", {"written": ["a", "b"]})  # replaced, keeps its place
    reports = store.turn_reports("s1")
    assert [(r.turn_id, r.report) for r in reports] == [
        ("t1", {"written": ["a", "b"]}),
        ("t2", {"written": []}),
    ]
    with pytest.raises(SessionNotFound):
        store.save_turn_report("missing", "t1", {})


def test_delete_cascades(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="s1")
    store.append_message("s1", "user", "hi")
    store.save_turn_report("s1", "t1", {})
    assert store.delete_session("s1", "alice") is True
    assert store.get_session("s1", "alice") is None
    assert store._read("SELECT COUNT(*) FROM messages")[0][0] == 0
    assert store._read("SELECT COUNT(*) FROM turn_reports")[0][0] == 0


def test_concurrent_appends_keep_seq_unique_and_ordered(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="s1")
    threads, per_thread = 8, 40
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                store.append_message("s1", "user", f"{n}:{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert not errors
    transcript = store.transcript("s1")
    assert [m.seq for m in transcript] == list(range(1, threads * per_thread + 1))
    assert [m.id for m in transcript] == sorted(m.id for m in transcript)
    for n in range(threads):  # each thread's own messages stay in its order
        mine = [m.content for m in transcript if m.content.startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(per_thread)]


def test_reopen_keeps_everything(target: str, clock: FixedClock) -> None:
    path = target
    with SessionStore(path, clock) as store:
        store.create_session("alice", "companion", title="t", session_id="s1")
        store.append_message("s1", "user", "remember me")
        store.save_state("s1", "bg", [{"role": "user", "text": "remember me"}], None)
        store.save_turn_report("s1", "t1", {"ok": True})
        before = (store.get_session("s1", "alice"), store.transcript("s1"), store.load_state("s1"))
    with SessionStore(path, clock) as store:
        after = (store.get_session("s1", "alice"), store.transcript("s1"), store.load_state("s1"))
        assert after == before
        assert store.turn_reports("s1")[0].report == {"ok": True}
        assert store.schema_version == SCHEMA_VERSION


def test_newer_schema_is_refused(tmp_path: Path, clock: FixedClock) -> None:
    path = tmp_path / "sessions.sqlite3"
    SessionStore(path, clock).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(SessionStoreError, match="schema version"):
        SessionStore(path, clock)


def test_in_memory_store(clock: FixedClock) -> None:
    with SessionStore(":memory:", clock) as store:
        store.create_session("alice", "companion", session_id="s1")
        assert store.append_message("s1", "user", "hi").seq == 1


def test_text_no_backend_can_hold_is_stored_with_replacement_characters(
    store: SessionStore,
) -> None:
    # A model's reply (or summary) may carry NUL or a lone surrogate: PostgreSQL refuses
    # NUL, and a lone surrogate is not UTF-8. The turn must not fail on it.
    store.create_session("alice", "companion", session_id="s1")
    user = store.append_message("s1", "user", "hi \x00 there")
    pending = store.append_message("s1", "assistant", "", status="pending")
    store.save_partial(pending.id, "half \ud800")
    done = store.finish_message(pending.id, "all \x00 \udfff done", "incomplete", "cut \x00")
    store.save_state("s1", "bg \x00", [{"role": "user", "text": "st \ud83d"}], {"label": "x\x00"})
    store.save_turn_report("s1", "t1", {"written": [{"content": "m \udc00"}]})
    store.rename("s1", "alice", "title \x00")
    assert user.content == "hi \ufffd there"
    assert (done.content, done.error) == ("all \ufffd \ufffd done", "cut \ufffd")
    assert [m.content for m in store.transcript("s1")] == [
        "hi \ufffd there",
        "all \ufffd \ufffd done",
    ]
    state = store.load_state("s1")
    assert state.background == "bg \ufffd"
    assert state.short_term == ({"role": "user", "text": "st \ufffd"},)
    assert state.user_emotion == {"label": "x\x00"}  # JSON escapes NUL itself: kept exactly
    assert store.turn_reports("s1")[0].report == {"written": [{"content": "m \ufffd"}]}
    session = store.get_session("s1", "alice")
    assert session is not None and session.title == "title \ufffd"
    # Surrogate pairs are ordinary characters and stay as they are.
    assert store.append_message("s1", "user", "😀 \U0001f600").content == "😀 😀"


def test_missed_turns_round_trip(store: SessionStore) -> None:
    store.create_session("alice", "companion", session_id="s1")
    assert store.load_state("s1").missed == ()
    missed = [{"role": "user", "text": "trimmed while the hippocampus was down"}]
    store.save_state("s1", "bg", [{"role": "user", "text": "recent"}], None, missed)
    assert store.load_state("s1").missed == tuple(missed)
    store.save_state("s1", "bg", [], None)  # caught up: saving without it clears it
    assert store.load_state("s1").missed == ()


def test_unread_turns_of_other_sessions_are_taken_once(
    store: SessionStore, clock: FixedClock
) -> None:
    missed = [{"role": "user", "text": "I'm allergic to shellfish, badly"}]
    for sid, user, persona in (
        ("old", "alice", "companion"),
        ("tutor", "alice", "tutor"),
        ("bob", "bob", "companion"),
        ("new", "alice", "companion"),
    ):
        store.create_session(user, persona, session_id=sid)
        store.save_state(sid, "", [], None, missed if sid != "new" else [])
    before = store.get_session("old", "alice")
    # Only the same user and persona's, never the asking session's own.
    assert store.left_unread("alice", "companion", besides="new") == [("old", tuple(missed))]
    assert store.left_unread("alice", "companion", besides="old") == []
    clock.advance(minutes=5)
    assert store.take_missed("old", missed)
    assert not store.take_missed("old", missed)  # a second taker gets nothing
    assert store.load_state("old").missed == ()
    # Not the user's activity: the session keeps its place in their list.
    assert store.get_session("old", "alice") == before
    # Changed since it was read: not taken.
    store.save_state("tutor", "", [], None, [*missed, {"role": "user", "text": "and more"}])
    assert not store.take_missed("tutor", missed)


def test_entity_edits_round_trip_per_namespace(store: SessionStore) -> None:
    assert store.entity_edits("alice", "companion") == []
    tom = EntityEdit("tom", name="Tom", aliases=("Tommy", "汤姆"), merged=("tommy",))
    stored = store.change_entity_edits("alice", "companion", lambda edits: [*edits, tom])
    assert stored == [tom] == store.entity_edits("alice", "companion")
    store.change_entity_edits(
        "alice", "companion", lambda edits: [*edits, EntityEdit("pixel", deleted=True)]
    )
    assert [e.key for e in store.entity_edits("alice", "companion")] == ["tom", "pixel"]
    assert store.entity_edits("alice", "other") == store.entity_edits("bob", "companion") == []

    def fails(edits: list[EntityEdit]) -> list[EntityEdit]:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        store.change_entity_edits("alice", "companion", fails)
    assert len(store.entity_edits("alice", "companion")) == 2  # nothing half-stored
    store.clear_entity_edits("alice", "companion")
    assert store.entity_edits("alice", "companion") == []


def test_concurrent_entity_edits_are_not_lost(store: SessionStore) -> None:
    def add(n: int) -> None:
        store.change_entity_edits("alice", "companion", lambda e: [*e, EntityEdit(f"k{n}")])

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {e.key for e in store.entity_edits("alice", "companion")} == {f"k{n}" for n in range(8)}


def test_a_version_4_store_migrates_to_entity_edits_without_loss(
    target: str, clock: FixedClock
) -> None:
    with SessionStore(target, clock) as store:  # made at version 4: no entity_edits yet
        with store.db.write() as db:
            db.execute(text("DROP TABLE entity_edits"))
            # ...nor version 6's (issue 30).
            db.execute(text("DROP TABLE memory_sources"))
            db.execute(text("DROP TABLE reply_versions"))
            db.execute(text("ALTER TABLE messages DROP COLUMN shown_version"))
            if store.postgres:
                db.execute(text("UPDATE schema_version SET version = 4"))
            else:
                db.execute(text("PRAGMA user_version = 4"))
        store.create_session("alice", "companion", "Old chat", session_id="s1")
        store.append_message("s1", "user", "My friend Tom plays the bass.")
        store.save_state("s1", "kept", [{"role": "user", "content": "hi"}], None, merged_seq=1)
        assert store.schema_version == 4
    with SessionStore(target, clock) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        assert [m.content for m in store.transcript("s1")] == ["My friend Tom plays the bass."]
        assert store.load_state("s1").background == "kept"
        assert store.load_state("s1").merged_seq == 1
        assert store.entity_edits("alice", "companion") == []
        store.change_entity_edits("alice", "companion", lambda e: [EntityEdit("tom")])
        assert store.entity_edits("alice", "companion") == [EntityEdit("tom")]
