"""The chat page (``/``): conversations, the persona picker, streaming replies, the memory
panel (its content: ``backend.web.ui_panel``; the message controls: ``backend.web.ui_messages``).

A message is posted by an htmx form: the turn begins (the user message is stored, the
memories activated) and the answer is the user's bubble plus an assistant bubble whose
hidden stream element opens ``GET /ui/sessions/{sid}/turns/{tid}/stream`` with htmx's
SSE extension. That stream sends a ``recalled`` event first (the memory panel's
"Recalled" section for this reply, as soon as activation is done), then ``token`` events
(HTML-escaped text, appended as it arrives), one ``final`` event (the finished bubble:
markdown rendered, or the error with a retry button, and a loader that refreshes the
memory panel once the merge is done) and ``done``. The stop button closes the
EventSource: the engine records the reply as incomplete, and the page fetches the
finished bubble from ``GET .../turns/{tid}``.

Failure policy: bad input → 400/404/413 fragments shown inline; a model failure → an
inline error with a retry button in the reply's bubble; the panel never fails a page
(a missing report shows as "no turn yet").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import escape
from sse_starlette import EventSourceResponse, ServerSentEvent

from backend.engine.report import activation_part
from backend.engine.revisions import auto_title
from backend.engine.services import Services
from backend.engine.turn import SessionConflict, TurnRequest
from backend.personas import Persona, UnknownPersona
from backend.sessions.store import Message, ReplyVersions, Session
from backend.storable_text import unstorable_reason
from backend.web.ui_panel import panel_context
from backend.web.ui_support import (
    SECURITY_HEADERS,
    UiError,
    UiReader,
    UiWriter,
    fragment,
    redirect,
    render,
    services_of,
)
from backend.web.ui_turns import PendingTurn, TurnRegistry

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

SESSION_LIST_LIMIT = 200  # conversations shown in the sidebar
MAX_TITLE = 200
STOP_WAIT_S = 15.0  # how long the stop button's look-up waits for the stream to close
GONE = "the client went away"  # the engine's error for a reply cut short (turn_reply.GONE)


def registry(request: Request) -> TurnRegistry:
    """The app's registry of turns in flight, made on first use (it needs the engine,
    which the lifespan builds)."""
    turns: TurnRegistry | None = getattr(request.app.state, "ui_turns", None)
    if turns is None:
        turns = request.app.state.ui_turns = TurnRegistry(services_of(request).engine)
    return turns


def _now() -> datetime:
    return datetime.now(UTC)


def message_view(
    message: Message | None = None, *, retry_text: str | None = None, **fields: Any
) -> dict[str, Any]:
    """What ``_message.html`` shows of a stored message (or of ``fields``)."""
    view: dict[str, Any] = {
        "role": "assistant",
        "content": "",
        "status": "complete",
        "error": None,
        "created_at": _now(),
        "turn_id": None,
        "retry_text": retry_text,
        "id": None,  # the stored message's: its controls need it (backend.web.ui_messages)
        "versions": None,  # a regenerated reply's ReplyVersions
    }
    if message is not None:
        view.update(
            role=message.role,
            content=message.content,
            status=message.status,
            error=message.error,
            created_at=message.created_at,
            turn_id=message.turn_id,
            id=message.id,
        )
    view.update(fields)
    view["stopped"] = view["status"] == "incomplete" and view["error"] == GONE
    return view


def transcript_views(
    messages: Sequence[Message], versions: Mapping[int, ReplyVersions] | None = None
) -> list[dict[str, Any]]:
    views = []
    last_user: str | None = None
    for message in messages:
        if message.role == "user":
            last_user = message.content
        if message.role in ("user", "assistant"):
            retry = last_user if message.role == "assistant" else None
            found = (versions or {}).get(message.id)
            views.append(message_view(message, retry_text=retry, versions=found))
    return views


async def stored_views(services: Services, session_id: str) -> list[dict[str, Any]]:
    """The transcript's bubbles, with each regenerated reply's versions."""
    messages = await asyncio.to_thread(services.sessions.transcript, session_id)
    replies = [m.id for m in messages if m.role == "assistant"]
    versions = await asyncio.to_thread(services.sessions.reply_versions, replies)
    return transcript_views(messages, versions)


def persona_of(services: Services, session: Session) -> Persona:
    return services.personas.get(session.persona_id) or services.personas.default


async def session_or_404(services: Services, session_id: str, user: str) -> Session:
    session = await asyncio.to_thread(services.sessions.get_session, session_id, user)
    if session is None:
        raise UiError(404, "This conversation does not exist (it may have been deleted).")
    return session


async def _sessions(services: Services, user: str) -> list[Session]:
    return await asyncio.to_thread(services.sessions.list_sessions, user, None, SESSION_LIST_LIMIT)


@router.get("/", response_class=HTMLResponse)
async def chat_page(
    request: Request,
    auth: UiReader,
    session: str | None = None,
    new: bool = False,
    turn: str | None = None,
) -> Response:
    """The chat page; ``turn``: a turn begun elsewhere (an edit's branch) whose reply
    this page streams."""
    services = services_of(request)
    sessions = await _sessions(services, auth.user)
    current: Session | None = None
    if session:
        current = await session_or_404(services, session, auth.user)
    elif not new and sessions:
        current = sessions[0]
    context: dict[str, Any] = {
        "sessions": sessions,
        "current": current,
        "personas": list(services.personas),
        "default_persona": services.personas.default.id,
        "max_chars": services.settings.server.max_message_chars,
        "memory_warning": services.engine.memory_health.warning(),
    }
    if current is not None:
        views = await stored_views(services, current.id)
        entry = registry(request).get(turn, auth.user) if turn else None
        if entry is not None and not entry.claimed and entry.session_id == current.id:
            # Its bubbles stream in below the rest (``_turn.html``).
            user = next((v for v in views if v["turn_id"] == turn and v["role"] == "user"), None)
            views = [v for v in views if v["turn_id"] != turn]
            context.update(
                turn_id=turn, user_message=user, entry=entry, retitled=None, streaming=True
            )
        context.update(
            session_id=current.id,
            persona=persona_of(services, current),
            messages=views,
            panel=await panel_context(services, current.id),
        )
    return render(request, "chat.html", context)


@router.post("/ui/sessions")
async def create_session(
    request: Request, auth: UiWriter, persona: Annotated[str, Form(max_length=64)] = ""
) -> Response:
    services = services_of(request)
    try:
        chosen = services.personas.resolve(persona)
    except UnknownPersona:
        raise UiError(404, "There is no such persona.") from None
    created = await asyncio.to_thread(services.sessions.create_session, auth.user, chosen.id)
    log.info("ui: session %s created with persona %s", created.id, chosen.id)
    return redirect(request, f"/?session={created.id}")


def _session_list(request: Request, sessions: list[Session], current: str | None) -> Response:
    return render(request, "_session_list.html", {"sessions": sessions, "current_id": current})


def _page_session(request: Request) -> str | None:
    """The conversation open in the page that sent an htmx request."""
    url = request.headers.get("hx-current-url", "")
    values = parse_qs(urlsplit(url).query).get("session")
    return values[0] if values else None


@router.post("/ui/sessions/{session_id}/rename")
async def rename_session(
    request: Request,
    session_id: str,
    auth: UiWriter,
    title: Annotated[str, Form(max_length=MAX_TITLE)] = "",
) -> Response:
    services = services_of(request)
    await session_or_404(services, session_id, auth.user)
    await asyncio.to_thread(services.sessions.rename, session_id, auth.user, title.strip() or None)
    return _session_list(request, await _sessions(services, auth.user), _page_session(request))


@router.post("/ui/sessions/{session_id}/delete")
async def delete_session(request: Request, session_id: str, auth: UiWriter) -> Response:
    services = services_of(request)
    await asyncio.to_thread(services.sessions.delete_session, session_id, auth.user)
    log.info("ui: session %s deleted", session_id)
    current = _page_session(request)
    if current is None or current == session_id:
        return redirect(request, "/")
    return _session_list(request, await _sessions(services, auth.user), current)


@router.post("/ui/sessions/{session_id}/messages")
async def send_message(
    request: Request,
    session_id: str,
    auth: UiWriter,
    text: Annotated[str, Form()] = "",
) -> Response:
    services = services_of(request)
    limit = services.settings.server.max_message_chars
    if not text.strip():
        raise UiError(400, "Write a message first.")
    if len(text) > limit:
        raise UiError(413, f"The message is longer than {limit} characters.")
    reason = unstorable_reason(text)
    if reason is not None:
        raise UiError(400, f"The message {reason}.")
    session = await session_or_404(services, session_id, auth.user)
    try:  # the registry holds the turn until its stream ends (backend.web.ui_turns)
        entry = await registry(request).begin(
            TurnRequest(user_id=auth.user, text=text, session_id=session.id), text
        )
    except SessionConflict:
        raise UiError(404, "This conversation does not exist.") from None
    turn = entry.turn
    context: dict[str, Any] = {
        "user_message": await _stored_user(services, session.id, turn.turn_id, text),
        "persona": turn.persona,
        "session_id": session.id,
        "turn_id": turn.turn_id,
        "entry": entry,
        "retitled": None,
        "title": session.title,
    }
    if session.title is None:  # name the conversation after its first message
        title = auto_title(text)
        await asyncio.to_thread(services.sessions.rename, session.id, auth.user, title)
        context.update(retitled=await _sessions(services, auth.user), title=title)
    return render(request, "_turn.html", context)


async def _stored_user(
    services: Services, session_id: str, turn_id: str, text: str
) -> dict[str, Any]:
    """The bubble of a turn's user message, as stored (its controls need its id)."""
    rows = await asyncio.to_thread(services.sessions.tail, session_id, 4)
    found = [m for m in rows if m.turn_id == turn_id and m.role == "user"]
    if found:
        return message_view(found[-1])
    return message_view(role="user", content=text, turn_id=turn_id)


async def _final_context(
    services: Services, entry: PendingTurn, error: str | None = None
) -> dict[str, Any]:
    """The finished bubble of a streamed reply: the stored message (with its id and
    versions), and the stream's error where it had one."""
    turn = entry.turn
    message = await _stored_reply(
        services, entry.session_id, turn.turn_id, message_id=entry.message_id
    )
    if message["id"] is None:  # not stored (the database failed): what was streamed
        status = "complete" if turn.status == "complete" and error is None else "incomplete"
        message = message_view(
            content=turn.reply, status=status, error=error or turn.error, turn_id=turn.turn_id
        )
    elif error:
        message.update(status="incomplete", error=error, stopped=False)
    message["retry_text"] = entry.text
    return {"m": message, "persona": turn.persona, "session_id": entry.session_id}


async def _stored_reply(
    services: Services, session_id: str, turn_id: str, *, message_id: int | None = None
) -> dict[str, Any]:
    """The stored reply of a turn (or, for a regeneration, the message it redid)."""
    views = await stored_views(services, session_id)
    if message_id is not None:
        replies = [v for v in views if v["id"] == message_id]
    else:
        replies = [v for v in views if v["turn_id"] == turn_id and v["role"] == "assistant"]
    if replies:
        return replies[-1]
    return message_view(status="incomplete", error="this reply was not found", turn_id=turn_id)


@router.get("/ui/sessions/{session_id}/turns/{turn_id}/stream")
async def stream_turn(request: Request, session_id: str, turn_id: str, auth: UiReader) -> Response:
    services = services_of(request)
    session = await session_or_404(services, session_id, auth.user)
    turns = registry(request)
    entry = turns.claim(turn_id, auth.user)

    async def replay() -> AsyncIterator[ServerSentEvent]:
        # Already streamed (a reconnect) or unknown: the stored reply, as it is now.
        known = turns.get(turn_id, auth.user)
        redone = known.message_id if known is not None else None
        message = await _stored_reply(services, session.id, turn_id, message_id=redone)
        context = {"m": message, "persona": persona_of(services, session)}
        html = fragment(request, "_assistant_final.html", session_id=session.id, **context)
        yield ServerSentEvent(html, event="final")
        yield ServerSentEvent("end", event="done")

    async def live(entry: PendingTurn) -> AsyncIterator[ServerSentEvent]:
        # What was recalled is known before the first token: the panel shows it now, not
        # once the turn's report is merged (the hippocampus may take seconds more).
        activated = activation_part(entry.turn.activation)["activated"]
        yield ServerSentEvent(
            fragment(request, "_panel_recalled.html", activated=activated), event="recalled"
        )
        queue, pump = turns.pump(entry)
        error: str | None = None
        ended = False
        try:
            while True:
                kind, value = await queue.get()
                if kind == "token":
                    if value:
                        yield ServerSentEvent(str(escape(value)), event="token")
                    continue
                error = f"The model failed: {value}" if kind == "error" else None
                ended = True
                break
        finally:
            if not ended:  # the client went away (the stop button): stop the reply
                pump.cancel()
        final = await _final_context(services, entry, error)
        html = fragment(request, "_assistant_final.html", **final)
        yield ServerSentEvent(html, event="final")
        yield ServerSentEvent("end", event="done")

    events = replay() if entry is None else live(entry)
    headers = {k: v for k, v in SECURITY_HEADERS.items() if k != "Cache-Control"}
    return EventSourceResponse(events, ping=15, headers=headers)


@router.get("/ui/sessions/{session_id}/turns/{turn_id}", response_class=HTMLResponse)
async def finished_turn(
    request: Request, session_id: str, turn_id: str, auth: UiReader
) -> Response:
    """The finished bubble of a turn (after the stop button closed its stream)."""
    services = services_of(request)
    session = await session_or_404(services, session_id, auth.user)
    turns = registry(request)
    entry = turns.get(turn_id, auth.user)
    if entry is not None and await turns.wait_finished(entry, STOP_WAIT_S):
        context = await _final_context(services, entry)
    else:
        context = {
            "m": await _stored_reply(services, session.id, turn_id),
            "persona": persona_of(services, session),
            "session_id": session.id,
        }
    return render(request, "_assistant_final.html", context)


@router.get("/ui/sessions/{session_id}/panel", response_class=HTMLResponse)
async def memory_panel(
    request: Request, session_id: str, auth: UiReader, turn: str | None = None
) -> Response:
    """The memory panel; with ``turn``, once that turn's merge is done (bounded wait)."""
    services = services_of(request)
    session = await session_or_404(services, session_id, auth.user)
    report = None
    turns = registry(request)
    entry = turns.get(turn, auth.user) if turn else None
    if entry is not None:
        timeout = services.engine.settings.hippocampus_timeout_s + 10.0
        report = await turns.wait_merged(entry, timeout)
    if report is not None and entry is not None and entry.revision is not None:
        report = {**report, "removed": entry.revision["removed"], "kept": entry.revision["kept"]}
    panel = await panel_context(services, session.id, report)
    warning = services.engine.memory_health.warning()
    context = {"panel": panel, "memory_warning": warning, "oob": True}
    return render(request, "_panel.html", context)
