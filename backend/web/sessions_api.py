"""``/api/sessions``: the caller's conversations (list, read, rename, delete).

A session of another user reads as unknown (404, never 403): its existence is not
revealed. ``GET`` returns the whole transcript with the derived state (background,
short-term memory, the user's last emotion) and the per-turn memory reports.

``DELETE ?forget_memories=true`` also deletes the long-term memories the session created
(``source_session`` = this session) in the session's namespace. The store has no index
on ``source_session``, so this reads every memory of the namespace (``iter_all``): one
pass over the namespace, O(its memories), fine for one person's thousands. Memories the
session only reinforced, or that another session created, are kept.

Failure policy: bad input → 400; unknown session → 404; the long-term store unreachable
while forgetting → 503 and the session is kept (the call can be repeated).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query

from backend.config import PERSONA_ID_PATTERN
from backend.engine.services import Services
from backend.memory.types import Namespace
from backend.sessions.store import Session, SessionNotFound
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError
from backend.web.memories_api import MAX_OFFSET, store_errors
from backend.web.schemas import (
    ERROR_RESPONSES,
    MessageOut,
    SessionDeleted,
    SessionDetail,
    SessionId,
    SessionOut,
    SessionPage,
    SessionPatch,
    TurnReportOut,
)

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/sessions", tags=["sessions"], responses=ERROR_RESPONSES)

MAX_PAGE = 200


def _not_found() -> APIError:
    return APIError(404, "session not found", "session_not_found")


def _own_session(services: Services, session_id: str, user: str) -> Session:
    session = services.sessions.get_session(session_id, user)
    if session is None:
        raise _not_found()
    return session


@router.get("")
def list_sessions(
    user: UserDep,
    services: ServicesDep,
    persona_id: Annotated[str | None, Query(pattern=PERSONA_ID_PATTERN)] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> SessionPage:
    """The caller's sessions, most recently active first (optionally one persona's)."""
    rows = services.sessions.list_sessions(user, persona_id, limit=limit + 1, offset=offset)
    return SessionPage(
        items=[SessionOut.from_session(s) for s in rows[:limit]],
        offset=offset,
        limit=limit,
        has_more=len(rows) > limit,
    )


@router.get("/{session_id}")
def get_session(session_id: SessionId, user: UserDep, services: ServicesDep) -> SessionDetail:
    """The session with its transcript, derived state and turn reports."""
    store = services.sessions
    session = _own_session(services, session_id, user)
    try:
        state = store.load_state(session.id)
    except SessionNotFound:  # deleted meanwhile
        raise _not_found() from None
    transcript = store.transcript(session.id)
    return SessionDetail(
        **SessionOut.from_session(session).model_dump(),
        transcript=[MessageOut.from_message(m) for m in transcript],
        background=state.background,
        short_term=list(state.short_term),
        user_emotion=state.user_emotion,
        reports=[TurnReportOut.from_report(r) for r in store.turn_reports(session.id)],
        merged_through=state.merged_seq,
        unmerged=[MessageOut.from_message(m) for m in transcript if m.seq > state.merged_seq],
    )


@router.patch("/{session_id}")
def rename_session(
    session_id: SessionId, body: SessionPatch, user: UserDep, services: ServicesDep
) -> SessionOut:
    """Set (or, with an empty or null title, clear) the session's title."""
    session = services.sessions.rename(session_id, user, body.title)
    if session is None:
        raise _not_found()
    return SessionOut.from_session(session)


@router.delete("/{session_id}")
def delete_session(
    session_id: SessionId,
    user: UserDep,
    services: ServicesDep,
    forget_memories: Annotated[
        bool, Query(description="Also delete the long-term memories this session created.")
    ] = False,
) -> SessionDeleted:
    """Delete the session (transcript, state, reports) and, on request, its memories."""
    session = _own_session(services, session_id, user)
    forgotten = 0
    if forget_memories:
        ns = Namespace(user, session.persona_id)
        long_term = services.long_term
        with store_errors():
            created = [m.id for m in long_term.store.iter_all(ns) if m.source_session == session.id]
            forgotten = long_term.delete_memories(ns, created)
    if not services.sessions.delete_session(session.id, user):
        raise _not_found()
    log.info("session %s deleted (%d memories forgotten)", session.id, forgotten)
    return SessionDeleted(id=session.id, deleted=True, memories_deleted=forgotten)
