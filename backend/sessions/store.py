"""The session store: sessions, their transcript, derived state and turn reports.

docs/architecture.md: the transcript keeps every raw message in full (nothing the user said is ever
lost); ``background``, ``short_term`` and the last ``user_emotion`` are the derived state
the hippocampus rewrites each turn.

Two backends behind this one class (``backend.sessions.db``): a SQLite file, the
zero-setup default, or PostgreSQL given a URL (several app processes share it,
docs/deployment.md). The API is synchronous: the engine calls it through
``asyncio.to_thread``. Every write is its own committed transaction (the user message is
durable before any model call). Migrations (``backend.sessions.schema``) run at
open. ``locks`` are the per-session locks that order turns across processes
(``backend.sessions.locks``).

This module holds the store's lifecycle and the ``sessions`` rows themselves; the
transcript's operations are in ``backend.sessions.transcript`` and the derived state and
turn reports in ``backend.sessions.derived_state``, the user's entity edits in
``backend.sessions.entity_edits``, the memories' sources in
``backend.sessions.provenance`` and replies' versions in
``backend.sessions.reply_versions``, all mixed into ``SessionStore``.

Failure policy: a database that cannot be opened, or whose schema is newer than this
code, raises at start (``SessionStoreError``). Calls about a session that does not exist
raise ``SessionNotFound``; reads scoped by user return ``None`` / nothing instead, so a
user never learns whether another user's session exists. Database errors propagate
(SQLAlchemy exceptions). Text a backend cannot hold (NUL, unpaired surrogates, e.g. in a
model's reply) is stored with U+FFFD in their place (``backend.storable_text``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.exc import IntegrityError

from backend.clock import Clock
from backend.sessions.db import SessionDatabase, SessionStoreError
from backend.sessions.derived_state import SessionDerivedState
from backend.sessions.entity_edits import SessionEntityEdits
from backend.sessions.locks import SessionLocks, session_locks
from backend.sessions.provenance import MemorySource, SessionProvenance, SourceLink, Support
from backend.sessions.records import (
    INTERRUPTED,
    MAX_SESSION_ID,
    SESSION_COLUMNS,
    Message,
    Session,
    SessionExists,
    SessionNotFound,
    SessionState,
    StaleMerge,
    TurnReport,
    parse_time,
    session_from_row,
    stamp,
)
from backend.sessions.reply_versions import ReplyVersions, SessionReplyVersions
from backend.sessions.schema import SCHEMA_VERSION, migrate, schema_version
from backend.sessions.transcript import SessionTranscripts
from backend.storable_text import storable

__all__ = [
    "INTERRUPTED",
    "SCHEMA_VERSION",
    "MemorySource",
    "Message",
    "ReplyVersions",
    "Session",
    "SessionExists",
    "SessionNotFound",
    "SessionState",
    "SessionStore",
    "SessionStoreError",
    "SourceLink",
    "StaleMerge",
    "Support",
    "TurnReport",
]


class SessionStore(
    SessionTranscripts,
    SessionDerivedState,
    SessionEntityEdits,
    SessionProvenance,
    SessionReplyVersions,
):
    """Sessions, transcripts, derived state, turn reports, entity edits, where memories
    came from and replies' versions, in one database.

    ``target``: a SQLite file path (``":memory:"`` for tests) or a PostgreSQL URL
    (``postgresql://user:pass@host:5432/db``). Use as a context manager or call
    ``close()``. All methods are thread-safe.
    """

    def __init__(self, target: Path | str, clock: Clock) -> None:
        self._clock = clock
        self.db = SessionDatabase(target)
        self.path = self.db.where  # for messages (a URL's password is masked)
        try:
            migrate(self.db)
            self.locks: SessionLocks = session_locks(self.db.target)
        except BaseException:
            self.db.close()
            raise

    @property
    def postgres(self) -> bool:
        return self.db.postgres

    @property
    def journal_mode(self) -> str:
        return self.db.journal_mode

    # ---- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        self.locks.close()
        self.db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _read(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row[Any]]:
        return self.db.read(sql, params)

    @property
    def schema_version(self) -> int:
        with self.db.connection() as conn:
            return schema_version(conn, self.db.postgres)

    # ---- sessions -----------------------------------------------------------------------

    def create_session(
        self,
        user_id: str,
        persona_id: str,
        title: str | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new, empty session. Raises ``SessionExists`` when ``session_id`` is taken."""
        session_id = session_id or uuid.uuid4().hex
        if not session_id.strip() or len(session_id) > MAX_SESSION_ID:
            raise ValueError(f"a session id must be 1-{MAX_SESSION_ID} characters")
        now = stamp(self._clock.now())
        try:
            with self.db.write() as db:
                db.execute(
                    text(
                        "INSERT INTO sessions (id, user_id, persona_id, title, created_at,"
                        " updated_at) VALUES (:id, :user, :persona, :title, :now, :now)"
                    ),
                    {"id": session_id, "user": user_id, "persona": persona_id, "title": title,
                     "now": now},
                )  # fmt: skip
        except IntegrityError:
            raise SessionExists(session_id) from None
        return Session(session_id, user_id, persona_id, title, parse_time(now), parse_time(now))

    def get_session(self, session_id: str, user_id: str) -> Session | None:
        """The session if it exists and belongs to ``user_id``; else ``None``."""
        rows = self._read(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = :id AND user_id = :user",
            {"id": session_id, "user": user_id},
        )
        return session_from_row(rows[0]) if rows else None

    def list_sessions(
        self, user_id: str, persona_id: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[Session]:
        """The user's sessions, most recently active first."""
        sql = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = :user"
        params: dict[str, Any] = {"user": user_id, "limit": max(0, limit), "off": max(0, offset)}
        if persona_id is not None:
            sql += " AND persona_id = :persona"
            params["persona"] = persona_id
        sql += " ORDER BY updated_at DESC, id LIMIT :limit OFFSET :off"
        return [session_from_row(row) for row in self._read(sql, params)]

    def rename(self, session_id: str, user_id: str, title: str | None) -> Session | None:
        """Set the title; ``None`` when the user has no such session."""
        with self.db.write() as db:
            db.execute(
                text(
                    "UPDATE sessions SET title = :title, updated_at = :now"
                    " WHERE id = :id AND user_id = :user"
                ),
                {"title": None if title is None else storable(title),
                 "now": stamp(self._clock.now()), "id": session_id,
                 "user": user_id},
            )  # fmt: skip
        return self.get_session(session_id, user_id)

    def delete_session(self, session_id: str, user_id: str) -> bool:
        """Delete the session with its messages and reports; False when the user has none."""
        with self.db.write() as db:
            result = db.execute(
                text("DELETE FROM sessions WHERE id = :id AND user_id = :user"),
                {"id": session_id, "user": user_id},
            )
        return result.rowcount > 0
