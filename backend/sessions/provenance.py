"""Where each long-term memory came from: the user messages it was formed from (issue 30).

One row of ``memory_sources`` per (memory, message): written by the merge when the save
gate writes or reinforces a memory (``backend.engine.merge``), read by the memories page
("from: …"), and revised when the user deletes or edits a message
(``backend.engine.revisions``): a memory none of whose sources is left is removed.

A row whose ``message_id`` is NULL stands for a source that is no message of this
store: the memory existed before a message reinforced it (its first source is unknown),
or the message's conversation was deleted (the foreign key sets it NULL). Such a row is
never retracted, so such a memory is never removed for want of support. Memories with
no row at all (formed before schema version 6, written by a memory tool, imported,
created by hand) are left alone by every revision.

Mixed into ``SessionStore`` (``backend.sessions.store``), whose database and clock it
uses; its failure policy is the store's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from backend.clock import Clock
from backend.sessions.db import SessionDatabase
from backend.sessions.records import parse_time, stamp


@dataclass(frozen=True, slots=True)
class SourceLink:
    """A memory the gate wrote (``existing`` False) or reinforced (True), and the message
    ids it was formed from."""

    memory_id: str
    message_ids: tuple[int, ...]
    existing: bool = False


@dataclass(frozen=True, slots=True)
class MemorySource:
    """One source of a memory, as the memories page shows it; ``message_id`` None: a
    source that is no message of the store (module docstring)."""

    message_id: int | None
    session_id: str | None = None
    session_title: str | None = None
    seq: int | None = None
    content: str | None = None
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Support:
    """A memory formed from some of the messages being deleted or edited: ``alone`` when
    no other source is left (it goes), else it stays."""

    user_id: str
    persona_id: str
    memory_id: str
    alone: bool


def _in(column: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``column IN (:in_0, :in_1...)`` and its parameters (an empty list matches nothing)."""
    if not values:
        return "1 = 0", {}
    keys = {f"in_{i}": value for i, value in enumerate(values)}
    return f"{column} IN ({', '.join(':' + k for k in keys)})", keys


