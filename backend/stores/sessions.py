"""The session store on SQLite: sessions, their transcript, derived state and turn reports.

turn.md: the transcript keeps every raw message in full (nothing the user said is ever
lost); ``background``, ``short_term`` and the last ``user_emotion`` are the derived state
the hippocampus rewrites each turn.

One connection guarded by a lock, opened with ``check_same_thread=False``: the engine
calls this synchronous API through ``asyncio.to_thread``, so calls come from a pool of
threads and are serialised here. Every write is its own committed transaction (the user
message is durable before any model call). WAL journal, ``synchronous=NORMAL``, foreign
keys on. The schema version lives in ``PRAGMA user_version``; migrations run at open.

Failure policy: a database that cannot be opened, or whose schema is newer than this
code, raises at start (``SessionStoreError``). Calls about a session that does not exist
raise ``SessionNotFound``; reads scoped by user return ``None`` / nothing instead, so a
user never learns whether another user's session exists. ``sqlite3`` errors propagate.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from backend.clock import Clock

logger = logging.getLogger(__name__)

Role = Literal["user", "assistant", "system", "tool"]
Status = Literal["complete", "incomplete", "pending"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
STATUSES: tuple[str, ...] = ("complete", "incomplete", "pending")
MAX_SESSION_ID = 200  # ids come from clients (Conversation-Id); keep them bounded
INTERRUPTED = "interrupted: the server stopped before the reply was finished"

# Migration i (1-based) brings the schema from version i-1 to i. Append, never edit.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            persona_id TEXT NOT NULL,
            title TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            background TEXT NOT NULL DEFAULT '',
            short_term TEXT NOT NULL DEFAULT '[]',
            user_emotion TEXT
        )""",
        "CREATE INDEX sessions_by_user ON sessions (user_id, persona_id, updated_at)",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
            content TEXT NOT NULL,
            created_at TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('complete', 'incomplete', 'pending')),
            error TEXT,
            turn_id TEXT,
            UNIQUE (session_id, seq)
        )""",
        "CREATE INDEX messages_pending ON messages (status) WHERE status = 'pending'",
        """CREATE TABLE turn_reports (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            turn_id TEXT NOT NULL,
            report TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (session_id, turn_id)
        )""",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)


class SessionStoreError(RuntimeError):
    """The database cannot be used (e.g. its schema is newer than this code)."""


class SessionNotFound(KeyError):
    """No session with this id."""


class SessionExists(ValueError):
    """A session with this id already exists (possibly another user's)."""


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    user_id: str
    persona_id: str
    title: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    session_id: str
    seq: int  # 1, 2, 3... per session, in the order messages were appended
    role: Role
    content: str
    created_at: datetime
    status: Status
    error: str | None = None
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class SessionState:
    """The derived state the hippocampus rewrites each turn (turn.md)."""

    background: str = ""
    short_term: tuple[dict[str, Any], ...] = ()
    user_emotion: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TurnReport:
    session_id: str
    turn_id: str
    report: dict[str, Any]
    created_at: datetime


def _stamp(moment: datetime) -> str:
    """Fixed-width UTC ISO-8601 (always microseconds), so text order is time order."""
    if moment.tzinfo is None:
        raise ValueError("the clock must return timezone-aware datetimes")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


# Read columns by name: a later migration may add columns the row types do not have.
_SESSION_COLUMNS = "id, user_id, persona_id, title, created_at, updated_at"
_MESSAGE_COLUMNS = "id, session_id, seq, role, content, created_at, status, error, turn_id"


def _session(row: sqlite3.Row) -> Session:
    data = dict(row)
    return Session(**data | {k: _time(data[k]) for k in ("created_at", "updated_at")})


def _message(row: sqlite3.Row) -> Message:
    return Message(**dict(row) | {"created_at": _time(row["created_at"])})


def _check(value: str, allowed: Sequence[str], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)} (got {value!r})")


