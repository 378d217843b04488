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

Failure policy: a database that cannot be opened, or whose schema is newer than this
code, raises at start (``SessionStoreError``). Calls about a session that does not exist
raise ``SessionNotFound``; reads scoped by user return ``None`` / nothing instead, so a
user never learns whether another user's session exists. Database errors propagate
(SQLAlchemy exceptions). Text a backend cannot hold (NUL, unpaired surrogates, e.g. in a
model's reply) is stored with U+FFFD in their place (``backend.storable_text``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.exc import IntegrityError

from backend.clock import Clock
from backend.sessions.db import SessionDatabase, SessionStoreError
from backend.sessions.locks import SessionLocks, session_locks
from backend.sessions.records import (
    INTERRUPTED,
    MAX_SESSION_ID,
    MESSAGE_COLUMNS,
    ROLES,
    SESSION_COLUMNS,
    STATUSES,
    Message,
    Role,
    Session,
    SessionExists,
    SessionNotFound,
    SessionState,
    StaleMerge,
    Status,
    TurnReport,
    check_choice,
    message_from_row,
    parse_time,
    session_from_row,
    stamp,
)
from backend.sessions.schema import SCHEMA_VERSION, migrate, schema_version
from backend.storable_text import storable

logger = logging.getLogger(__name__)

__all__ = [
    "INTERRUPTED",
    "SCHEMA_VERSION",
    "Message",
    "Session",
    "SessionExists",
    "SessionNotFound",
    "SessionState",
    "SessionStore",
    "SessionStoreError",
    "StaleMerge",
    "TurnReport",
]


class SessionStore:
    """Sessions, transcripts, derived state and turn reports in one database.

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

    # ---- transcript ---------------------------------------------------------------------

    def append_message(
        self,
        session_id: str,
        role: Role,
        content: str,
        *,
        status: Status = "complete",
        turn_id: str | None = None,
    ) -> Message:
        """Append and commit at once; ``seq`` is the next number in the session.

        A reply is appended as ``pending`` (empty or partial text) when it starts and
        finalised with ``finish_message``. Raises ``SessionNotFound``.
        """
        check_choice(role, ROLES, "role")
        check_choice(status, STATUSES, "status")
        content = storable(content)
        now = stamp(self._clock.now())
        # PostgreSQL: the session row's lock serialises appends, so seq stays unique
        # (SQLite's BEGIN IMMEDIATE already serialises every writer).
        lock_row = " FOR UPDATE" if self.db.postgres else ""
        with self.db.write() as db:
            found = db.execute(
                text(f"SELECT 1 FROM sessions WHERE id = :id{lock_row}"), {"id": session_id}
            ).first()
            if found is None:
                raise SessionNotFound(session_id)
            seq = int(
                db.execute(
                    text("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = :id"),
                    {"id": session_id},
                ).scalar_one()
            )
            message_id = int(
                db.execute(
                    text(
                        "INSERT INTO messages (session_id, seq, role, content, created_at,"
                        " status, turn_id) VALUES (:id, :seq, :role, :content, :now, :status,"
                        " :turn) RETURNING id"
                    ),
                    {"id": session_id, "seq": seq, "role": role, "content": content, "now": now,
                     "status": status, "turn": turn_id},
                ).scalar_one()
            )  # fmt: skip
            db.execute(
                text("UPDATE sessions SET updated_at = :now WHERE id = :id"),
                {"now": now, "id": session_id},
            )
        return Message(
            message_id, session_id, seq, role, content, parse_time(now), status, None, turn_id
        )

    def save_partial(self, message_id: int, content: str) -> None:
        """Checkpoint a pending reply's text so far (kept if the process dies)."""
        content = storable(content)
        with self.db.write() as db:
            db.execute(
                text("UPDATE messages SET content = :c WHERE id = :id AND status = 'pending'"),
                {"c": content, "id": message_id},
            )

    def finish_message(
        self, message_id: int, content: str, status: Status, error: str | None = None
    ) -> Message:
        """Finalise a pending message: ``complete``, or ``incomplete`` with the partial text
        and the error. Raises ``KeyError`` for an unknown id and ``ValueError`` when the
        message is not pending (it was already finalised).
        """
        return self._finalise(message_id, content, status, error, pending_only=True)

    def replace_message(
        self, message_id: int, content: str, status: Status, error: str | None = None
    ) -> Message:
        """Replace a finished reply's text (a regeneration, a continuation). Raises
        ``KeyError`` for an unknown id."""
        return self._finalise(message_id, content, status, error, pending_only=False)

    def _finalise(
        self, message_id: int, content: str, status: Status, error: str | None, *,
        pending_only: bool,
    ) -> Message:  # fmt: skip
        check_choice(status, ("complete", "incomplete"), "a final status")
        content, error = storable(content), None if error is None else storable(error)
        select = text(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = :id")
        with self.db.write() as db:
            row = db.execute(select, {"id": message_id}).first()
            if row is None:
                raise KeyError(message_id)
            if pending_only and row._mapping["status"] != "pending":
                raise ValueError(f"message {message_id} is already {row._mapping['status']}")
            db.execute(
                text("UPDATE messages SET content = :c, status = :s, error = :e WHERE id = :id"),
                {"c": content, "s": status, "e": error, "id": message_id},
            )
            db.execute(
                text("UPDATE sessions SET updated_at = :now WHERE id = :id"),
                {"now": stamp(self._clock.now()), "id": row._mapping["session_id"]},
            )
            row = db.execute(select, {"id": message_id}).one()
        return message_from_row(row)

    def transcript(self, session_id: str) -> list[Message]:
        """Every message of the session in ``seq`` order (empty for an unknown session)."""
        rows = self._read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id ORDER BY seq",
            {"id": session_id},
        )
        return [message_from_row(row) for row in rows]

    def tail(self, session_id: str, count: int) -> list[Message]:
        """The session's last ``count`` messages, in ``seq`` order."""
        rows = self._read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id"
            " ORDER BY seq DESC LIMIT :n",
            {"id": session_id, "n": max(0, count)},
        )
        return [message_from_row(row) for row in reversed(rows)]

    def messages_after(self, session_id: str, seq: int) -> list[Message]:
        """The session's messages with a ``seq`` above ``seq``, in order."""
        rows = self._read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq > :seq"
            " ORDER BY seq",
            {"id": session_id, "seq": seq},
        )
        return [message_from_row(row) for row in rows]

    def mark_incomplete_pending(self, session_id: str | None = None) -> int:
        """Replies left ``pending`` by a process that died become ``incomplete``; the count.

        Without ``session_id`` (at start): every session whose lock is free, so a reply
        another app process is streaming right now is left alone. With it: that session
        only, and the caller holds its lock (the turn engine, after a takeover).
        """
        if session_id is not None:
            return self._mark_pending(session_id)
        rows = self._read("SELECT DISTINCT session_id FROM messages WHERE status = 'pending'")
        marked = 0
        for (pending_session,) in rows:
            handle = self.locks.try_acquire(pending_session)
            if handle is None:  # a live turn somewhere holds it
                continue
            try:
                marked += self._mark_pending(pending_session)
            finally:
                self.locks.release(handle)
        if marked:
            logger.warning("marked %d interrupted replies incomplete", marked)
        return marked

    def _mark_pending(self, session_id: str) -> int:
        params = {"id": session_id, "error": INTERRUPTED}
        where = " WHERE status = 'pending' AND session_id = :id"
        if not self._read(f"SELECT 1 FROM messages{where}", params):
            return 0  # the common case, without a write transaction
        with self.db.write() as db:
            result = db.execute(
                text(
                    "UPDATE messages SET status = 'incomplete',"
                    f" error = COALESCE(error, :error){where}"
                ),
                params,
            )
        return result.rowcount

    # ---- derived state and reports ------------------------------------------------------

    def save_state(
        self,
        session_id: str,
        background: str,
        short_term: Sequence[dict[str, Any]],
        user_emotion: dict[str, Any] | None,
        missed: Sequence[dict[str, Any]] = (),
        *,
        merged_seq: int | None = None,
        expected_seq: int | None = None,
    ) -> None:
        """Replace the session's derived state. Raises ``SessionNotFound``.

        ``merged_seq``: the last message ``seq`` this state folds in (kept when None).
        ``expected_seq``: write only if the stored ``merged_seq`` still is this one, else
        raise ``StaleMerge`` — two merges of the same turns never both land.
        """
        items, missed_items = list(short_term), list(missed)
        if not all(isinstance(item, dict) for item in items + missed_items):
            raise TypeError("short_term and missed must be lists of dicts")
        params: dict[str, Any] = {
            "bg": storable(background),
            "st": storable(json.dumps(items, ensure_ascii=False)),
            "missed": storable(json.dumps(missed_items, ensure_ascii=False)),
            "emo": None
            if user_emotion is None
            else storable(json.dumps(user_emotion, ensure_ascii=False)),
            "now": stamp(self._clock.now()),
            "id": session_id,
        }
        sql = (
            "UPDATE sessions SET background = :bg, short_term = :st, user_emotion = :emo,"
            " missed_turns = :missed, updated_at = :now"
        )
        if merged_seq is not None:
            sql += ", merged_seq = :merged"
            params["merged"] = merged_seq
        sql += " WHERE id = :id"
        if expected_seq is not None:
            sql += " AND merged_seq = :expected"
            params["expected"] = expected_seq
        with self.db.write() as db:
            result = db.execute(text(sql), params)
            if result.rowcount == 0:
                found = db.execute(
                    text("SELECT merged_seq FROM sessions WHERE id = :id"), {"id": session_id}
                ).first()
                if found is None:
                    raise SessionNotFound(session_id)
                raise StaleMerge(session_id, expected_seq, int(found[0]))

    def load_state(self, session_id: str) -> SessionState:
        """The session's derived state (empty for a new session). Raises ``SessionNotFound``."""
        rows = self._read(
            "SELECT background, short_term, user_emotion, missed_turns, merged_seq FROM sessions"
            " WHERE id = :id",
            {"id": session_id},
        )
        if not rows:
            raise SessionNotFound(session_id)
        background, short_term, emotion, missed, merged_seq = rows[0]
        return SessionState(
            background=background,
            short_term=tuple(json.loads(short_term)),
            user_emotion=None if emotion is None else json.loads(emotion),
            missed=tuple(json.loads(missed)),
            merged_seq=int(merged_seq),
        )

    def save_turn_report(self, session_id: str, turn_id: str, report: dict[str, Any]) -> None:
        """Store (or replace) the memory report of one turn. Raises ``SessionNotFound``."""
        body = storable(json.dumps(report, ensure_ascii=False, default=str))
        try:
            with self.db.write() as db:
                db.execute(
                    text(
                        "INSERT INTO turn_reports (session_id, turn_id, report, created_at)"
                        " VALUES (:id, :turn, :report, :now) ON CONFLICT (session_id, turn_id)"
                        " DO UPDATE SET report = excluded.report"
                    ),
                    {"id": session_id, "turn": turn_id, "report": body,
                     "now": stamp(self._clock.now())},
                )  # fmt: skip
        except IntegrityError:  # the foreign key: no such session
            raise SessionNotFound(session_id) from None

    def turn_report(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """One turn's memory report, or None when it has none yet."""
        rows = self._read(
            "SELECT report FROM turn_reports WHERE session_id = :id AND turn_id = :turn",
            {"id": session_id, "turn": turn_id},
        )
        return json.loads(rows[0][0]) if rows else None

    def turn_reports(self, session_id: str) -> list[TurnReport]:
        """The session's turn reports, oldest first."""
        rows = self._read(
            "SELECT session_id, turn_id, report, created_at FROM turn_reports"
            f" WHERE session_id = :id ORDER BY created_at, {self.db.dialect.insertion_order}",
            {"id": session_id},
        )
        return [TurnReport(row[0], row[1], json.loads(row[2]), parse_time(row[3])) for row in rows]
