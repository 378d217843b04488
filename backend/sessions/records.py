"""The session store's records: sessions, messages, derived state, turn reports.

Frozen dataclasses handed out by ``backend.sessions.store.SessionStore``, the error
types of its API, and how a database row becomes a record (timestamps are fixed-width
UTC ISO-8601 text in both backends, so text order is time order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Row

Role = Literal["user", "assistant", "system", "tool"]
Status = Literal["complete", "incomplete", "pending"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
STATUSES: tuple[str, ...] = ("complete", "incomplete", "pending")
MAX_SESSION_ID = 200  # ids come from clients (Conversation-Id); keep them bounded
INTERRUPTED = "interrupted: the server stopped before the reply was finished"


class StaleMerge(Exception):
    """A merge found the session merged further than it expected: its turns were merged
    by another worker, and its result must not land (``SessionStore.save_state``)."""

    def __init__(self, session_id: str, expected: int | None, found: int) -> None:
        super().__init__(f"session {session_id}: merged through {found}, expected {expected}")
        self.session_id, self.expected, self.found = session_id, expected, found


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
    """The derived state the hippocampus rewrites each turn (docs/architecture.md)."""

    background: str = ""
    short_term: tuple[dict[str, Any], ...] = ()
    user_emotion: dict[str, Any] | None = None
    missed: tuple[dict[str, Any], ...] = ()  # trimmed while the hippocampus was failing
    merged_seq: int = 0  # the last message seq folded in; later messages are not merged yet


@dataclass(frozen=True, slots=True)
class TurnReport:
    session_id: str
    turn_id: str
    report: dict[str, Any]
    created_at: datetime


def stamp(moment: datetime) -> str:
    """Fixed-width UTC ISO-8601 (always microseconds), so text order is time order."""
    if moment.tzinfo is None:
        raise ValueError("the clock must return timezone-aware datetimes")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


# Read columns by name: a later migration may add columns the row types do not have.
SESSION_COLUMNS = "id, user_id, persona_id, title, created_at, updated_at"
MESSAGE_COLUMNS = "id, session_id, seq, role, content, created_at, status, error, turn_id"


def session_from_row(row: Row[Any]) -> Session:
    data = dict(row._mapping)
    return Session(**data | {k: parse_time(data[k]) for k in ("created_at", "updated_at")})


def message_from_row(row: Row[Any]) -> Message:
    data = dict(row._mapping)
    return Message(**data | {"created_at": parse_time(data["created_at"])})


def check_choice(value: str, allowed: Sequence[str], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)} (got {value!r})")