class SessionProvenance:
    """The ``memory_sources`` table."""

    db: SessionDatabase
    _clock: Clock

    def record_sources(self, user_id: str, persona_id: str, links: Sequence[SourceLink]) -> int:
        """Add the sources of memories just written or reinforced; returns the rows added.

        A reinforced memory with no row yet (its first source is unknown) gets a NULL row
        first: it was not formed from this message alone. A (memory, message) pair is
        stored once."""
        added = 0
        now = stamp(self._clock.now())
        with self.db.write() as db:
            for link in links:
                have = self._message_ids(db, user_id, persona_id, link.memory_id)
                wanted = list(dict.fromkeys(link.message_ids))
                if link.existing and not have and wanted:
                    wanted.insert(0, None)  # type: ignore[arg-type]
                for message_id in wanted:
                    if message_id is not None and message_id in have:
                        continue
                    if message_id is None and None in have:
                        continue
                    db.execute(
                        text(
                            "INSERT INTO memory_sources (user_id, persona_id, memory_id,"
                            " message_id, created_at) VALUES (:user, :persona, :memory,"
                            " :message, :now)"
                        ),
                        {"user": user_id, "persona": persona_id, "memory": link.memory_id,
                         "message": message_id, "now": now},
                    )  # fmt: skip
                    have.add(message_id)
                    added += 1
        return added

    @staticmethod
    def _message_ids(db: Connection, user_id: str, persona_id: str, memory_id: str) -> set[Any]:
        rows = db.execute(
            text(
                "SELECT message_id FROM memory_sources WHERE user_id = :user AND"
                " persona_id = :persona AND memory_id = :memory"
            ),
            {"user": user_id, "persona": persona_id, "memory": memory_id},
        ).fetchall()
        return {None if row[0] is None else int(row[0]) for row in rows}

    def memory_sources(
        self, user_id: str, persona_id: str, memory_ids: Iterable[str]
    ) -> dict[str, list[MemorySource]]:
        """The sources of each memory that has any, oldest message first (memories
        without provenance are absent)."""
        ids = list(dict.fromkeys(memory_ids))
        out: dict[str, list[MemorySource]] = {}
        for start in range(0, len(ids), 200):  # bounded IN lists
            where, params = _in("s.memory_id", ids[start : start + 200])
            rows = self.db.read(
                "SELECT s.memory_id, s.message_id, m.session_id, x.title, m.seq, m.content,"
                " m.created_at FROM memory_sources s"
                " LEFT JOIN messages m ON m.id = s.message_id"
                " LEFT JOIN sessions x ON x.id = m.session_id"
                f" WHERE s.user_id = :user AND s.persona_id = :persona AND {where}"
                " ORDER BY m.created_at, s.message_id",
                {"user": user_id, "persona": persona_id, **params},
            )
            for memory_id, message_id, session_id, title, seq, content, created in rows:
                out.setdefault(memory_id, []).append(
                    MemorySource(
                        None if message_id is None else int(message_id),
                        session_id,
                        title,
                        None if seq is None else int(seq),
                        content,
                        None if created is None else parse_time(created),
                    )
                )
        return out

    def supported_by(self, message_ids: Sequence[int]) -> list[Support]:
        """The memories formed from any of ``message_ids``, and whether they have another
        source (another message, or a NULL row) besides them."""
        ids = [int(i) for i in dict.fromkeys(message_ids)]
        if not ids:
            return []
        where, params = _in("message_id", ids)
        formed = self.db.read(
            f"SELECT DISTINCT user_id, persona_id, memory_id FROM memory_sources WHERE {where}",
            params,
        )
        out: list[Support] = []
        for user_id, persona_id, memory_id in formed:
            rows = self.db.read(
                "SELECT message_id FROM memory_sources WHERE user_id = :user AND"
                " persona_id = :persona AND memory_id = :memory",
                {"user": user_id, "persona": persona_id, "memory": memory_id},
            )
            others = [r[0] for r in rows if r[0] is None or int(r[0]) not in ids]
            out.append(Support(user_id, persona_id, memory_id, alone=not others))
        return out

    def same_said(
        self, session_ids: Sequence[str], contents: Sequence[str], *, besides: Sequence[int] = ()
    ) -> list[int]:
        """The ids of the user messages of ``session_ids`` whose text is one of
        ``contents`` (the copies a branch starts with), ``besides`` left out."""
        if not session_ids or not contents:
            return []
        where_s, params_s = _in("session_id", list(session_ids))
        keys = {f"c_{i}": value for i, value in enumerate(dict.fromkeys(contents))}
        rows = self.db.read(
            f"SELECT id FROM messages WHERE {where_s} AND role = 'user'"
            f" AND content IN ({', '.join(':' + k for k in keys)})",
            {**params_s, **keys},
        )
        skip = {int(i) for i in besides}
        return [int(row[0]) for row in rows if int(row[0]) not in skip]

    def retract_sources(self, message_ids: Sequence[int]) -> int:
        """These messages no longer count as sources (deleted, or edited into another
        text); returns the rows removed."""
        where, params = _in("message_id", [int(i) for i in dict.fromkeys(message_ids)])
        with self.db.write() as db:
            result = db.execute(text(f"DELETE FROM memory_sources WHERE {where}"), params)
        return result.rowcount

    def forget_sources(self, user_id: str, persona_id: str, memory_ids: Sequence[str]) -> int:
        """Drop the rows of memories that are gone (deleted by the user or a revision)."""
        where, params = _in("memory_id", list(dict.fromkeys(memory_ids)))
        with self.db.write() as db:
            result = db.execute(
                text(
                    "DELETE FROM memory_sources WHERE user_id = :user AND persona_id ="
                    f" :persona AND {where}"
                ),
                {"user": user_id, "persona": persona_id, **params},
            )
        return result.rowcount
