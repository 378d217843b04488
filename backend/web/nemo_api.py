"""The NVIDIA NeMo Agent Toolkit UI's other HTTP routes: ``/chat``, ``/generate``,
``/generate/stream`` (``/chat/stream`` is ``backend.web.openai_api``'s).

The UI (NVIDIA/NeMo-Agent-Toolkit-UI) never calls us from the browser: its proxy
(``proxy/server.js``) forwards ``/api/<route>`` to ``NAT_BACKEND_URL`` + ``<route>`` with the
browser's headers (``Conversation-Id``, ``User-Message-ID``: ``components/Chat/Chat.tsx``
:1063-1069) and rewrites each response (``proxy/response-processors.js``) before the page
reads it. Request bodies (``proxy/request-transformers.js``):

- ``/chat``: ``{"messages": [...], "model": "placeholder", "stream": false,
  "temperature": 0.7, ...optional generation parameters}`` (:75-103) — the OpenAI chat
  request, so the route is ``/v1/chat/completions`` with ``stream`` forced off; the proxy
  shows ``choices[0].message.content`` (response-processors.js:189-197);
- ``/generate`` and ``/generate/stream``: ``{"input_message": "..."}`` (:47-64). The answer
  is ``{"value": reply}`` (the proxy passes it through: :270-292); the stream is SSE
  ``data: {"value": chunk}`` events (the proxy keeps those whose ``value`` is a non-empty
  string: :239-249), ended by ``data: [DONE]``.

``/generate/stream`` also sends two ``intermediate_data: {...}`` lines, which the proxy
turns into ``<intermediatestep>`` tags the UI shows as steps (:21-46, :68-82): **Memory
activation** before the reply, **Memory report** after it. The UI never says whether it
wants steps over HTTP (no request field carries its setting), so they are always sent;
the report is waited for at most ``turn_steps.MEMORY_REPORT_WAIT_S``.

A chat model failing after the reply began cannot change the status any more: the
stream gets a last ``data: {"value": "\\n\\n[the chat model failed: ...]"}`` (shown by every
client that concatenates the values) and a raw ``{"code", "message", "details"}`` line,
the NeMo Agent Toolkit's error object, which the proxy forwards as is
(response-processors.js:77-80) and the UI renders as an error (Chat.tsx:1308-1314).
Before the first token it is a 502, as on the chat routes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from backend.engine.turn import Turn, TurnRequest
from backend.llm.port import LLMError
from backend.storable_text import unstorable_reason
from backend.web import openai_api
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError, error_body
from backend.web.openai_schemas import ChatRequest
from backend.web.schemas import ERROR_RESPONSES
from backend.web.turn_steps import activation_payload, memory_report, step_line

log = logging.getLogger(__name__)
router = APIRouter(
    tags=["nemo-agent-toolkit-ui"],
    responses={
        **ERROR_RESPONSES,
        413: {"description": "The message is longer than server.max_message_chars"},
        502: {"description": "The chat model failed before the reply began"},
    },
)


class GenerateRequest(BaseModel):
    """The NeMo Agent Toolkit's generate request; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    input_message: str = Field(description="The user's message: the new turn.")
    model: str | None = Field(
        None, description="A persona id; absent or a placeholder means the default persona."
    )

    @field_validator("input_message")
    @classmethod
    def _storable(cls, value: str) -> str:
        reason = unstorable_reason(value)
        if reason is not None:
            raise ValueError(f"the text {reason}")
        return value


class GenerateResponse(BaseModel):
    value: str = Field(description="The whole reply.")


def _session_id(request: Request) -> str | None:
    """``Conversation-Id`` (the UI's) or ``X-Session-Id``, as the chat routes read them."""
    for header in ("conversation-id", "x-session-id"):
        value = request.headers.get(header)
        if value and value.strip():
            return openai_api.header_safe(value.strip()[:128])
    return None


