"""The OpenAI-compatible chat API: ``/v1/chat/completions``, ``/chat/stream``, models.

The server holds the conversation (docs/api.md): a request's messages are read as the
client meant them (``backend.web.chat_messages``: a new turn, a regeneration, a
continuation, one more reply); the session they continue is found by the engine
(``backend.engine.session_placement``). A client's utility requests (titles, tags, quiet
prompts: ``backend.web.utility_requests``) get a stateless plain completion. Streaming
is SSE framed by sse-starlette; the ``intermediate_data:`` lines of the NeMo Agent
Toolkit UI are sent on ``/chat/stream``, and on ``/v1`` when the request asks for them.
The request body's models are ``backend.web.openai_schemas``'s (fields take their JSON
type only, as OpenAI's do); the answer's shaping, JSON or SSE chunks, is
``backend.web.openai_response``'s.

One turn, from here (docs/architecture.md, "One turn"):

1. ``_chat`` reads the request into a ``TurnRequest`` (``_read``, ``_turn_request``);
2. ``begin_turn`` enters ``TurnEngine.turn`` (``backend.engine.turn``): the user message
   is stored, the turn handed to the session's memory worker, the memories recalled;
3. ``openai_response.respond`` reads ``Turn.stream`` (``backend.engine.turn_reply``),
   which stores the reply as it ends, and closes the turn where the response ends;
4. in the background, the memory worker (``backend.engine.memory_worker``) runs the
   hippocampus and merges the turn (``backend.engine.merge``), writing its long-term
   facts through the save gate (``LongTermMemory.write_or_queue``). The response never
   waits for that, except ``/chat/stream``'s bounded wait for the memory report.

Failure policy: bad input → 400/404/413 before anything is stored; an upstream failure
before the first token → 502 (the user message and the marked reply are stored); after
the first token → the failure as reply text, a final SSE event with the error object,
then ``[DONE]``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from contextlib import AsyncExitStack
from typing import Any

from fastapi import APIRouter, Request

from backend.engine.plain_completion import PlainCompletion
from backend.engine.turn import SessionConflict, Turn, TurnRequest
from backend.personas import UnknownPersona
from backend.web.chat_messages import ChatInput, part_text, read_messages
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError
from backend.web.openai_response import respond
from backend.web.openai_schemas import ChatRequest
from backend.web.utility_requests import utility_kind

log = logging.getLogger(__name__)
router = APIRouter(tags=["openai"])

# The client's own conversation ids, first found wins (docs/api.md).
SESSION_HEADERS = ("conversation-id", "x-session-id", "x-openwebui-chat-id")


_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")


def _session_id(request: Request, body: ChatRequest) -> str | None:
    for header in SESSION_HEADERS:
        value = request.headers.get(header)
        if value and value.strip():
            return header_safe(value.strip()[:128])
    return header_safe(body.user.strip()[:128]) if body.user and body.user.strip() else None


def header_safe(value: str) -> str:
    """The session id as given when it can travel back in ``X-Session-Id`` (visible ASCII),
    else a stable id derived from it: the same ``user`` string always finds its session,
    and a response header never carries a control or non-ASCII character."""
    if _HEADER_SAFE.fullmatch(value):
        return value
    return "u-" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _turn_request(
    request: Request, body: ChatRequest, user: str, limit: int, chat: ChatInput
) -> TurnRequest:
    if chat.final == "turn" and not chat.text.strip():
        raise APIError(400, "the last user message is empty", "invalid_messages")
    if len(chat.text) > limit:
        raise APIError(413, f"the message is longer than {limit} characters", "message_too_large")
    return TurnRequest(
        user_id=user,
        text=chat.text,
        persona_id=body.model,
        session_id=_session_id(request, body),
        client_system=chat.client_system,
        history=chat.history,
        temperature=body.temperature,
        max_tokens=_max_tokens(body),
        final=chat.final,
        instruction=chat.instruction,
        examples=chat.examples,
        sampling=body.sampling(),
        # Open WebUI always sends the whole branch of the chat it names.
        whole_history="x-openwebui-chat-id" in request.headers,
        images=chat.final_image_parts,
    )


def _max_tokens(body: ChatRequest) -> int | None:
    return body.max_completion_tokens or body.max_tokens or None  # 0 means "not set"


def _read(body: ChatRequest, chat_model: Any) -> ChatInput:
    """The request's meaning, or the 400 that says why it has none."""
    if body.n is not None and body.n > 1:
        raise APIError(
            400,
            "n must be 1: each request is one turn of the conversation (send the request "
            "again for another reply: it replaces this one)",
            "unsupported_n",
        )
    chat = read_messages([m.model_dump(exclude_none=True) for m in body.messages])
    if chat is None:
        raise APIError(400, "the messages have no user or assistant message", "invalid_messages")
    if chat.image_parts and not getattr(chat_model, "supports_images", False):
        raise APIError(
            400,
            f"the chat model {getattr(chat_model, 'model', '')!r} does not take images: "
            "send text only, or set chat.vision for a model that does (docs/configuration.md)",
            "images_not_supported",
        )
    return chat


