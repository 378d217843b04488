"""A reply's alternatives: the texts it had, regenerated (issue 30; SillyTavern's swipes).

A regeneration replaces a reply in place (``backend.engine.turn_reply``); with
``keep_previous`` its earlier text is kept here first, as version 1, and the new one is
the next version. The transcript always holds the version shown
(``messages.shown_version``); choosing another (``show_version``) copies it into the
transcript, so everything that reads the transcript (the next prompt, the client
alignment of ``backend.engine.conversation_match``) sees the one the user sees.

Mixed into ``SessionStore`` (``backend.sessions.store``), whose database and clock it
uses; its failure policy is the store's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, text

from backend.clock import Clock
from backend.sessions.db import SessionDatabase
from backend.sessions.records import MESSAGE_COLUMNS, Message, message_from_row, stamp
from backend.storable_text import storable


@dataclass(frozen=True, slots=True)
class ReplyVersions:
    """A reply's versions: how many, and which one the transcript shows (1-based)."""

    count: int
    shown: int


def keep_version(
    db: Connection, row: Mapping[str, Any], content: str, status: str, error: str | None,
    now: str,
) -> int:  # fmt: skip
    """Inside ``replace_message``'s transaction: the reply ``row`` (as it is before the
    replacement) kept as a version if it is not one yet (unless it is empty: a failed
    reply), and its new text added as the next version; returns the new version's number."""
    message_id = int(row["id"])
    count = int(
        db.execute(
            text("SELECT COUNT(*) FROM reply_versions WHERE message_id = :id"), {"id": message_id}
        ).scalar_one()
    )
    insert = text(
        "INSERT INTO reply_versions (message_id, version, content, status, error, created_at)"
        " VALUES (:id, :version, :content, :status, :error, :at)"
    )
    if count == 0 and str(row["content"]).strip():  # an empty failed reply is no version
        db.execute(
            insert,
            {"id": message_id, "version": 1, "content": row["content"], "status": row["status"],
             "error": row["error"], "at": row["created_at"]},
        )  # fmt: skip
        count = 1
    db.execute(
        insert,
        {"id": message_id, "version": count + 1, "content": content, "status": status,
         "error": error, "at": now},
    )  # fmt: skip
    return count + 1


class SessionReplyVersions:
    """The ``reply_versions`` table."""

    db: SessionDatabase
    _clock: Clock

    def reply_versions(self, message_ids: Iterable[int]) -> dict[int, ReplyVersions]:
        """The replies among ``message_ids`` that have versions."""
        ids = [int(i) for i in dict.fromkeys(message_ids)]
        if not ids:
            return {}
        keys = {f"m{i}": value for i, value in enumerate(ids)}
        rows = self.db.read(
            "SELECT m.id, m.shown_version, COUNT(v.version) FROM messages m"
            " JOIN reply_versions v ON v.message_id = m.id"
            f" WHERE m.id IN ({', '.join(':' + k for k in keys)})"
            " GROUP BY m.id, m.shown_version",
            keys,
        )
        return {
            int(mid): ReplyVersions(int(count), int(shown or count)) for mid, shown, count in rows
        }

    def version_texts(self, message_id: int) -> list[str]:
        """The texts of a reply's versions, in order (empty when it has none)."""
        rows = self.db.read(
            "SELECT content FROM reply_versions WHERE message_id = :id ORDER BY version",
            {"id": message_id},
        )
        return [row[0] for row in rows]

    def show_version(self, message_id: int, version: int) -> Message:
        """The transcript shows this version of the reply from now on. Raises ``KeyError``
        for a reply or version that does not exist."""
        select = text(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = :id")
        with self.db.write() as db:
            found = db.execute(
                text(
                    "SELECT content, status, error FROM reply_versions"
                    " WHERE message_id = :id AND version = :version"
                ),
                {"id": message_id, "version": version},
            ).first()
            if found is None:
                raise KeyError((message_id, version))
            content, status, error = found
            db.execute(
                text(
                    "UPDATE messages SET content = :c, status = :s, error = :e,"
                    " shown_version = :v WHERE id = :id"
                ),
                {"c": storable(content), "s": status, "e": error, "v": version, "id": message_id},
            )
            row = db.execute(select, {"id": message_id}).one()
            db.execute(
                text("UPDATE sessions SET updated_at = :now WHERE id = :sid"),
                {"now": stamp(self._clock.now()), "sid": row._mapping["session_id"]},
            )
        return message_from_row(row)
