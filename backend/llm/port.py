"""The ``ChatModel`` port: what the turn engine needs from any chat LLM.

Messages are plain dicts in the OpenAI chat format (``{"role": "user", "content": "..."}``;
assistant messages may carry ``tool_calls``, tool results are ``{"role": "tool",
"tool_call_id": ..., "content": ...}``). They go to the OpenAI SDK and to llama.cpp
unchanged, and tool results are easy to append. Tools are OpenAI function-tool dicts
(``{"type": "function", "function": {"name", "description", "parameters"}}``); a JSON
schema is the bare JSON Schema object (its ``title``, if any, names it).

A stream yields, in order: ``TextDelta``s as they arrive; then, once the stream is over,
the assembled ``ToolCall``s (if any), ``Usage`` (if the provider reported it), and exactly
one ``Finish`` as the last delta. Anything that fails raises an ``LLMError`` subclass; a
failure after the first delta was yielded is always ``LLMStreamInterrupted`` (never
retried: the consumer has already seen part of the reply).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

Message: TypeAlias = Mapping[str, Any]
"""One chat message, OpenAI format: ``role``, ``content`` and optionally ``tool_calls`` /
``tool_call_id`` / ``name``."""

ToolSpec: TypeAlias = Mapping[str, Any]
"""One tool, OpenAI function-tool format."""

JsonSchema: TypeAlias = Mapping[str, Any]
"""A JSON Schema object describing the whole reply."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of reply text, forwarded to the user as it arrives."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call, assembled from the streamed fragments.

    ``arguments`` is the JSON text the model produced; it is not parsed or validated here
    (the model may produce invalid JSON: the caller decides what to do with it).
    """

    id: str
    name: str
    arguments: str

    def as_message_part(self) -> dict[str, Any]:
        """This call in the form an assistant message's ``tool_calls`` list wants."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as reported by the provider (``None`` values are never invented)."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class Finish:
    """The last delta of every successful stream.

    ``reason`` is the provider's finish reason (``"stop"``, ``"length"``, ``"tool_calls"``
    ...) or ``None`` when the provider did not say.
    """

    reason: str | None


Delta: TypeAlias = TextDelta | ToolCall | Usage | Finish


@dataclass(frozen=True, slots=True)
class Sampling:
    """Per-request generation parameters a client asked for, beyond temperature and
    ``max_tokens``. ``None`` (or empty) leaves the adapter's default; nothing is sent."""

    stop: tuple[str, ...] = ()
    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    # OpenAI's shape: token id (as a string) -> bias in [-100, 100].
    logit_bias: Mapping[str, float] | None = None

    @property
    def empty(self) -> bool:
        return self == Sampling()


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole reply: what ``ChatModel.complete`` returns."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None