async def _start(
    stack: AsyncExitStack, request: Request, body: GenerateRequest, user: str, services: Any
) -> tuple[Turn, AsyncIterator[str], str | None] | JSONResponse:
    """Begin the turn, its lifetime on ``stack``, and pull its first chunk: the turn, its
    stream and that chunk, or the 502 to answer when the model fails before it."""
    text = body.input_message
    limit = services.settings.server.max_message_chars
    if not text.strip():
        raise APIError(400, "input_message must be a non-empty message", "invalid_messages")
    if len(text) > limit:
        raise APIError(413, f"the message is longer than {limit} characters", "message_too_large")
    turn_request = TurnRequest(
        user_id=user, text=text, persona_id=body.model, session_id=_session_id(request)
    )
    turn = await openai_api.begin_turn(stack, services, turn_request)
    stream = turn.stream()
    try:
        first = await anext(stream, None)
    except LLMError as exc:
        return _failed(exc, turn)
    return turn, stream, first


def _failed(exc: LLMError, turn: Turn) -> JSONResponse:
    return JSONResponse(
        error_body(502, f"the chat model failed: {exc}", "upstream_error"),
        status_code=502,
        headers={"X-Session-Id": turn.session.id},
    )


def _value(text: str) -> ServerSentEvent:
    return ServerSentEvent(json.dumps({"value": text}, ensure_ascii=False))


@router.post("/chat", summary="A chat turn, not streaming (the NeMo Agent Toolkit UI's /chat)")
async def chat(request: Request, body: ChatRequest, user: UserDep, services: ServicesDep) -> Any:
    """``POST /v1/chat/completions`` with ``stream`` forced off: the NeMo Agent Toolkit's
    non-streaming chat route. The session comes from ``Conversation-Id``."""
    body = body.model_copy(update={"stream": False})
    return await openai_api.chat_completions(request, body, user, services)


@router.post(
    "/generate",
    summary="A chat turn, not streaming, in the NeMo Agent Toolkit's generate shape",
    response_model=GenerateResponse,
)
async def generate(
    request: Request, body: GenerateRequest, user: UserDep, services: ServicesDep
) -> Any:
    """``{"input_message": text}`` → ``{"value": reply}``; the session id comes from
    ``Conversation-Id`` (or ``X-Session-Id``) and goes back in ``X-Session-Id``."""
    async with AsyncExitStack() as stack:  # the turn's lifetime
        started = await _start(stack, request, body, user, services)
        if isinstance(started, JSONResponse):
            return started
        turn, stream, first = started
        parts = [first or ""]
        try:
            parts += [text async for text in stream]
        except LLMError as exc:
            return _failed(exc, turn)
    return JSONResponse({"value": "".join(parts)}, headers={"X-Session-Id": turn.session.id})


@router.post(
    "/generate/stream",
    summary="A chat turn, streaming (SSE), in the NeMo Agent Toolkit's generate shape",
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE stream"}},
)
async def generate_stream(
    request: Request, body: GenerateRequest, user: UserDep, services: ServicesDep
) -> Any:
    """``{"input_message": text}`` → ``intermediate_data:`` Memory activation, ``data:
    {"value": chunk}`` per chunk, ``intermediate_data:`` Memory report, ``data: [DONE]``."""
    # The turn's lifetime ends with the SSE stream (or, if that never runs, after the
    # response): the stack is closed there, once.
    stack = AsyncExitStack()
    try:
        started = await _start(stack, request, body, user, services)
    except BaseException:
        await stack.aclose()
        raise
    if isinstance(started, JSONResponse):
        await stack.aclose()
        return started
    turn, stream, first = started

    async def events() -> AsyncIterator[ServerSentEvent | bytes]:
        said = bool(first)
        try:
            yield step_line("Memory activation", activation_payload(turn), turn)
            if first:
                yield _value(first)
            async for text in stream:
                said = said or bool(text)
                yield _value(text)
        except LLMError as exc:
            message = f"the chat model failed: {exc}"
            yield _value(("\n\n" if said else "") + f"[{message}]")
            error = {
                "code": "upstream_error",
                "message": "the chat model failed",
                "details": f"{exc}; the partial reply is stored marked incomplete",
            }
            yield (json.dumps(error, ensure_ascii=False) + "\n\n").encode()
        finally:
            await stack.aclose()
        report = await memory_report(turn)
        if report is not None:
            yield step_line("Memory report", report, turn)
        yield ServerSentEvent("[DONE]")

    headers = {"X-Session-Id": turn.session.id}
    return EventSourceResponse(
        events(), headers=headers, ping=15, background=BackgroundTask(stack.aclose)
    )
