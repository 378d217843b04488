"""``FakeChatModel``: a scripted ``ChatModel`` for engine and endpoint tests.

    model = FakeChatModel()
    model.enqueue(["Hello", " there"], first_token_delay_s=0.05)
    model.enqueue([ToolCall("c1", "memory_recall", '{"query": "coffee"}')])
    model.enqueue(["partial", LLMStreamInterrupted("boom", partial_text="partial")])
    gate = asyncio.Event()
    script = model.enqueue(['{"background": ""}'], wait_for=gate)  # blocks until gate.set()

Each call to ``stream``/``complete`` takes the next script (first in, first out) and is
recorded in ``calls``. Strings become ``TextDelta``s, ``Delta`` objects pass through,
an exception is raised where it stands. A ``Finish`` is appended when the script has none.
With no script queued, the ``default`` reply is used, or the call fails with
``AssertionError`` (a test forgot to script it).
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.llm.port import (
    Delta,
    Finish,
    JsonSchema,
    Message,
    Sampling,
    StreamingChatModel,
    TextDelta,
    ToolCall,
    ToolSpec,
)

Chunk = str | Delta | BaseException


@dataclass(frozen=True)
class FakeCall:
    """One recorded call: deep copies of what the caller passed."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    json_schema: dict[str, Any] | None
    temperature: float | None
    max_tokens: int | None
    sampling: Sampling | None = None


@dataclass
class FakeScript:
    """One scripted reply. ``started`` is set when a call picks it up, ``finished`` when
    its stream ends (normally, by error or by being closed)."""

    chunks: list[Chunk]
    delay_s: float = 0.0
    first_token_delay_s: float = 0.0
    wait_for: asyncio.Event | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)


class FakeChatModel(StreamingChatModel):
    """A ``ChatModel`` whose replies are scripted with ``enqueue``.

    Failure policy: exactly what the script says; it never invents an error itself, except
    ``AssertionError`` when a call finds nothing queued and there is no ``default``.
    """

    def __init__(
        self,
        model: str = "fake",
        *,
        supports_tools: bool = True,
        supports_json_schema: bool = True,
        supports_images: bool = False,
        default: Sequence[Chunk] | None = None,
    ) -> None:
        self._model = model
        self._supports_tools = supports_tools
        self._supports_json_schema = supports_json_schema
        self._supports_images = supports_images
        self._default = list(default) if default is not None else None
        self._scripts: deque[FakeScript] = deque()
        self.calls: list[FakeCall] = []
        self.closed = False

    @property
    def model(self) -> str:
        return self._model

    @property
    def supports_tools(self) -> bool:
        return self._supports_tools

    @property
    def supports_json_schema(self) -> bool:
        return self._supports_json_schema

    @property
    def supports_images(self) -> bool:
        return self._supports_images

    @property
    def pending(self) -> int:
        """How many scripts are still queued."""
        return len(self._scripts)

    def enqueue(
        self,
        chunks: Sequence[Chunk],
        *,
        delay_s: float = 0.0,
        first_token_delay_s: float = 0.0,
        wait_for: asyncio.Event | None = None,
    ) -> FakeScript:
        """Script the next unscripted call: ``chunks`` in order, ``first_token_delay_s``
        before the first one, ``delay_s`` before each later one, and nothing at all until
        ``wait_for`` is set (when given)."""
        script = FakeScript(
            chunks=list(chunks),
            delay_s=delay_s,
            first_token_delay_s=first_token_delay_s,
            wait_for=wait_for,
        )
        self._scripts.append(script)
        return script

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
        self.calls.append(
            FakeCall(
                messages=[copy.deepcopy(dict(m)) for m in messages],
                tools=[copy.deepcopy(dict(t)) for t in tools] if tools is not None else None,
                json_schema=copy.deepcopy(dict(json_schema)) if json_schema is not None else None,
                temperature=temperature,
                max_tokens=max_tokens,
                sampling=copy.deepcopy(sampling),
            )
        )
        script = self._next_script()
        script.started.set()
        try:
            if script.wait_for is not None:
                await script.wait_for.wait()
            finished = False
            saw_tool_call = False
            for position, chunk in enumerate(script.chunks):
                pause = script.first_token_delay_s if position == 0 else script.delay_s
                if pause > 0:
                    await asyncio.sleep(pause)
                if isinstance(chunk, BaseException):
                    raise chunk
                if isinstance(chunk, str):
                    yield TextDelta(chunk)
                    continue
                saw_tool_call = saw_tool_call or isinstance(chunk, ToolCall)
                finished = isinstance(chunk, Finish)
                yield chunk
            if not finished:
                yield Finish("tool_calls" if saw_tool_call else "stop")
        finally:
            script.finished.set()

    async def aclose(self) -> None:
        self.closed = True

    def _next_script(self) -> FakeScript:
        if self._scripts:
            return self._scripts.popleft()
        if self._default is not None:
            return FakeScript(chunks=list(self._default))
        raise AssertionError(f"FakeChatModel({self._model!r}): a call came with no reply enqueued")
