"""A durable outbox for long-term writes the vector store could not take (it was down).

When the store raises ``VectorStoreUnavailable`` during a turn's save gate, the turn's
remaining candidates are appended here, with everything the gate needs to run again
later: the namespace, the ids of the memories recalled into that turn (the echo rule),
the source session and the persona's gate thresholds. ``backend.longterm.outbox_replay``
replays the entries, oldest first, through ``LongTermMemory.write`` once the store
answers again; deduplication and supersession are decided then, against the store as it
is at replay time (running the gate later is correct: it only ever compares with what
is stored).

Storage: one SQLite file in the data directory (``outbox.sqlite3``), WAL journal and
``synchronous=FULL``: an ``append`` that returned is on disk, so a crash or restart right
after the turn loses nothing; the queue is replayed at the next start. Each entry keeps
how many of its candidates were already applied (``done``), advanced after each one, so
a replay cut short by another outage resumes where it stopped instead of applying a
candidate twice.

Failure policy: ``append`` raises ``OutboxError`` when the file cannot be written (disk
full, read-only): the caller reports the write as failed (nothing else can keep it).
An entry that fails for a reason other than an outage ``MAX_ATTEMPTS`` times is parked
(``dead``), kept in the file for inspection and counted by ``counts``; it no longer
blocks the entries behind it. An unreadable file at open raises ``OutboxError``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from backend.memory.types import About, Candidate, Emotion, GatePolicy, Namespace

# An entry failing this often for a reason other than an outage is a poison entry (bad
# data, a bug): parked so that the queue behind it drains. Five covers transient errors.
MAX_ATTEMPTS = 5

_SCHEMA = """CREATE TABLE IF NOT EXISTS pending_writes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    persona_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    dead INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    queued_at TEXT NOT NULL
)"""


class OutboxError(RuntimeError):
    """The outbox file cannot be opened or written."""


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """One turn's candidates waiting for the store, with what the gate needs to decide."""

    namespace: Namespace
    candidates: tuple[Candidate, ...]
    queued_at: datetime
    recalled_ids: tuple[str, ...] = ()
    source_session: str | None = None
    gate_policy: GatePolicy | None = None


@dataclass(frozen=True, slots=True)
class QueuedEntry:
    id: int
    write: PendingWrite
    done: int  # candidates already applied
    attempts: int


def _candidate_dict(c: Candidate) -> dict[str, Any]:
    data = asdict(c)
    data["keywords"] = list(c.keywords)
    return data


def _candidate(data: dict[str, Any]) -> Candidate:
    emotion = data.get("emotion")
    return Candidate(
        content=str(data["content"]),
        category=str(data.get("category", "general")),
        importance=float(data.get("importance", 0.5)),
        confidence=float(data.get("confidence", 0.5)),
        subject=data.get("subject", "user"),
        keywords=tuple(data.get("keywords") or ()),
        emotion=None if not emotion else Emotion(emotion["label"], float(emotion["intensity"])),
        supersedes=data.get("supersedes"),
        about=tuple(
            About(a.get("name"), str(a["relation"]))
            for a in data.get("about") or ()
            if isinstance(a, dict) and a.get("relation")
        ),
    )


def encode(write: PendingWrite) -> str:
    return json.dumps(
        {
            "candidates": [_candidate_dict(c) for c in write.candidates],
            "recalled_ids": list(write.recalled_ids),
            "source_session": write.source_session,
            "gate_policy": None if write.gate_policy is None else asdict(write.gate_policy),
        },
        ensure_ascii=False,
    )


def decode(ns: Namespace, payload: str, queued_at: str) -> PendingWrite:
    data = json.loads(payload)
    policy = data.get("gate_policy")
    return PendingWrite(
        namespace=ns,
        candidates=tuple(_candidate(c) for c in data["candidates"]),
        queued_at=datetime.fromisoformat(queued_at),
        recalled_ids=tuple(data.get("recalled_ids") or ()),
        source_session=data.get("source_session"),
        gate_policy=None if policy is None else GatePolicy(**policy),
    )


class WriteOutbox:
    """The queue on SQLite (see the module doc). Thread-safe; calls are short."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # FULL: the WAL is synced at every commit, so an acknowledged append survives
            # a power cut, not only a process crash (NORMAL only promises the latter).
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise OutboxError(f"cannot open the write outbox {path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _run(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            try:
                return self._db.execute(sql, args)
            except sqlite3.Error as exc:
                raise OutboxError(f"write outbox {self.path}: {exc}") from exc

    def append(self, write: PendingWrite) -> int:
        """Queue ``write`` durably; returns its entry id. ``OutboxError`` if it cannot."""
        cursor = self._run(
            "INSERT INTO pending_writes (user_id, persona_id, payload, queued_at)"
            " VALUES (?, ?, ?, ?)",
            (
                write.namespace.user_id,
                write.namespace.persona_id,
                encode(write),
                write.queued_at.isoformat(),
            ),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def pending(self, limit: int = 100) -> list[QueuedEntry]:
        """The oldest live entries, in the order they were queued. A row that cannot be
        decoded (written by a bug or edited by hand) is parked at once, never returned."""
        rows = self._run(
            "SELECT id, user_id, persona_id, payload, done, attempts, queued_at"
            " FROM pending_writes WHERE dead = 0 ORDER BY id LIMIT ?",
            (limit,),
        ).fetchall()
        entries = []
        for row in rows:
            try:
                write = decode(Namespace(row[1], row[2]), row[3], row[6])
            except (ValueError, KeyError, TypeError) as exc:
                self._run(
                    "UPDATE pending_writes SET dead = 1, last_error = ? WHERE id = ?",
                    (f"undecodable: {type(exc).__name__}: {exc}"[:500], row[0]),
                )
                continue
            entries.append(QueuedEntry(row[0], write, row[4], row[5]))
        return entries

    def has_pending(self, ns: Namespace) -> bool:
        """Whether ``ns`` has live entries (newer writes must queue behind them)."""
        row = self._run(
            "SELECT 1 FROM pending_writes WHERE dead = 0 AND user_id = ? AND persona_id = ?"
            " LIMIT 1",
            (ns.user_id, ns.persona_id),
        ).fetchone()
        return row is not None

    def advance(self, entry_id: int, done: int) -> None:
        """Record that the first ``done`` candidates of the entry are applied."""
        self._run("UPDATE pending_writes SET done = ? WHERE id = ?", (done, entry_id))

    def remove(self, entry_id: int) -> None:
        self._run("DELETE FROM pending_writes WHERE id = ?", (entry_id,))

    def failed(self, entry_id: int, error: str) -> bool:
        """Count a non-outage failure; returns whether the entry is now parked (dead)."""
        self._run(
            "UPDATE pending_writes SET attempts = attempts + 1, last_error = ?,"
            " dead = (attempts + 1 >= ?) WHERE id = ?",
            (error[:500], MAX_ATTEMPTS, entry_id),
        )
        row = self._run("SELECT dead FROM pending_writes WHERE id = ?", (entry_id,)).fetchone()
        return bool(row and row[0])

    def counts(self) -> tuple[int, int]:
        """``(candidates waiting, entries parked)``: what health reports."""
        row = self._run(
            "SELECT COALESCE(SUM(CASE WHEN dead = 0 THEN json_array_length(payload, '$.candidates')"
            " - done END), 0), COALESCE(SUM(dead), 0) FROM pending_writes"
        ).fetchone()
        return int(row[0]), int(row[1])