class LLMError(Exception):
    """Base of every error a ``ChatModel`` raises. Messages never contain an API key.

    ``model`` names the model that failed; ``status`` is the HTTP status where there was
    one.
    """

    def __init__(self, message: str, *, model: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.model = model
        self.status = status


class LLMUnavailable(LLMError):
    """The model could not be reached or failed: connection error, timeout, 5xx, missing
    local model file. Retrying later may help."""


class LLMRateLimited(LLMError):
    """The provider kept answering 429 (after the retries that were allowed)."""


class LLMBadRequest(LLMError):
    """The provider rejected the request (4xx other than 429, including 401/403/404):
    retrying the same request will not help."""


class LLMStreamInterrupted(LLMError):
    """The stream failed after at least one delta was yielded; ``partial_text`` is the reply
    text received until then. Never retried."""

    def __init__(
        self,
        message: str,
        *,
        partial_text: str,
        model: str = "",
        status: int | None = None,
    ) -> None:
        super().__init__(message, model=model, status=status)
        self.partial_text = partial_text


class ChatModel(Protocol):
    """A chat LLM. One instance serves one role (main, hippocampus) and owns its client.

    Properties: ``model`` (the model name, for logs and reports), ``supports_tools``
    (whether ``tools`` may be passed), ``supports_json_schema`` (whether the output can be
    constrained to ``json_schema``; where it cannot, the schema is still passed and put in
    the prompt, and callers parse defensively in every case), ``supports_images`` (whether
    messages may carry image parts, OpenAI's ``{"type": "image_url", ...}`` content).
    """

    @property
    def model(self) -> str: ...

    @property
    def supports_tools(self) -> bool: ...

    @property
    def supports_json_schema(self) -> bool: ...

    @property
    def supports_images(self) -> bool: ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> AsyncIterator[Delta]:
        """Stream the reply to ``messages`` (see the module docstring for the order).

        ``temperature``/``max_tokens`` of ``None`` (and ``max_tokens`` of 0) mean "the
        adapter's default"; nothing is sent for them when that default is unset too.
        ``temperature`` 0 means greedy decoding. ``sampling`` carries the client's other
        parameters (stop sequences, seed, nucleus/top-k/min-p, penalties, logit bias).
        Raises ``LLMError`` subclasses only. Closing the iterator early (``break``,
        cancellation) stops the generation and releases the connection or the model.
        """
        ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> Completion:
        """The whole reply at once; same arguments and failures as ``stream``."""
        ...

    async def aclose(self) -> None:
        """Release the client or the model (idempotent)."""
        ...


@runtime_checkable
class PromptCache(Protocol):
    """A local model that keeps its last prompt evaluated (llama.cpp): a later prompt that
    starts the same way evaluates only what follows. ``prime`` loads the model and
    evaluates ``messages`` now (at start, off any user's path); ``primed`` says it did."""

    async def prime(self, messages: Sequence[Message]) -> None: ...

    @property
    def primed(self) -> bool: ...


@runtime_checkable
class ReadAhead(Protocol):
    """A local model that can read the start of the next prompt into its cache between
    turns, giving way to any generation (``backend.llm.read_ahead``); the tokens read."""

    async def read_ahead(self, messages: Sequence[Message]) -> int: ...


@runtime_checkable
class Tokenizing(Protocol):
    """A model whose token ids the app knows (a local llama.cpp model): what a
    ``Sampling.logit_bias`` for it is keyed by. ``None`` while they are not known yet (the
    model not loaded)."""

    def token_ids(self, text: str) -> list[int] | None: ...


async def collect(deltas: AsyncIterator[Delta]) -> Completion:
    """Drain a stream into a ``Completion`` (the usual way to implement ``complete``)."""
    text: list[str] = []
    calls: list[ToolCall] = []
    usage: Usage | None = None
    reason: str | None = None
    async for delta in deltas:
        if isinstance(delta, TextDelta):
            text.append(delta.text)
        elif isinstance(delta, ToolCall):
            calls.append(delta)
        elif isinstance(delta, Usage):
            usage = delta
        else:
            reason = delta.reason
    return Completion(
        text="".join(text), tool_calls=tuple(calls), finish_reason=reason, usage=usage
    )


def schema_instruction(json_schema: JsonSchema) -> str:
    """The system-message text that asks for JSON matching ``json_schema`` (used where the
    provider cannot constrain its output, and as a reminder where it can)."""
    return (
        "Reply with one JSON object only, no prose and no code fence. "
        "It must match this JSON Schema:\n" + json.dumps(json_schema, ensure_ascii=False)
    )


class StreamingChatModel:
    """Base for adapters that always stream: ``complete`` is the collected ``stream``, so a
    completion fails exactly as a stream does. Images are not supported unless a subclass
    says so."""

    @property
    def supports_images(self) -> bool:
        return False

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> AsyncIterator[Delta]:
        raise NotImplementedError

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> Completion:
        """The whole reply (streamed underneath). ``sampling`` is passed on only when
        given, so a subclass whose ``stream`` predates it still completes without one."""
        extra: dict[str, Any] = {} if sampling is None else {"sampling": sampling}
        return await collect(
            self.stream(
                messages,
                tools=tools,
                json_schema=json_schema,
                temperature=temperature,
                max_tokens=max_tokens,
                **extra,
            )
        )
