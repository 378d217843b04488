"""The NeMo Agent Toolkit UI's WebSocket mode at ``/websocket`` (docs/api.md).

Client → server: one JSON text frame per ``user_message``; its shape, and how it is read
into a turn or refused, is ``backend.web.websocket_messages``'s. This module is the
connection: it receives the messages, runs a turn per message (``TurnEngine.turn``, as
the HTTP routes do) and sends the answers.

Server → client, every message with a non-empty ``conversation_id`` (the client's, or a
new id when it sent none; it is also the session id of the turn) and ``parent_id`` (the
user message's ``id``). Each user message is answered by, in order:

- ``system_intermediate_message`` ``{"content": {"name": "Memory activation", "payload"}}``:
  the memories recalled for the reply (``payload`` is a JSON string);
- ``system_response_message`` ``"status": "in_progress"`` ``{"content": {"text": chunk}}``
  per chunk — for the batch schema types (``chat``, ``generate``) one with the whole
  reply. Whitespace at the end of a chunk is sent at the start of the next one, and a
  whitespace-only chunk with the next (UI versions before
  NVIDIA/NeMo-Agent-Toolkit-UI@0a11215, 2026-04-08, trimmed the first chunk and dropped
  whitespace-only ones: "Hello, my friend " then "world." showed "Hello, my
  friendworld.");
- ``system_intermediate_message`` ``"Memory report"``: what the turn's merge wrote;
- ``system_response_message`` ``"status": "complete"``, empty text, always last.

The UI appends only ``in_progress`` text (utils/chatTransform.ts:19-28; ``complete`` is
skipped: Chat.tsx:807-810) and, 200 ms after ``complete``, drops everything else for that
message (Chat.tsx:744-762), so the memory report comes *before* ``complete``, as one more
intermediate step: the UI merges it into the reply's steps block (Chat.tsx:616-650) like
the activation. Waiting for it is bounded by ``turn_steps.MEMORY_REPORT_WAIT_S`` (10 s; its
comment gives the reasons) — the reply text is on screen meanwhile; a merge still running
then is reported as pending. The alternative, a report after ``complete``, is lost in the
UI, or worse: once the user has sent the next message it would open a stray reply bubble.

Errors: ``error_message`` ``{"content": {"code", "message", "details"}}``, the shape the UI
validates (types/websocket.ts:60-67, :155-172) and renders as a red box under the reply
(components/Chat/ChatMessage.tsx:397-414). The box is not drawn on a reply with no text
and no steps (ChatMessage.tsx:115), and older UIs reject the type, so the error is also
sent as ``in_progress`` text — ``[the chat model failed: ...]``, after two newlines when a
partial reply precedes it — and then ``complete``, which ends the UI's spinner
(Chat.tsx:753-762). That holds for every error: a malformed message (not JSON, wrong
type, no text, oversize: nothing runs, the socket stays open), an unknown persona, a model
failing mid-reply (the partial reply is stored marked incomplete).

Auth: with API keys configured the key comes from ``Authorization: Bearer`` or
``?api_key=`` (the UI's WebSocket settings can add either: Chat.tsx:382-451); without a
valid one the server accepts the handshake and closes at once with code 1008 (policy
violation) and a reason, so browser clients can tell why. Turns of different
conversations run concurrently (a task per message); turns of one conversation run in
order. When the client leaves, its turns in flight are cancelled (their replies are
stored marked incomplete).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from backend.engine.report import activation_part
from backend.engine.services import Services
from backend.engine.turn import SessionConflict, Turn, TurnRequest
from backend.llm.port import LLMError
from backend.personas import UnknownPersona
from backend.web.deps import websocket_user
from backend.web.turn_steps import memory_report
from backend.web.websocket_messages import (
    BadMessage,
    UserMessage,
    client_conversation_id,
    parse_user_message,
)

log = logging.getLogger(__name__)
router = APIRouter(tags=["websocket"])

POLICY_VIOLATION = 1008  # RFC 6455 close code
MAX_IN_FLIGHT = 32  # turns one socket may run at once; more are refused, not queued
REFUSED = "nothing was stored; the connection stays open"  # details of a refused message


class _Gone(Exception):
    """The socket is closed: nothing more can be sent."""


class _Ordering:
    """Per-conversation locks of one socket, dropped when nobody holds or awaits them."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, conversation_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(conversation_id, (asyncio.Lock(), 0))
        self._locks[conversation_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[conversation_id]
            if users == 1:
                del self._locks[conversation_id]
            else:
                self._locks[conversation_id] = (lock, users - 1)


class Connection:
    """One client socket: reads messages, runs a task per turn, serialises sends."""

    def __init__(self, websocket: WebSocket, services: Services, user: str) -> None:
        self.websocket = websocket
        self.services = services
        self.user = user
        self.default_persona = websocket.query_params.get("persona") or None
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._ordering = _Ordering()

    # --- sending -----------------------------------------------------------------------

    def _envelope(
        self, kind: str, conversation_id: str, parent_id: str | None, **fields: Any
    ) -> dict[str, Any]:
        return {
            "type": kind,
            "id": uuid.uuid4().hex,
            "parent_id": parent_id,
            "conversation_id": conversation_id,
            **fields,
            "timestamp": self.services.clock.now().isoformat(),
        }

    async def _send(self, payload: dict[str, Any]) -> None:
        async with self._send_lock:
            try:
                await self.websocket.send_text(json.dumps(payload, ensure_ascii=False))
            except (WebSocketDisconnect, RuntimeError, OSError) as exc:
                raise _Gone from exc

    async def send_error(
        self,
        conversation_id: str,
        parent_id: str | None,
        code: str,
        message: str,
        details: str,
        *,
        said: bool = False,
    ) -> None:
        """The error (``_send_failure``), then ``complete``: the message's answer ends."""
        await self._send_failure(conversation_id, parent_id, code, message, details, said=said)
        await self._send_text(conversation_id, parent_id, "", "complete")

    async def _send_failure(
        self,
        conversation_id: str,
        parent_id: str | None,
        code: str,
        message: str,
        details: str,
        *,
        said: bool = False,
    ) -> None:
        """The error as text the UI shows, then as an ``error_message`` (module docstring).
        ``said``: reply text went out before (a newline pair first)."""
        text = ("\n\n" if said else "") + f"[{message}]"
        await self._send_text(conversation_id, parent_id, text, "in_progress")
        content = {"code": code, "message": message, "details": details}
        await self._send(
            self._envelope(
                "error_message", conversation_id, parent_id, status="complete", content=content
            )
        )

    async def _send_step(self, msg: UserMessage, name: str, payload: Any) -> None:
        content = {"name": name, "payload": json.dumps(payload, ensure_ascii=False)}
        await self._send(
            self._envelope(
                "system_intermediate_message",
                msg.conversation_id,
                msg.id,
                status="complete",
                content=content,
            )
        )

    async def _send_text(
        self, conversation_id: str, parent_id: str | None, text: str, status: str
    ) -> None:
        await self._send(
            self._envelope(
                "system_response_message",
                conversation_id,
                parent_id,
                status=status,
                content={"text": text},
            )
        )

    # --- receiving ---------------------------------------------------------------------

    async def serve(self) -> None:
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = (message.get("bytes") or b"").decode("utf-8", errors="replace")
                await self._dispatch(raw)
        except _Gone:
            pass
        finally:
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _dispatch(self, raw: str) -> None:
        settings = self.services.settings.server
        conversation_id: str | None = None
        parent_id: str | None = None
        try:
            if len(raw) > settings.max_body_bytes:
                raise BadMessage(
                    "request_too_large",
                    f"the message is larger than {settings.max_body_bytes} bytes",
                )
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
                raise BadMessage("invalid_json", "the message is not valid JSON") from None
            if not isinstance(data, dict):
                raise BadMessage("invalid_message", "the message must be a JSON object")
            if isinstance(data.get("id"), str | int):
                parent_id = str(data["id"])
            conversation_id = client_conversation_id(data)
            msg = parse_user_message(
                data,
                conversation_id or uuid.uuid4().hex,
                self.default_persona,
                settings.max_message_chars,
            )
        except BadMessage as exc:
            await self.send_error(
                conversation_id or uuid.uuid4().hex, parent_id, exc.code, exc.message, REFUSED
            )
            return
        if len(self._tasks) >= MAX_IN_FLIGHT:
            await self.send_error(
                msg.conversation_id,
                msg.id,
                "too_many_requests",
                f"at most {MAX_IN_FLIGHT} turns may run at once on one connection",
                REFUSED,
            )
            return
        task = asyncio.create_task(self._run_turn(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- one turn ----------------------------------------------------------------------

    async def _run_turn(self, msg: UserMessage) -> None:
        """One message's turn, a task of its own: ``_begin`` enters ``TurnEngine.turn``
        (``backend.engine.turn``: the message stored, the memories recalled), ``_stream``
        sends the reply as ``Turn.stream`` yields it (``backend.engine.turn_reply``), and
        leaving the stack stores the reply; ``_end`` then sends the memory report (the
        background merge, ``backend.engine.memory_worker``) and ``complete``."""
        try:
            async with contextlib.AsyncExitStack() as stack:  # the turn's lifetime
                turn = await self._begin(msg, stack)
                if turn is None:
                    return
                await self._stream(msg, turn)
            await self._end(msg, turn)
        except _Gone:
            pass
        except Exception:
            log.exception("websocket turn failed in conversation %s", msg.conversation_id)
            with contextlib.suppress(_Gone):
                await self.send_error(
                    msg.conversation_id,
                    msg.id,
                    "internal_error",
                    "the turn failed unexpectedly",
                    "see the server log",
                )

    async def _begin(self, msg: UserMessage, stack: contextlib.AsyncExitStack) -> Turn | None:
        """The turn, entered on ``stack``; None when refused (the client is told why)."""
        engine = self.services.engine
        try:
            self.services.personas.resolve(msg.persona)
        except UnknownPersona:
            await self.send_error(
                msg.conversation_id,
                msg.id,
                "model_not_found",
                f"unknown model (persona) {msg.persona!r}",
                REFUSED,
            )
            return None
        request = TurnRequest(
            user_id=self.user,
            text=msg.text,
            persona_id=msg.persona,
            session_id=msg.conversation_id,
            client_system=msg.system,
            history=msg.history,
        )
        # In order per conversation: the session is created once, turns begin in order.
        async with self._ordering.hold(msg.conversation_id):
            try:
                return await stack.enter_async_context(engine.turn(request))
            except SessionConflict:
                await self.send_error(
                    msg.conversation_id, msg.id, "session_not_found", "session not found", REFUSED
                )
                return None

    async def _stream(self, msg: UserMessage, turn: Turn) -> None:
        """The activation step and the reply; whatever stops it, the turn's context
        (``_run_turn``) stores what came."""
        said = False  # reply text went out
        failure: LLMError | None = None
        activated = activation_part(turn.activation)["activated"]
        await self._send_step(msg, "Memory activation", {"activated": activated})
        held = ""  # whitespace, sent at the start of the next chunk (module docstring)
        try:
            async for text in turn.stream():
                held += text
                if msg.streaming and held.strip():
                    body = held.rstrip()
                    await self._send_text(msg.conversation_id, msg.id, body, "in_progress")
                    said, held = True, held[len(body) :]
        except LLMError as exc:
            failure = exc
        if not msg.streaming and held:
            await self._send_text(msg.conversation_id, msg.id, held, "in_progress")
            said = True
        if failure is not None:
            await self._send_failure(
                msg.conversation_id,
                msg.id,
                "upstream_error",
                f"the chat model failed: {failure}",
                "the partial reply is stored marked incomplete",
                said=said,
            )

    async def _end(self, msg: UserMessage, turn: Turn) -> None:
        """The memory report (a bounded wait), then ``complete``."""
        report = await memory_report(turn)
        if report is not None:
            await self._send_step(msg, "Memory report", report)
        await self._send_text(msg.conversation_id, msg.id, "", "complete")


@router.websocket("/websocket")
async def websocket_endpoint(websocket: WebSocket) -> None:
    await websocket.accept()
    user = websocket_user(websocket)
    if user is None:
        await websocket.close(
            code=POLICY_VIOLATION, reason="missing or invalid API key (Bearer or ?api_key=)"
        )
        return
    await Connection(websocket, websocket.app.state.services, user).serve()
