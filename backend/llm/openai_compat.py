"""``ChatModel`` adapter for any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp
server, Ollama, LM Studio, ...), on the official ``openai`` SDK.

Every request streams. Retries (connect errors, timeouts, 429, 5xx) are the SDK's own
(``max_retries``) and happen only while opening the request, i.e. before the first token;
once a delta has been yielded a failure is never retried and surfaces as
``LLMStreamInterrupted`` carrying the partial text.

What the server accepts is learnt per instance (one model on one server), from the
answers that turn a request down, and remembered once a request without the blamed part
succeeds (``backend.llm.openai_negotiation`` reads the complaint):

- ``stream_options={"include_usage": true}`` is sent until the server rejects it;
- a ``json_schema`` goes as ``response_format={"type": "json_schema", ...}``, else
  ``{"type": "json_object", "schema": ...}`` plus the schema in the system prompt, else
  ``{"type": "json_object"}`` plus the prompt, else the schema in the system prompt only;
  ``json_mode`` (config ``hippocampus.json_mode``) sets where to start;
- a sampling field the server names in its complaint (``top_k``, ``min_p``, ``seed``,
  ``logit_bias``, ...) is no longer sent.

A complaint counts whatever its status: 400 and 422 by the book, and 500, which is what
llama-cpp-python's server answers for a ``response_format`` type it does not know. A call's
``Sampling`` is sent as it is, only the fields that are set (how, and the schema in the
prompt: ``backend.llm.openai_request``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import openai

from backend.llm.openai_negotiation import DOWNGRADE, JsonMode, Offer, step_down
from backend.llm.openai_request import (
    sampling_fields,
    sampling_params,
    schema_name,
    with_instruction,
    without_fields,
    without_size_bounds,
)
from backend.llm.port import (
    Delta,
    Finish,
    JsonSchema,
    LLMBadRequest,
    LLMError,
    LLMRateLimited,
    LLMStreamInterrupted,
    LLMUnavailable,
    Message,
    Sampling,
    StreamingChatModel,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
    schema_instruction,
)
from backend.llm.reply_first import ReplyFirst
from backend.llm.server_address import is_local_url

logger = logging.getLogger(__name__)

__all__ = [
    "NO_KEY_PLACEHOLDER",
    "JsonMode",
    "OpenAICompatChatModel",
    "sampling_params",
]

# Sent as the API key when none is configured: local servers (llama.cpp, Ollama, vLLM
# without --api-key) ignore it, and the SDK refuses to run without some key. Passing it
# explicitly also stops the SDK from picking up OPENAI_API_KEY from the environment and
# sending a real key to a server that was never meant to get it.
NO_KEY_PLACEHOLDER = "no-key"
# The SDK's "Error code: 500 - " before a server's own message.
_SDK_PREFIX = re.compile(r"^Error code: \d+ - ")


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAICompatChatModel(StreamingChatModel):
    """A ``ChatModel`` talking to ``{base_url}/chat/completions``.

    ``temperature``/``max_tokens`` are the defaults for every call (``None``, and a
    ``max_tokens`` of 0, are not sent). ``timeout`` bounds connecting and each read
    (a stalled stream fails after it); ``max_retries`` is the SDK's retry count before the
    first token. ``supports_tools=False`` marks a server or model without function calling;
    ``supports_images=True`` a vision model (messages may carry image parts);
    ``json_mode`` how a ``json_schema`` is asked for at first (it steps down from there).
    ``reply_first`` (shared with the other role's instance) and ``background``: the
    roles take turns on one server that serves one request at a time: a background
    model's request waits until no foreground reply is streaming
    (``backend.llm.reply_first``; llama-cpp-python's server cuts a running stream short
    when another request comes in).

    Failure policy: every failure is an ``LLMError`` (see ``backend.llm.port``); messages
    name the model and the server, never the key. Construction never does I/O.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        supports_tools: bool = True,
        supports_images: bool = False,
        json_mode: JsonMode = "json_schema",
        reply_first: ReplyFirst | None = None,
        background: bool = False,
    ) -> None:
        self._model = model
        self._server = _public_origin(base_url)
        self._api_key = api_key
        self._temperature = temperature
        self._max_tokens = max_tokens if max_tokens and max_tokens > 0 else None
        self._timeout = timeout
        self._supports_tools = supports_tools
        self._supports_images = supports_images
        if not api_key and not is_local_url(base_url):
            logger.warning("no API key configured for %s; it will probably refuse", self._server)
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY_PLACEHOLDER,
            timeout=timeout,
            max_retries=max_retries,
        )
        if json_mode not in (*DOWNGRADE, "prompt"):
            raise ValueError(f"unknown json_mode {json_mode!r}")
        self._json_mode: JsonMode = json_mode
        self._include_usage: bool | None = None  # None: not known yet
        self._refused_sampling: set[str] = set()  # sampling fields the server turned down
        # Shared with the other role's instance on the same one-slot server: a background
        # model (the hippocampus) opens its requests only while no reply streams.
        self._reply_first = reply_first
        self._background = background

    @property
    def model(self) -> str:
        return self._model

    @property
    def supports_tools(self) -> bool:
        return self._supports_tools

    @property
    def supports_images(self) -> bool:
        return self._supports_images

    @property
    def supports_json_schema(self) -> bool:
        """True until the server turned schema-constrained output down."""
        return self._json_mode == "json_schema"

    @property
    def json_mode(self) -> JsonMode:
        """How a ``json_schema`` is sent now (learnt from the server's answers)."""
        return self._json_mode

    @property
    def refused_sampling(self) -> frozenset[str]:
        """The sampling fields this server turned down (no longer sent)."""
        return frozenset(self._refused_sampling)

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> AsyncIterator[Delta]:
        if tools and not self._supports_tools:
            raise LLMBadRequest(
                f"{self._model} is configured without tool support", model=self._model
            )
        turns = self._reply_first
        with contextlib.nullcontext() if turns is None or self._background else turns.foreground():
            async for delta in self._stream(
                messages, tools, json_schema, temperature, max_tokens, sampling
            ):
                yield delta

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        json_schema: JsonSchema | None,
        temperature: float | None,
        max_tokens: int | None,
        sampling: Sampling | None,
    ) -> AsyncIterator[Delta]:
        started = time.perf_counter()
        sdk_stream = await self._open(
            messages, tools, json_schema, temperature, max_tokens, sampling
        )
        text: list[str] = []
        calls: dict[int, _PartialCall] = {}
        finish: str | None = None
        usage: Usage | None = None
        chunks = sdk_stream.__aiter__()
        try:
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise self._failure(exc, text) from exc
                if chunk.usage is not None:
                    usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue
                    finish = choice.finish_reason or finish
                    for fragment in choice.delta.tool_calls or ():
                        call = calls.setdefault(fragment.index, _PartialCall())
                        call.id = fragment.id or call.id
                        if fragment.function is not None:
                            call.name = fragment.function.name or call.name
                            call.arguments.append(fragment.function.arguments or "")
                    if choice.delta.content:
                        if not text:
                            logger.debug(
                                "%s: first token after %.0f ms",
                                self._model,
                                (time.perf_counter() - started) * 1000,
                            )
                        text.append(choice.delta.content)
                        yield TextDelta(choice.delta.content)
        finally:
            await sdk_stream.close()
        for index in sorted(calls):
            call = calls[index]
            yield ToolCall(call.id or f"call_{index}", call.name, "".join(call.arguments))
        if usage is not None:
            yield usage
        logger.debug(
            "%s: stream done in %.0f ms, finish=%s, %d text deltas, %d tool calls",
            self._model,
            (time.perf_counter() - started) * 1000,
            finish,
            len(text),
            len(calls),
        )
        yield Finish(finish)

    # -- opening the request, with what the server is known to accept -------------------
    async def _open(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        json_schema: JsonSchema | None,
        temperature: float | None,
        max_tokens: int | None,
        sampling: Sampling | None = None,
    ) -> openai.AsyncStream[Any]:
        sampling_sent = without_fields(sampling_params(sampling), self._refused_sampling)
        offer = Offer(
            json_mode=self._json_mode if json_schema is not None else None,
            include_usage=self._include_usage is not False,
            sampling=sampling_fields(sampling_sent),
        )
        while True:
            params = self._params(
                messages,
                tools,
                json_schema,
                offer.json_mode,
                offer.include_usage,
                temperature,
                max_tokens,
            )
            params.update(without_fields(sampling_sent, offer.dropped))
            if self._reply_first is not None and self._background:
                # Each attempt, not only the first: a reply may have started meanwhile.
                await asyncio.to_thread(self._reply_first.wait_for_foreground)
            try:
                sdk_stream: openai.AsyncStream[Any] = await self._client.chat.completions.create(
                    **params
                )
                break
            except openai.APIStatusError as exc:
                lower = step_down(
                    offer,
                    str(exc.message),
                    exc.status_code,
                    usage_known=self._include_usage is not None,
                )
                if lower is None:
                    raise self._failure(exc, []) from exc
                logger.info(
                    "%s at %s: HTTP %s (%s); retrying with %s",
                    self._model,
                    self._server,
                    exc.status_code,
                    self._redact(str(exc.message))[:200],
                    lower.change_from(offer),
                )
                offer = lower
            except Exception as exc:
                raise self._failure(exc, []) from exc
        self._learn(offer)
        return sdk_stream

    def _learn(self, accepted: Offer) -> None:
        """Remember what a request that went through did without."""
        if self._include_usage is None:
            self._include_usage = accepted.include_usage
            if not accepted.include_usage:
                logger.info(
                    "%s at %s: no stream_options support, usage not requested",
                    self._model,
                    self._server,
                )
        if accepted.json_mode is not None and accepted.json_mode != self._json_mode:
            logger.info(
                "%s at %s: JSON output now requested as %s",
                self._model,
                self._server,
                accepted.json_mode,
            )
            self._json_mode = accepted.json_mode
        if accepted.dropped - self._refused_sampling:
            logger.info(
                "%s at %s: no longer sending %s",
                self._model,
                self._server,
                ", ".join(sorted(accepted.dropped - self._refused_sampling)),
            )
            self._refused_sampling |= accepted.dropped

    def _params(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        json_schema: JsonSchema | None,
        json_mode: JsonMode | None,
        include_usage: bool,
        temperature: float | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        wire_messages = [dict(m) for m in messages]
        params: dict[str, Any] = {"model": self._model, "stream": True}
        temperature = temperature if temperature is not None else self._temperature
        if temperature is not None:
            params["temperature"] = temperature
        limit = max_tokens if max_tokens and max_tokens > 0 else self._max_tokens
        if limit:
            params["max_tokens"] = limit
        if include_usage:
            params["stream_options"] = {"include_usage": True}
        if tools:
            params["tools"] = [dict(t) for t in tools]
        if json_schema is not None:
            if json_mode == "json_schema":
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name(json_schema), "schema": dict(json_schema)},
                }
            else:
                if json_mode == "json_object":
                    params["response_format"] = {"type": "json_object"}
                elif json_mode == "json_object_with_schema":
                    schema = without_size_bounds(dict(json_schema))
                    params["response_format"] = {"type": "json_object", "schema": schema}
                wire_messages = with_instruction(wire_messages, schema_instruction(json_schema))
        params["messages"] = wire_messages
        return params

    # -- errors ------------------------------------------------------------------------
    def _failure(self, exc: Exception, text: list[str]) -> LLMError:
        """The ``LLMError`` for ``exc``; ``text`` is what was already yielded."""
        where = f"{self._model} at {self._server}"
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
        if isinstance(exc, openai.APITimeoutError):
            detail = f"no answer within {self._timeout:g} s"
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            detail = f"connection failed ({type(cause).__name__})"
        elif isinstance(exc, openai.APIStatusError):
            said = _SDK_PREFIX.sub("", str(exc.message))  # the status is said already
            detail = f"HTTP {exc.status_code}: {self._redact(said)[:300]}"
        elif isinstance(exc, openai.APIError):
            detail = f"error event in the stream: {self._redact(str(exc.message))[:300]}"
        else:
            detail = f"unexpected {type(exc).__name__}"
        logger.warning("%s: %s (%s)", where, type(exc).__name__, status or "no status")
        if text:
            return LLMStreamInterrupted(
                f"{where}: stream interrupted after {len(text)} deltas: {detail}",
                partial_text="".join(text),
                model=self._model,
                status=status,
            )
        if isinstance(exc, openai.RateLimitError):
            return LLMRateLimited(
                f"{where}: rate limited: {detail}", model=self._model, status=status
            )
        if status is not None and status < 500:
            return LLMBadRequest(
                f"{where}: request rejected: {detail}", model=self._model, status=status
            )
        return LLMUnavailable(f"{where}: unavailable: {detail}", model=self._model, status=status)

    def _redact(self, text: str) -> str:
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "***")
        return text


def _public_origin(base_url: str) -> str:
    """``scheme://host[:port]`` of ``base_url``, without any credentials, for messages."""
    parts = urlsplit(base_url)
    host = parts.hostname or base_url
    if ":" in host and parts.hostname:
        host = f"[{host}]"  # IPv6
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
