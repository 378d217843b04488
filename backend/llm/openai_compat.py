"""``ChatModel`` adapter for any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp
server, Ollama, LM Studio, ...), on the official ``openai`` SDK.

Every request streams. Retries (connect errors, timeouts, 429, 5xx) are the SDK's own
(``max_retries``) and happen only while opening the request, i.e. before the first token;
once a delta has been yielded a failure is never retried and surfaces as
``LLMStreamInterrupted`` carrying the partial text.

What the server accepts is learnt per instance, from 400/422 answers, and remembered once
a downgraded request succeeds:

- ``stream_options={"include_usage": true}`` is sent until the server rejects it;
- a ``json_schema`` goes as ``response_format={"type": "json_schema", ...}``, else
  ``{"type": "json_object"}`` plus the schema in the system prompt, else the schema in the
  system prompt only.

A call's ``Sampling`` is sent as it is, only the fields that are set (how, and the schema
in the prompt: ``backend.llm.openai_request``). A server that rejects one answers 400:
an ``LLMBadRequest``.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import openai

from backend.llm.openai_request import sampling_params, schema_name, with_instruction
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

logger = logging.getLogger(__name__)

__all__ = ["NO_KEY_PLACEHOLDER", "JsonMode", "OpenAICompatChatModel", "sampling_params"]

JsonMode = Literal["json_schema", "json_object", "prompt"]
_DOWNGRADE: dict[JsonMode, JsonMode] = {"json_schema": "json_object", "json_object": "prompt"}

# Sent as the API key when none is configured: local servers (llama.cpp, Ollama, vLLM
# without --api-key) ignore it, and the SDK refuses to run without some key. Passing it
# explicitly also stops the SDK from picking up OPENAI_API_KEY from the environment and
# sending a real key to a server that was never meant to get it.
NO_KEY_PLACEHOLDER = "no-key"

# Statuses on which a server tells us it does not understand a parameter.
_REJECTED_PARAMETER = (400, 422)


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
    ``supports_images=True`` a vision model (messages may carry image parts).

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
    ) -> None:
        self._model = model
        self._server = _public_origin(base_url)
        self._api_key = api_key
        self._temperature = temperature
        self._max_tokens = max_tokens if max_tokens and max_tokens > 0 else None
        self._timeout = timeout
        self._supports_tools = supports_tools
        self._supports_images = supports_images
        if not api_key and not _is_local(base_url):
            logger.warning("no API key configured for %s; it will probably refuse", self._server)
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY_PLACEHOLDER,
            timeout=timeout,
            max_retries=max_retries,
        )
        self._json_mode: JsonMode = "json_schema"
        self._include_usage: bool | None = None  # None: not known yet

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
        include_usage = self._include_usage is not False
        json_mode: JsonMode | None = self._json_mode if json_schema is not None else None
        while True:
            params = self._params(
                messages, tools, json_schema, json_mode, include_usage, temperature, max_tokens
            )
            params.update(sampling_params(sampling))
            try:
                sdk_stream: openai.AsyncStream[Any] = await self._client.chat.completions.create(
                    **params
                )
                break
            except openai.APIStatusError as exc:
                if exc.status_code not in _REJECTED_PARAMETER:
                    raise self._failure(exc, []) from exc
                complaint = str(exc.message).lower()
                usage_unknown = include_usage and self._include_usage is None
                can_downgrade = json_mode in _DOWNGRADE
                blames_format = "response_format" in complaint or "json" in complaint
                if usage_unknown and ("stream_options" in complaint or not blames_format):
                    include_usage = False
                elif can_downgrade and json_mode is not None:
                    json_mode = _DOWNGRADE[json_mode]
                elif usage_unknown:
                    include_usage = False
                else:
                    raise self._failure(exc, []) from exc
                logger.debug(
                    "%s: HTTP %s, retrying with fewer options", self._model, exc.status_code
                )
            except Exception as exc:
                raise self._failure(exc, []) from exc
        if self._include_usage is None:
            self._include_usage = include_usage
            if not include_usage:
                logger.info(
                    "%s at %s: no stream_options support, usage not requested",
                    self._model,
                    self._server,
                )
        if json_mode is not None and json_mode != self._json_mode:
            logger.info(
                "%s at %s: JSON output now requested as %s", self._model, self._server, json_mode
            )
            self._json_mode = json_mode
        return sdk_stream

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
            detail = f"HTTP {exc.status_code}: {self._redact(str(exc.message))[:300]}"
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


def _is_local(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
