"""A session's derived state and its turn reports: what each merge writes.

docs/architecture.md ("One turn", "The rule between turns"): ``background``,
``short_term`` and the last ``user_emotion`` are rewritten by each merge, which saves only
over the state it read (``merged_seq``; ``StaleMerge`` otherwise), and each turn gets a
memory report.

Mixed into ``SessionStore`` (``backend.sessions.store``), whose database and clock it
uses; its failure policy is the store's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from backend.clock import Clock
from backend.sessions.db import SessionDatabase
from backend.sessions.records import (
    SessionNotFound,
    SessionState,
    StaleMerge,
    TurnReport,
    parse_time,
    stamp,
)
from backend.storable_text import storable


class SessionDerivedState:
    """The derived-state columns of ``sessions`` and the ``turn_reports`` table."""

    db: SessionDatabase
    _clock: Clock

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
        rows = self.db.read(
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

    def left_unread(
        self, user_id: str, persona_id: str, *, besides: str, limit: int = 5
    ) -> list[tuple[str, tuple[dict[str, Any], ...]]]:
        """The user's other sessions with this persona whose ``missed`` turns no run has
        read (their last runs failed), the most recently active first: (id, missed)."""
        rows = self.db.read(
            "SELECT id, missed_turns FROM sessions WHERE user_id = :user AND persona_id ="
            " :persona AND id <> :besides AND missed_turns <> '[]'"
            " ORDER BY updated_at DESC, id LIMIT :limit",
            {"user": user_id, "persona": persona_id, "besides": besides, "limit": limit},
        )
        return [(row[0], tuple(json.loads(row[1]))) for row in rows]

    def take_missed(self, session_id: str, missed: Sequence[dict[str, Any]]) -> bool:
        """Empty the session's ``missed`` if it still holds exactly ``missed``: another
        session's run reads them now. False when they changed meanwhile (its own run, or
        another taker, got there first). The session's ``updated_at`` stays: it is not
        the user's activity."""
        stored = storable(json.dumps(list(missed), ensure_ascii=False))
        with self.db.write() as db:
            result = db.execute(
                text(
                    "UPDATE sessions SET missed_turns = '[]' WHERE id = :id"
                    " AND missed_turns = :stored"
                ),
                {"id": session_id, "stored": stored},
            )
        return result.rowcount > 0

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
        rows = self.db.read(
            "SELECT report FROM turn_reports WHERE session_id = :id AND turn_id = :turn",
            {"id": session_id, "turn": turn_id},
        )
        return json.loads(rows[0][0]) if rows else None

    def turn_reports(self, session_id: str) -> list[TurnReport]:
        """The session's turn reports, oldest first."""
        rows = self.db.read(
            "SELECT session_id, turn_id, report, created_at FROM turn_reports"
            f" WHERE session_id = :id ORDER BY created_at, {self.db.dialect.insertion_order}",
            {"id": session_id},
        )
        return [TurnReport(row[0], row[1], json.loads(row[2]), parse_time(row[3])) for row in rows]
