"""The chat page's message controls: regenerate a reply (its versions ‹ 1/3 ›), edit a
message and continue from it (a branch), delete a turn (issue 30).

- **Regenerate** (``POST …/messages/{id}/regenerate``, the last reply only) begins the
  same request a stateless client's regeneration is (``backend.engine.conversation_match``:
  the last user message again, whose reply the transcript ends with): the engine redoes
  the reply in place, with no second hippocampus run, and keeps the text it had as a
  version (``SessionStore.replace_message(keep_previous=True)``). The answer is a
  streaming bubble in place of the reply's, as a new turn's is (``_turn.html``).
- **Versions** (``POST …/messages/{id}/versions/{n}``, the last reply only): the version
  shown is the one in the transcript, and in short-term memory (``replace_reply``).
- **Edit** (``POST …/messages/{id}/edit``): what the old text formed alone is removed
  from memory (``backend.engine.revisions.retract_for_edit``); the new text is the first
  turn of a branch, a new conversation seeded with the one before the message
  (``edit_request``), whose hippocampus run forms its memories through the normal write
  path. The page goes to the branch, where the reply streams; the original
  conversation stays in the list as it was.
- **Delete** (``POST …/messages/{id}/delete``): the turn goes, and what only it formed
  (``delete_turn``). The conversation and the memory panel are shown again, the panel
  with what was removed and why.

Failure policy: an unknown conversation or message → 404; a reply that is not the last
one, or a turn whose memories are still being formed → 409 (try again); the long-term
store down while revising → 503, nothing changed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from backend.engine.conversation_match import ClientMessage, place, tail_needed
from backend.engine.revisions import (
    NotMergedYet,
    auto_title,
    branch_title,
    delete_turn,
    edit_request,
    retract_for_edit,
    save_revision_report,
)
from backend.engine.services import Services
from backend.engine.turn import SessionConflict, TurnRequest
from backend.sessions.store import Message, Session
from backend.storable_text import unstorable_reason
from backend.stores.vector_port import VectorStoreUnavailable
from backend.web.ui_chat import (
    SESSION_LIST_LIMIT,
    persona_of,
    registry,
    session_or_404,
    stored_views,
)
from backend.web.ui_panel import panel_context
from backend.web.ui_support import UiError, UiWriter, redirect, render, services_of

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

NOT_MERGED = "Its memories are still being formed. Try again in a moment."
STORE_DOWN = "The memory store cannot be reached, so nothing was changed. Try again later."


async def _message(
    services: Services, session: Session, message_id: int
) -> tuple[Message, list[Message]]:
    transcript = await asyncio.to_thread(services.sessions.transcript, session.id)
    found = next((m for m in transcript if m.id == message_id), None)
    if found is None:
        raise UiError(404, "This message does not exist (it may have been deleted).")
    return found, transcript


def _last_reply(transcript: list[Message], message: Message) -> Message:
    """``message`` when it is the conversation's last reply, with a question before it."""
    said = [m for m in transcript if m.role in ("user", "assistant")]
    if message.role != "assistant" or not said or said[-1].id != message.id:
        raise UiError(409, "Only the last reply can be regenerated or switched.")
    asked = [m for m in said if m.role == "user" and m.seq < message.seq]
    if not asked:
        raise UiError(409, "This reply answers no message of yours.")
    return asked[-1]


@router.post("/ui/sessions/{session_id}/messages/{message_id}/regenerate")
async def regenerate(
    request: Request, session_id: str, message_id: int, auth: UiWriter
) -> Response:
    services = services_of(request)
    session = await session_or_404(services, session_id, auth.user)
    message, transcript = await _message(services, session, message_id)
    asked = _last_reply(transcript, message)
    # What the engine will make of it (issue 15's matcher): a regeneration of this reply,
    # or nothing (never a new turn that repeats the message).
    client = (ClientMessage("user", asked.content),)
    rows = await asyncio.to_thread(services.sessions.tail, session.id, tail_needed(client))
    placement = place(
        rows, client, "turn", identified=True, whole_history=True,
        complete=len(rows) < tail_needed(client),
    )  # fmt: skip
    if placement is None or placement.target is None or placement.target.id != message.id:
        raise UiError(409, "This reply cannot be regenerated now; reload the page.")
    turn_request = TurnRequest(
        user_id=auth.user, text=asked.content, session_id=session.id, whole_history=True
    )
    try:
        entry = await registry(request).begin(turn_request, asked.content, message_id=message.id)
    except SessionConflict:
        raise UiError(404, "This conversation does not exist.") from None
    if entry.turn.kind != "regenerate":  # the conversation moved on meanwhile: a new turn
        entry.message_id = None
    log.info("ui: session %s: reply %d regenerated (%s)", session.id, message.id, entry.turn.kind)
    context: dict[str, Any] = {
        "user_message": None,
        "persona": entry.turn.persona,
        "session_id": session.id,
        "turn_id": entry.turn.turn_id,
        "entry": entry,
        "retitled": None,
    }
    return render(request, "_turn.html", context)


