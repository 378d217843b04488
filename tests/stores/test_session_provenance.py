"""The session store's schema 6 (issue 30): where memories came from
(``backend.sessions.provenance``), replies' versions (``backend.sessions.reply_versions``),
deleting messages, and the migration from schema 5, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from backend.clock import FixedClock
from backend.sessions.store import SCHEMA_VERSION, SessionStore, SourceLink, Support

T0 = datetime(2026, 8, 26, 22, 30, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "db" / "sessions.sqlite3")


@pytest.fixture
def store(target: str) -> Iterator[SessionStore]:
    with SessionStore(target, FixedClock(T0)) as opened:
        opened.create_session("alice", "companion", "Food", session_id="s1")
        yield opened


def test_sources_are_recorded_once_and_read_with_their_message(store: SessionStore) -> None:
    peanuts = store.append_message("s1", "user", "I'm allergic to peanuts")
    tom = store.append_message("s1", "user", "My brother Tom lives in Lyon")
    added = store.record_sources(
        "alice", "companion", [SourceLink("m1", (peanuts.id,)), SourceLink("m2", (tom.id,))]
    )
    assert added == 2
    # The same pair again adds nothing; another message adds a source.
    assert store.record_sources("alice", "companion", [SourceLink("m1", (peanuts.id,))]) == 0
    assert store.record_sources("alice", "companion", [SourceLink("m2", (peanuts.id,))]) == 1
    found = store.memory_sources("alice", "companion", ["m1", "m2", "unknown"])
    assert set(found) == {"m1", "m2"}  # a memory without provenance is absent
    (source,) = found["m1"]
    assert (source.message_id, source.session_id, source.session_title, source.seq) == (
        peanuts.id, "s1", "Food", 1,
    )  # fmt: skip
    assert source.content == "I'm allergic to peanuts" and source.created_at == T0
    assert [s.message_id for s in found["m2"]] == sorted([peanuts.id, tom.id])
    # Another namespace sees none of it.
    assert store.memory_sources("bob", "companion", ["m1"]) == {}


def test_support_says_which_memories_only_a_message_formed(store: SessionStore) -> None:
    one = store.append_message("s1", "user", "I'm allergic to peanuts")
    two = store.append_message("s1", "user", "peanuts again: allergic")
    store.record_sources(
        "alice",
        "companion",
        [SourceLink("only-one", (one.id,)), SourceLink("both", (one.id, two.id))],
    )
    # Reinforced, with no source known before: a NULL row, so never "only" this one.
    store.record_sources("alice", "companion", [SourceLink("legacy", (one.id,), existing=True)])
    supports = sorted(store.supported_by([one.id]), key=lambda s: s.memory_id)
    assert supports == [
        Support("alice", "companion", "both", alone=False),
        Support("alice", "companion", "legacy", alone=False),
        Support("alice", "companion", "only-one", alone=True),
    ]
    # Both messages going together leave "both" without support.
    both = {s.memory_id: s.alone for s in store.supported_by([one.id, two.id])}
    assert both == {"both": True, "legacy": False, "only-one": True}
    # Retracted, the message supports nothing any more.
    assert store.retract_sources([one.id]) == 3
    assert store.supported_by([one.id]) == []
    assert [s.memory_id for s in store.supported_by([two.id])] == ["both"]
    assert store.supported_by([two.id])[0].alone
    assert store.forget_sources("alice", "companion", ["both"]) == 1
    assert store.memory_sources("alice", "companion", ["both"]) == {}


def test_a_deleted_conversation_leaves_its_memories_an_unknown_source(
    store: SessionStore,
) -> None:
    store.create_session("alice", "companion", session_id="s2")
    said = store.append_message("s2", "user", "I'm allergic to peanuts")
    store.record_sources("alice", "companion", [SourceLink("m1", (said.id,))])
    assert store.delete_session("s2", "alice")
    # The row stays, NULL: a memory whose source went with its conversation is kept.
    (source,) = store.memory_sources("alice", "companion", ["m1"])["m1"]
    assert source.message_id is None and source.content is None


def test_regenerated_replies_keep_their_versions(store: SessionStore) -> None:
    store.append_message("s1", "user", "Tell me a joke")
    reply = store.append_message("s1", "assistant", "", status="pending")
    store.finish_message(reply.id, "First joke", "complete")
    assert store.reply_versions([reply.id]) == {}  # not regenerated: no versions
    store.replace_message(reply.id, "Second joke", "complete", keep_previous=True)
    store.replace_message(reply.id, "Third joke", "incomplete", "cut", keep_previous=True)
    versions = store.reply_versions([reply.id])[reply.id]
    assert (versions.count, versions.shown) == (3, 3)
    assert store.version_texts(reply.id) == ["First joke", "Second joke", "Third joke"]
    shown = store.show_version(reply.id, 1)
    assert (shown.content, shown.status, shown.error) == ("First joke", "complete", None)
    assert store.transcript("s1")[-1].content == "First joke"
    assert store.reply_versions([reply.id])[reply.id].shown == 1
    back = store.show_version(reply.id, 3)
    assert (back.content, back.status, back.error) == ("Third joke", "incomplete", "cut")
    # A continuation (no versions kept) grows the version shown, in both places.
    store.replace_message(reply.id, "Third joke, longer", "complete")
    assert store.version_texts(reply.id)[2] == "Third joke, longer"
    assert store.reply_versions([reply.id])[reply.id].count == 3
    with pytest.raises(KeyError):
        store.show_version(reply.id, 4)


def test_deleting_messages_and_the_next_seq(store: SessionStore) -> None:
    user = store.append_message("s1", "user", "hi", turn_id="t1")
    reply = store.append_message("s1", "assistant", "hello", turn_id="t1")
    store.replace_message(reply.id, "hello again", "complete", keep_previous=True)
    store.save_turn_report("s1", "t1", {"written": []})
    store.save_state("s1", "", [], None, merged_seq=reply.seq)
    gone = store.delete_messages("s1", [reply.id, user.id, 12345])
    assert [m.id for m in gone] == [user.id, reply.id]  # in order; unknown ids ignored
    assert store.transcript("s1") == []
    assert store.turn_report("s1", "t1") is None  # the turn has no message left
    assert store.reply_versions([reply.id]) == {}
    # A new message never takes a seq already merged.
    assert store.append_message("s1", "user", "again").seq == reply.seq + 1
    # Another session's message is not deleted through this one.
    store.create_session("alice", "companion", session_id="s2")
    other = store.append_message("s2", "user", "mine")
    assert store.delete_messages("s1", [other.id]) == []
    assert len(store.transcript("s2")) == 1


def test_a_version_5_store_migrates_to_version_6(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    with SessionStore(path, FixedClock(T0)) as store:  # made, then taken back to version 5
        with store.db.write() as db:
            db.execute(text("DROP TABLE memory_sources"))
            db.execute(text("DROP TABLE reply_versions"))
            db.execute(text("ALTER TABLE messages DROP COLUMN shown_version"))
            db.execute(text("PRAGMA user_version = 5"))
        store.create_session("alice", "companion", "Old chat", session_id="s1")
        store.append_message("s1", "user", "My friend Tom plays the bass.")
        store.append_message("s1", "assistant", "Nice!")
        assert store.schema_version == 5
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(messages)")]
    assert "shown_version" not in columns
    with SessionStore(path, FixedClock(T0)) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        said, reply = store.transcript("s1")
        assert said.content == "My friend Tom plays the bass." and reply.content == "Nice!"
        # Nothing is known of where older memories came from; new ones can say.
        assert store.memory_sources("alice", "companion", ["old"]) == {}
        store.record_sources("alice", "companion", [SourceLink("new", (said.id,))])
        assert store.supported_by([said.id])[0].alone
        store.replace_message(reply.id, "Lovely!", "complete", keep_previous=True)
        assert store.version_texts(reply.id) == ["Nice!", "Lovely!"]
