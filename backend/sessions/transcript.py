"""A session's transcript: appending messages, a reply's pending text and its end, reads.

docs/architecture.md ("One turn"): the user's message is committed before any model is
called, and a reply is stored as it ends, ``complete`` or ``incomplete`` with what
arrived and why; the transcript keeps every message whole. A reply starts ``pending``;
one left so by a process that died becomes ``incomplete`` (``mark_incomplete_pending``).

Mixed into ``SessionStore`` (``backend.sessions.store``), whose database, locks and clock
it uses; its failure policy is the store's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import text

from backend.clock import Clock
from backend.sessions.db import SessionDatabase
from backend.sessions.locks import SessionLocks
from backend.sessions.records import (
    INTERRUPTED,
    MESSAGE_COLUMNS,
    ROLES,
    STATUSES,
    Message,
    Role,
    SessionNotFound,
    Status,
    check_choice,
    message_from_row,
    parse_time,
    stamp,
)
from backend.sessions.reply_versions import keep_version
from backend.storable_text import storable

logger = logging.getLogger(__name__)


class SessionTranscripts:
    """The ``messages`` table's operations of ``SessionStore``."""

    db: SessionDatabase
    locks: SessionLocks
    _clock: Clock

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
                text(f"SELECT merged_seq FROM sessions WHERE id = :id{lock_row}"),
                {"id": session_id},
            ).first()
            if found is None:
                raise SessionNotFound(session_id)
            # Past the merged seq too: after the last messages were deleted
            # (``delete_messages``), a new one must not take a seq already merged.
            seq = 1 + max(
                int(found[0]),
                int(
                    db.execute(
                        text("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = :id"),
                        {"id": session_id},
                    ).scalar_one()
                ),
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
        self,
        message_id: int,
        content: str,
        status: Status,
        error: str | None = None,
        *,
        keep_previous: bool = False,
    ) -> Message:
        """Replace a finished reply's text (a regeneration, a continuation). With
        ``keep_previous`` (a regeneration), the text it had stays one of its versions
        (``backend.sessions.reply_versions``). Raises ``KeyError`` for an unknown id."""
        return self._finalise(
            message_id, content, status, error, pending_only=False, keep=keep_previous
        )

    def _finalise(
        self, message_id: int, content: str, status: Status, error: str | None, *,
        pending_only: bool, keep: bool = False,
    ) -> Message:  # fmt: skip
        check_choice(status, ("complete", "incomplete"), "a final status")
        content, error = storable(content), None if error is None else storable(error)
        select = text(f"SELECT {MESSAGE_COLUMNS}, shown_version FROM messages WHERE id = :id")
        with self.db.write() as db:
            row = db.execute(select, {"id": message_id}).first()
            if row is None:
                raise KeyError(message_id)
            if pending_only and row._mapping["status"] != "pending":
                raise ValueError(f"message {message_id} is already {row._mapping['status']}")
            now = stamp(self._clock.now())
            shown = row._mapping["shown_version"]
            if keep:
                shown = keep_version(db, row._mapping, content, status, error, now)
            elif shown is not None:  # a continuation of the version shown: it grows too
                db.execute(
                    text(
                        "UPDATE reply_versions SET content = :c, status = :s, error = :e"
                        " WHERE message_id = :id AND version = :v"
                    ),
                    {"c": content, "s": status, "e": error, "id": message_id, "v": shown},
                )
            db.execute(
                text(
                    "UPDATE messages SET content = :c, status = :s, error = :e,"
                    " shown_version = :v WHERE id = :id"
                ),
                {"c": content, "s": status, "e": error, "v": shown, "id": message_id},
            )
            db.execute(
                text("UPDATE sessions SET updated_at = :now WHERE id = :id"),
                {"now": now, "id": row._mapping["session_id"]},
            )
            row = db.execute(
                text(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = :id"), {"id": message_id}
            ).one()
        return message_from_row(row)

    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> list[Message]:
        """Delete messages of the session (their versions go with them, their memory
        sources become NULL rows unless retracted first: ``retract_sources``), and the
        reports of turns left with no message; returns the messages deleted, in order."""
        ids = [int(i) for i in dict.fromkeys(message_ids)]
        if not ids:
            return []
        keys = {f"m{i}": value for i, value in enumerate(ids)}
        where = f"session_id = :sid AND id IN ({', '.join(':' + k for k in keys)})"
        params = {"sid": session_id, **keys}
        with self.db.write() as db:
            rows = db.execute(
                text(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY seq"), params
            ).fetchall()
            db.execute(text(f"DELETE FROM messages WHERE {where}"), params)
            gone = [message_from_row(row) for row in rows]
            for turn_id in {m.turn_id for m in gone if m.turn_id}:
                left = db.execute(
                    text("SELECT 1 FROM messages WHERE session_id = :sid AND turn_id = :turn"),
                    {"sid": session_id, "turn": turn_id},
                ).first()
                if left is None:
                    db.execute(
                        text("DELETE FROM turn_reports WHERE session_id = :sid AND turn_id = :t"),
                        {"sid": session_id, "t": turn_id},
                    )
            if gone:
                db.execute(
                    text("UPDATE sessions SET updated_at = :now WHERE id = :sid"),
                    {"now": stamp(self._clock.now()), "sid": session_id},
                )
        return gone

    def transcript(self, session_id: str) -> list[Message]:
        """Every message of the session in ``seq`` order (empty for an unknown session)."""
        rows = self.db.read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id ORDER BY seq",
            {"id": session_id},
        )
        return [message_from_row(row) for row in rows]

    def tail(self, session_id: str, count: int) -> list[Message]:
        """The session's last ``count`` messages, in ``seq`` order."""
        rows = self.db.read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id"
            " ORDER BY seq DESC LIMIT :n",
            {"id": session_id, "n": max(0, count)},
        )
        return [message_from_row(row) for row in reversed(rows)]

    def messages_after(self, session_id: str, seq: int) -> list[Message]:
        """The session's messages with a ``seq`` above ``seq``, in order."""
        rows = self.db.read(
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
        rows = self.db.read("SELECT DISTINCT session_id FROM messages WHERE status = 'pending'")
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
        if not self.db.read(f"SELECT 1 FROM messages{where}", params):
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
