"""The OpenAI-compatible chat API: ``/v1/chat/completions``, ``/chat/stream``, models.

The server holds the conversation (docs/api.md): a request's messages are read as the
client meant them (``backend.web.chat_messages``: a new turn, a regeneration, a
continuation, one more reply); the session they continue is found by the engine
(``backend.engine.session_placement``). A client's utility requests (titles, tags, quiet
prompts: ``backend.web.utility_requests``) get a stateless plain completion. Streaming
is SSE framed by sse-starlette; the ``intermediate_data:`` lines of the NeMo Agent
Toolkit UI are sent on ``/chat/stream``, and on ``/v1`` when the request asks for them.
Request fields take their JSON type only, as OpenAI's do.

Failure policy: bad input → 400/404/413 before anything is stored; an upstream failure
before the first token → 502 (the user message and the marked reply are stored); after
the first token → the failure as reply text, a final SSE event with the error object,
then ``[DONE]``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from backend.engine.plain_completion import PlainCompletion
from backend.engine.turn import SessionConflict, Turn, TurnRequest
from backend.hippocampus import estimate_tokens
from backend.llm.port import LLMError, Sampling
from backend.personas import UnknownPersona
from backend.storable_text import unstorable_reason
from backend.web.chat_messages import ChatInput, part_text, read_messages
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError, error_body
from backend.web.turn_steps import activation_payload, memory_report, step_line
from backend.web.utility_requests import utility_kind

log = logging.getLogger(__name__)
router = APIRouter(tags=["openai"])

MAX_MESSAGES = 1000
MAX_STOPS = 16
# The client's own conversation ids, first found wins (docs/api.md).
SESSION_HEADERS = ("conversation-id", "x-session-id", "x-openwebui-chat-id")


# Strict: each field takes its JSON type only (``"stream": "yes"``, ``"1"`` or ``1`` for a
# boolean is a 400 naming the field, as OpenAI answers); an integer is still a number.
STRICT = ConfigDict(extra="allow", strict=True)


class ContentPart(BaseModel):
    model_config = STRICT
    type: str = "text"
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = STRICT
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = Field(None, max_length=256)

    @field_validator("content")
    @classmethod
    def _storable(cls, value: str | list[ContentPart] | None) -> str | list[ContentPart] | None:
        texts = [value] if isinstance(value, str) else [p.text or "" for p in value or ()]
        for text in texts:
            reason = unstorable_reason(text)
            if reason is not None:
                raise ValueError(f"the text {reason}")
        return value

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content if part.type == "text")
        return ""


class StreamOptions(BaseModel):
    model_config = STRICT
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The OpenAI chat request. The sampling parameters go to the chat model; other
    unknown parameters are accepted and ignored (``logprobs`` among them)."""

    model_config = STRICT
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=0)
    max_completion_tokens: int | None = Field(None, ge=0)
    n: int | None = Field(None, ge=1, le=128)
    # ``true``: the NeMo Agent Toolkit's request schema's placeholder, read as "not set".
    stop: str | list[str] | bool | None = None
    seed: int | None = None
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    user: str | None = Field(None, max_length=256)
    stream_options: StreamOptions | None = None
    additional_props: dict[str, Any] | None = None
    intermediate_steps: bool = False

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | bool | None) -> str | list[str] | bool | None:
        stops = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        if len(stops) > MAX_STOPS or any(not s or len(s) > 256 for s in stops):
            raise ValueError(f"stop takes at most {MAX_STOPS} non-empty strings of 256 characters")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _biases(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for token, bias in (value or {}).items():
            if not token.isdigit() or not -100 <= bias <= 100:
                raise ValueError("logit_bias maps token ids (digits) to biases in [-100, 100]")
        return value

    def sampling(self) -> Sampling | None:
        """The sampling parameters; placeholder zeros (``top_p``/``top_k`` 0, which the
        NeMo UI sends and no sampler can use) mean "not set"."""
        stop = self.stop
        stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
        sampling = Sampling(
            stop=tuple(stops),
            seed=self.seed,
            top_p=self.top_p or None,
            top_k=self.top_k or None,
            min_p=self.min_p,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            logit_bias=self.logit_bias or None,
        )
        return None if sampling.empty else sampling

    def wants_steps(self) -> bool:
        props = self.additional_props or {}
        return self.intermediate_steps or bool(props.get("enableIntermediateSteps"))


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


def _chunk(
    cid: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def _usage(turn: Turn | PlainCompletion) -> dict[str, int]:
    if turn.usage is not None:
        prompt, completion = turn.usage.prompt_tokens, turn.usage.completion_tokens
    else:  # the provider reported none: our estimate, so clients always get the field
        prompt = sum(estimate_tokens(str(m.get("content") or "")) for m in turn.messages)
        completion = estimate_tokens(turn.reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


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


async def _chat(
    request: Request, body: ChatRequest, user: str, services: Any, *, steps: bool
) -> Any:
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
    cid = f"chatcmpl-{turn.turn_id}"
    try:
        return await _respond(
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
    return await _respond(body, completion, None, cid, persona.id, headers)


async def _respond(
    body: ChatRequest,
    source: Turn | PlainCompletion,
    turn: Turn | None,
    cid: str,
    model: str,
    headers: dict[str, str],
    end: Callable[[], Awaitable[Any]] | None = None,
) -> Any:
    """The response to a turn or a plain completion: one JSON, or an SSE stream (with
    ``turn``: framed by the memory steps). ``end`` ends the source (a turn's context),
    once, where the response ends: here for a JSON answer, else when the SSE stream
    closes (or, if it never runs, after the response)."""
    created = int(time.time())
    stream = source.stream()
    close = end or stream.aclose
    # Pull the first chunk before answering, so an upstream that is down gets a real 502.
    try:
        first = await anext(stream, None)
    except LLMError as exc:
        await close()
        return JSONResponse(
            error_body(502, f"the chat model failed: {exc}", "upstream_error"),
            status_code=502,
            headers=headers,
        )
    if not body.stream:
        parts = [first or ""]
        try:
            parts += [text async for text in stream]
        except LLMError as exc:
            return JSONResponse(
                error_body(502, f"the chat model failed: {exc}", "upstream_error"),
                status_code=502,
                headers=headers,
            )
        finally:
            await close()
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": source.finish_reason or "stop",
                        "message": {"role": "assistant", "content": "".join(parts)},
                    }
                ],
                "usage": _usage(source),
            },
            headers=headers,
        )

    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    steps = turn is not None

    async def events() -> AsyncIterator[ServerSentEvent | bytes]:
        try:
            if steps and turn is not None:
                yield step_line("Memory activation", activation_payload(turn), turn)
            yield ServerSentEvent(json.dumps(_chunk(cid, created, model, {"role": "assistant"})))
            if first:
                yield ServerSentEvent(json.dumps(_chunk(cid, created, model, {"content": first})))
            async for text in stream:
                yield ServerSentEvent(json.dumps(_chunk(cid, created, model, {"content": text})))
            yield ServerSentEvent(
                json.dumps(_chunk(cid, created, model, {}, source.finish_reason or "stop"))
            )
            if include_usage:
                usage_chunk = _chunk(cid, created, model, {}, None, _usage(source))
                usage_chunk["choices"] = []
                yield ServerSentEvent(json.dumps(usage_chunk))
            if steps and turn is not None and turn.merged is not None:
                report = await memory_report(turn)  # bounded: the UI waits for the end
                if report is not None:
                    yield step_line("Memory report", report, turn)
        except LLMError as exc:
            message = f"the chat model failed: {exc}"
            # As reply text too: a client that shows only content (the NeMo UI's proxy
            # drops an event without it) still tells the user why the reply stopped.
            notice = {"content": f"\n\n[{message}]"}
            yield ServerSentEvent(json.dumps(_chunk(cid, created, model, notice)))
            yield ServerSentEvent(json.dumps(error_body(502, message, "upstream_error")))
        finally:
            await close()
        yield ServerSentEvent("[DONE]")

    return EventSourceResponse(events(), headers=headers, ping=15, background=BackgroundTask(close))


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