@router.post("/ui/sessions/{session_id}/messages/{message_id}/versions/{version}")
async def show_version(
    request: Request, session_id: str, message_id: int, version: int, auth: UiWriter
) -> Response:
    services = services_of(request)
    session = await session_or_404(services, session_id, auth.user)
    message, transcript = await _message(services, session, message_id)
    _last_reply(transcript, message)
    try:
        shown = await asyncio.to_thread(services.sessions.show_version, message.id, version)
    except KeyError:
        raise UiError(404, "This reply has no such version.") from None
    # Short-term memory follows the transcript: the next reply sees the version shown.
    services.engine.memory.replace_reply(session.id, message, shown.content)
    views = [v for v in await stored_views(services, session.id) if v["id"] == message.id]
    context = {"m": views[0], "persona": persona_of(services, session), "session_id": session.id}
    return render(request, "_message.html", context)


@router.post("/ui/sessions/{session_id}/messages/{message_id}/delete", response_class=HTMLResponse)
async def delete_message(
    request: Request, session_id: str, message_id: int, auth: UiWriter
) -> Response:
    services = services_of(request)
    session = await session_or_404(services, session_id, auth.user)
    message, _ = await _message(services, session, message_id)
    try:
        revision = await delete_turn(
            services.engine, session, message, merge_wait_s=_wait(services)
        )
    except NotMergedYet:
        raise UiError(409, NOT_MERGED) from None
    except VectorStoreUnavailable:
        raise UiError(503, STORE_DOWN) from None
    retitled = None
    if session.title is not None and session.title == auto_title(message.content):
        # The title was made from the deleted message: it goes too.
        left = await asyncio.to_thread(services.sessions.transcript, session.id)
        first = next((m.content for m in left if m.role == "user"), None)
        title = None if first is None else auto_title(first)
        await asyncio.to_thread(services.sessions.rename, session.id, auth.user, title)
        retitled = await asyncio.to_thread(
            services.sessions.list_sessions, auth.user, None, SESSION_LIST_LIMIT
        )
        session = await session_or_404(services, session.id, auth.user)
    context = {
        "retitled": retitled,
        "title": session.title or "New conversation",
        "messages": await stored_views(services, session.id),
        "persona": persona_of(services, session),
        "session_id": session.id,
        "panel": await panel_context(services, session.id),
        "memory_warning": services.engine.memory_health.warning(),
        "revision": revision.report(),
    }
    return render(request, "_messages.html", context)


@router.post("/ui/sessions/{session_id}/messages/{message_id}/edit")
async def edit_message(
    request: Request,
    session_id: str,
    message_id: int,
    auth: UiWriter,
    text: Annotated[str, Form()] = "",
) -> Response:
    services = services_of(request)
    limit = services.settings.server.max_message_chars
    if not text.strip():
        raise UiError(400, "Write the message first.")
    if len(text) > limit:
        raise UiError(413, f"The message is longer than {limit} characters.")
    reason = unstorable_reason(text)
    if reason is not None:
        raise UiError(400, f"The message {reason}.")
    session = await session_or_404(services, session_id, auth.user)
    message, transcript = await _message(services, session, message_id)
    if message.role != "user":
        raise UiError(409, "Only your own messages can be edited.")
    try:
        revision = await retract_for_edit(
            services.engine, session, message, merge_wait_s=_wait(services)
        )
    except NotMergedYet:
        raise UiError(409, NOT_MERGED) from None
    except VectorStoreUnavailable:
        raise UiError(503, STORE_DOWN) from None
    turn_request = edit_request(session, transcript, message, text)
    try:
        entry = await registry(request).begin(turn_request, text)
    except SessionConflict:  # pragma: no cover - a fresh random id
        raise UiError(409, "The branch could not be made; try again.") from None
    branch = entry.turn.session
    entry.revision = revision.report()
    await save_revision_report(services.engine, branch.id, revision)
    title = branch_title(session.title, message.content, text)
    await asyncio.to_thread(services.sessions.rename, branch.id, auth.user, title)
    log.info("ui: session %s: message %d edited into branch %s", session.id, message.id, branch.id)
    query = urlencode({"session": branch.id, "turn": entry.turn.turn_id})
    return redirect(request, f"/?{query}")


def _wait(services: Services) -> float:
    """How long a revision waits for the turn's memories to be formed."""
    return services.engine.settings.hippocampus_timeout_s + 10.0
