"""``/api/sessions``: the caller's conversations (list, read, rename, delete), and their
messages (delete a turn, edit a message and continue from it in a branch).

A session of another user reads as unknown (404, never 403): its existence is not
revealed. ``GET`` returns the whole transcript with the derived state (background,
short-term memory, the user's last emotion) and the per-turn memory reports.

``DELETE ?forget_memories=true`` also deletes the long-term memories the session created
(``source_session`` = this session) in the session's namespace. The store has no index
on ``source_session``, so this reads every memory of the namespace (``iter_all``): one
pass over the namespace, O(its memories), fine for one person's thousands. Memories the
session only reinforced, or that another session created, are kept.

``DELETE /{id}/messages/{seq}`` deletes a turn (a user message with its reply; a reply
alone) and ``POST /{id}/messages/{seq}/edit`` continues from an edited user message in a
branch, answered like a chat turn; either revises what the message formed: a memory
formed only from it is removed, one also formed from another message stays
(``backend.engine.revisions``). The answer says which, and why.

Failure policy: bad input → 400; unknown session or message → 404; a turn whose
memories are still being formed → 409 (repeat the call); the long-term store unreachable
while forgetting → 503 and the session is kept (the call can be repeated).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from backend.config import PERSONA_ID_PATTERN
from backend.engine.revisions import (
    NotMergedYet,
    Revision,
    branch_title,
    delete_turn,
    edit_request,
    retract_for_edit,
    save_revision_report,
)
from backend.engine.services import Services
from backend.llm.port import LLMError
from backend.memory.types import Namespace
from backend.sessions.store import Message, Session, SessionNotFound
from backend.stores.vector_port import VectorStoreUnavailable
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


# --- a session's messages (issue 30) ------------------------------------------------------

Seq = Annotated[int, Path(ge=1, description="The message's seq in the transcript.")]
NOT_MERGED = "the turn's memories are still being formed; repeat the request in a moment"


class RevisedOut(BaseModel):
    id: str
    content: str
    reason: str


class MessagesDeleted(BaseModel):
    deleted: list[int] = Field(description="The seqs of the messages deleted.")
    removed: list[RevisedOut] = Field(description="Memories formed only from them: deleted.")
    kept: list[RevisedOut] = Field(description="Memories also formed from other messages.")


class MessageEdit(BaseModel):
    content: str = Field(min_length=1, description="The message's new text.")


class MessageEdited(BaseModel):
    session_id: str = Field(description="The branch the conversation continues in.")
    reply: str
    status: str
    removed: list[RevisedOut] = Field(description="What the old text formed alone: deleted.")
    kept: list[RevisedOut]


def _revised(revision: Revision) -> dict[str, Any]:
    report = revision.report()
    return {"removed": report["removed"], "kept": report["kept"]}


async def _message(services: Services, session: Session, seq: int) -> tuple[Message, list[Message]]:
    transcript = await asyncio.to_thread(services.sessions.transcript, session.id)
    found = next((m for m in transcript if m.seq == seq), None)
    if found is None:
        raise APIError(404, "message not found", "message_not_found")
    return found, transcript


def _merge_wait(services: Services) -> float:
    return float(services.engine.settings.hippocampus_timeout_s) + 10.0


@router.delete("/{session_id}/messages/{seq}")
async def delete_message(
    session_id: SessionId, seq: Seq, user: UserDep, services: ServicesDep
) -> MessagesDeleted:
    """Delete a turn: a user message with its reply (a reply alone when ``seq`` is one),
    and the memories formed only from it."""
    session = await asyncio.to_thread(_own_session, services, session_id, user)
    message, _ = await _message(services, session, seq)
    try:
        revision = await delete_turn(
            services.engine, session, message, merge_wait_s=_merge_wait(services)
        )
    except NotMergedYet:
        raise APIError(409, NOT_MERGED, "not_merged_yet") from None
    except VectorStoreUnavailable:
        raise APIError(503, "the long-term store is unreachable", "store_unavailable") from None
    deleted = [m.seq for m in revision.messages]
    return MessagesDeleted(deleted=deleted, **_revised(revision))


@router.post("/{session_id}/messages/{seq}/edit")
async def edit_message(
    session_id: SessionId, seq: Seq, body: MessageEdit, user: UserDep, services: ServicesDep
) -> MessageEdited:
    """Continue from an edited user message: a branch (a new session seeded with the
    conversation before it) whose first turn is the new text, answered here; what the old
    text formed alone is removed from memory. The original session is left as it was."""
    limit = services.settings.server.max_message_chars
    if not body.content.strip():
        raise APIError(400, "the message is empty", "invalid_messages")
    if len(body.content) > limit:
        raise APIError(413, f"the message is longer than {limit} characters", "message_too_large")
    session = await asyncio.to_thread(_own_session, services, session_id, user)
    message, transcript = await _message(services, session, seq)
    if message.role != "user":
        raise APIError(400, "only a user message can be edited", "not_a_user_message")
    try:
        revision = await retract_for_edit(
            services.engine, session, message, merge_wait_s=_merge_wait(services)
        )
    except NotMergedYet:
        raise APIError(409, NOT_MERGED, "not_merged_yet") from None
    except VectorStoreUnavailable:
        raise APIError(503, "the long-term store is unreachable", "store_unavailable") from None
    request = edit_request(session, transcript, message, body.content)
    async with AsyncExitStack() as stack:
        turn = await stack.enter_async_context(services.engine.turn(request))
        await save_revision_report(services.engine, turn.session.id, revision)
        title = branch_title(session.title, message.content, body.content)
        await asyncio.to_thread(services.sessions.rename, turn.session.id, user, title)
        try:
            async for _ in turn.stream():
                pass
        except LLMError:  # stored as incomplete, with the reason: said in ``status``
            log.warning("session %s: the edited turn's reply failed", turn.session.id)
    return MessageEdited(
        session_id=turn.session.id, reply=turn.reply, status=turn.status, **_revised(revision)
    )