class SessionStore:
    """Sessions, transcripts, derived state and turn reports in one SQLite file.

    ``path`` may be ``":memory:"`` for tests. Use as a context manager or call
    ``close()``. All methods are thread-safe.
    """

    def __init__(self, path: Path | str, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise SessionStoreError(f"cannot open the session database {self.path}: {exc}") from exc
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA busy_timeout = 5000")
            self.journal_mode = str(self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    # ---- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One committed transaction, taken with the write lock (BEGIN IMMEDIATE)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _migrate(self) -> None:
        with self._write() as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise SessionStoreError(
                    f"{self.path} has schema version {version}; this code knows up to "
                    f"{SCHEMA_VERSION} (upgrade limbic-memory)"
                )
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[number - 1]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")
                logger.info("session database %s migrated to version %d", self.path, number)

    @property
    def schema_version(self) -> int:
        return int(self._read("PRAGMA user_version")[0][0])

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
        now = _stamp(self._clock.now())
        try:
            with self._write() as db:
                db.execute(
                    "INSERT INTO sessions (id, user_id, persona_id, title, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, user_id, persona_id, title, now, now),
                )
        except sqlite3.IntegrityError:
            raise SessionExists(session_id) from None
        return Session(session_id, user_id, persona_id, title, _time(now), _time(now))

    def get_session(self, session_id: str, user_id: str) -> Session | None:
        """The session if it exists and belongs to ``user_id``; else ``None``."""
        rows = self._read(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ? AND user_id = ?",
            (session_id, user_id),
        )
        return _session(rows[0]) if rows else None

    def list_sessions(
        self, user_id: str, persona_id: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[Session]:
        """The user's sessions, most recently active first."""
        sql = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE user_id = ?"
        params: list[Any] = [user_id]
        if persona_id is not None:
            sql += " AND persona_id = ?"
            params.append(persona_id)
        sql += " ORDER BY updated_at DESC, id LIMIT ? OFFSET ?"
        params += [max(0, limit), max(0, offset)]
        return [_session(row) for row in self._read(sql, params)]

    def rename(self, session_id: str, user_id: str, title: str | None) -> Session | None:
        """Set the title; ``None`` when the user has no such session."""
        with self._write() as db:
            db.execute(
                "UPDATE sessions SET title = ?, updated_at = ? WHERE id = ? AND user_id = ?",
                (title, _stamp(self._clock.now()), session_id, user_id),
            )
        return self.get_session(session_id, user_id)

    def delete_session(self, session_id: str, user_id: str) -> bool:
        """Delete the session with its messages and reports; False when the user has none."""
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM sessions WHERE id = ? AND user_id = ?", (session_id, user_id)
            )
        return cursor.rowcount > 0

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
        _check(role, ROLES, "role")
        _check(status, STATUSES, "status")
        now = _stamp(self._clock.now())
        with self._write() as db:
            if db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise SessionNotFound(session_id)
            seq = db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?",
                (session_id,),
            ).fetchone()[0]
            cursor = db.execute(
                "INSERT INTO messages (session_id, seq, role, content, created_at, status,"
                " turn_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, role, content, now, status, turn_id),
            )
            db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
        assert cursor.lastrowid is not None
        return Message(
            cursor.lastrowid, session_id, seq, role, content, _time(now), status, None, turn_id
        )

    def save_partial(self, message_id: int, content: str) -> None:
        """Checkpoint a pending reply's text so far (kept if the process dies)."""
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ? WHERE id = ? AND status = 'pending'",
                (content, message_id),
            )

    def finish_message(
        self, message_id: int, content: str, status: Status, error: str | None = None
    ) -> Message:
        """Finalise a pending message: ``complete``, or ``incomplete`` with the partial text
        and the error. Raises ``KeyError`` for an unknown id and ``ValueError`` when the
        message is not pending (it was already finalised).
        """
        _check(status, ("complete", "incomplete"), "a final status")
        with self._write() as db:
            row = db.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
            if row is None:
                raise KeyError(message_id)
            if row["status"] != "pending":
                raise ValueError(f"message {message_id} is already {row['status']}")
            db.execute(
                "UPDATE messages SET content = ?, status = ?, error = ? WHERE id = ?",
                (content, status, error, message_id),
            )
            now = _stamp(self._clock.now())
            db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, row["session_id"]))
            row = db.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
        return _message(row)

    def transcript(self, session_id: str) -> list[Message]:
        """Every message of the session in ``seq`` order (empty for an unknown session)."""
        rows = self._read(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return [_message(row) for row in rows]

    def mark_incomplete_pending(self) -> int:
        """At start: replies left ``pending`` by a crash become ``incomplete``; the count."""
        with self._write() as db:
            cursor = db.execute(
                "UPDATE messages SET status = 'incomplete', error = COALESCE(error, ?)"
                " WHERE status = 'pending'",
                (INTERRUPTED,),
            )
        if cursor.rowcount:
            logger.warning("marked %d interrupted replies incomplete", cursor.rowcount)
        return cursor.rowcount

    # ---- derived state and reports ------------------------------------------------------

    def save_state(
        self,
        session_id: str,
        background: str,
        short_term: Sequence[dict[str, Any]],
        user_emotion: dict[str, Any] | None,
    ) -> None:
        """Replace the session's derived state. Raises ``SessionNotFound``."""
        items = list(short_term)
        if not all(isinstance(item, dict) for item in items):
            raise TypeError("short_term must be a list of dicts")
        payload = (
            background,
            json.dumps(items, ensure_ascii=False),
            None if user_emotion is None else json.dumps(user_emotion, ensure_ascii=False),
            _stamp(self._clock.now()),
            session_id,
        )
        with self._write() as db:
            cursor = db.execute(
                "UPDATE sessions SET background = ?, short_term = ?, user_emotion = ?,"
                " updated_at = ? WHERE id = ?",
                payload,
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(session_id)

    def load_state(self, session_id: str) -> SessionState:
        """The session's derived state (empty for a new session). Raises ``SessionNotFound``."""
        rows = self._read(
            "SELECT background, short_term, user_emotion FROM sessions WHERE id = ?",
            (session_id,),
        )
        if not rows:
            raise SessionNotFound(session_id)
        row = rows[0]
        emotion = row["user_emotion"]
        return SessionState(
            background=row["background"],
            short_term=tuple(json.loads(row["short_term"])),
            user_emotion=None if emotion is None else json.loads(emotion),
        )

    def save_turn_report(self, session_id: str, turn_id: str, report: dict[str, Any]) -> None:
        """Store (or replace) the memory report of one turn. Raises ``SessionNotFound``."""
        text = json.dumps(report, ensure_ascii=False, default=str)
        try:
            with self._write() as db:
                db.execute(
                    "INSERT INTO turn_reports (session_id, turn_id, report, created_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (session_id, turn_id)"
                    " DO UPDATE SET report = excluded.report",
                    (session_id, turn_id, text, _stamp(self._clock.now())),
                )
        except sqlite3.IntegrityError:  # the foreign key: no such session
            raise SessionNotFound(session_id) from None

    def turn_reports(self, session_id: str) -> list[TurnReport]:
        """The session's turn reports, oldest first."""
        rows = self._read(
            "SELECT session_id, turn_id, report, created_at FROM turn_reports"
            " WHERE session_id = ? ORDER BY created_at, rowid",
            (session_id,),
        )
        return [
            TurnReport(
                row["session_id"],
                row["turn_id"],
                json.loads(row["report"]),
                _time(row["created_at"]),
            )
            for row in rows
        ]