async def begin_turn(stack: AsyncExitStack, services: Any, turn_request: TurnRequest) -> Turn:
    """The turn, its lifetime entered on ``stack`` (``TurnEngine.turn``): closing the stack
    ends it, wherever the response ends. The 404s a request can get before anything runs."""
    try:
        return await stack.enter_async_context(services.engine.turn(turn_request))
    except UnknownPersona:
        raise APIError(
            404, f"unknown model (persona) {turn_request.persona_id!r}", "model_not_found"
        ) from None
    except SessionConflict:
        raise APIError(404, "session not found", "session_not_found") from None


async def chat_completions(
    request: Request, body: ChatRequest, user: UserDep, services: ServicesDep
) -> Any:
    return await _chat(request, body, user, services, steps=body.wants_steps())


async def nemo_chat_stream(
    request: Request, body: ChatRequest, user: UserDep, services: ServicesDep
) -> Any:
    """``/chat/stream``, the NeMo Agent Toolkit UI's path: the same turn, with the memory
    steps always (the UI shows every ``intermediate_data:`` line, and no version of it
    says whether it wants them: its proxy, response-processors.js:21-46, 68-82)."""
    return await _chat(request, body, user, services, steps=True)


# Set while memory is not being saved (``backend.engine.memory_health``), with the reason.
MEMORY_WARNING_HEADER = "X-Limbic-Memory-Warning"


def header_text(text: str, limit: int = 300) -> str:
    """``text`` as one line of ASCII that fits in a header (other characters as ``?``)."""
    flat = " ".join(text.split())[:limit]
    return flat.encode("ascii", "replace").decode("ascii")


async def _chat(
    request: Request, body: ChatRequest, user: str, services: Any, *, steps: bool
) -> Any:
    """One request (module docstring, "One turn"): a utility request's plain completion
    (``_plain``), or a turn: read, begun (``begin_turn``), answered by ``respond``, which
    ends the turn where the response ends."""
    chat = _read(body, services.engine.chat)
    headers_in = {key.lower(): value for key, value in request.headers.items()}
    utility = utility_kind(headers_in, body.model_dump(exclude_none=True))
    if utility is not None:
        return await _plain(body, services, chat, utility)
    limit = services.settings.server.max_message_chars
    turn_request = _turn_request(request, body, user, limit, chat)
    stack = AsyncExitStack()
    turn = await begin_turn(stack, services, turn_request)
    headers = {"X-Session-Id": turn.session.id}
    warning = services.engine.memory_health.warning()
    if warning is not None:  # memory that stops forming is never silent, here either
        headers[MEMORY_WARNING_HEADER] = header_text(warning)
    cid = f"chatcmpl-{turn.turn_id}"
    try:
        return await respond(
            body, turn, turn if steps else None, cid, turn.persona.id, headers, stack.aclose
        )
    except BaseException:
        await stack.aclose()
        raise


async def _plain(body: ChatRequest, services: Any, chat: ChatInput, utility: str) -> Any:
    """A utility request's plain completion: no persona, session or memory."""
    try:
        persona = services.personas.resolve(body.model)
    except UnknownPersona:
        raise APIError(404, f"unknown model (persona) {body.model!r}", "model_not_found") from None
    images = bool(chat.image_parts)
    messages = [
        {
            "role": m.role,
            "content": m.model_dump(exclude_none=True)["content"]
            if images and isinstance(m.content, list)
            else part_text(m.model_dump(exclude_none=True).get("content")),
            **({"name": m.name} if m.name else {}),
        }
        for m in body.messages
        if m.role in ("system", "developer", "user", "assistant")
    ]
    # The background model: it steps aside for replies (backend.engine.plain_completion).
    model = services.engine.hippocampus if not images else services.engine.chat
    completion = PlainCompletion(
        model,
        messages,
        temperature=body.temperature,
        max_tokens=_max_tokens(body),
        sampling=body.sampling(),
    )
    log.debug("stateless completion for %s", utility)
    headers = {"X-Limbic-Stateless": utility}
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    return await respond(body, completion, None, cid, persona.id, headers)


router.add_api_route("/v1/chat/completions", chat_completions, methods=["POST"])
router.add_api_route("/chat/stream", nemo_chat_stream, methods=["POST"], include_in_schema=False)


@router.get("/v1/models")
async def list_models(_user: UserDep, services: ServicesDep) -> dict[str, Any]:
    """The personas, as OpenAI models."""
    return {
        "object": "list",
        "data": [
            {
                "id": p.id,
                "object": "model",
                "created": 0,
                "owned_by": "limbic-memory",
                "name": p.name,
                "description": p.description,
            }
            for p in services.personas
        ],
    }
