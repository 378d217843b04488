"""The stand-in models of ``bench.memory_formation``: scripted replies, the oracle
hippocampus, and a hippocampus that fails on purpose (``FlakyHippocampus``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence

from backend.cli.conversation_script import ScriptTurn
from backend.llm.port import (
    ChatModel,
    Delta,
    Finish,
    JsonSchema,
    LLMUnavailable,
    Message,
    Sampling,
    StreamingChatModel,
    TextDelta,
    ToolSpec,
)
from bench.formation_script import OracleFacts

NO_REPLY = "OK."  # the reply to a user turn the script gives no assistant turn for


class _StandIn(StreamingChatModel):
    """A ``ChatModel`` that streams one prepared text per call."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def model(self) -> str:
        return self._name

    @property
    def supports_tools(self) -> bool:
        return False

    @property
    def supports_json_schema(self) -> bool:
        return True

    def _text(self) -> str:
        raise NotImplementedError

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
        yield TextDelta(self._text())
        yield Finish("stop")

    async def aclose(self) -> None:
        return None


class ScriptedReplies(_StandIn):
    """The main model of ``--replies scripted``: streams the reply set with ``expect``."""

    def __init__(self) -> None:
        super().__init__("scripted-replies")
        self._next = NO_REPLY

    def expect(self, turn: ScriptTurn) -> None:
        self._next = turn.reply or NO_REPLY

    def _text(self) -> str:
        return self._next


class OracleHippocampus(_StandIn):
    """The hippocampus of ``--hippocampus perfect``: for the turn set with ``expect``, the
    JSON ``{"long_term": [...]}`` with that turn's ideal facts (none: an empty list)."""

    def __init__(self, facts: OracleFacts) -> None:
        super().__init__("oracle-hippocampus")
        self.facts = facts
        self._key: tuple[int, int] | None = None

    def expect(self, turn: ScriptTurn) -> None:
        self._key = (turn.session, turn.index)

    def _text(self) -> str:
        items = self.facts.get(self._key, []) if self._key is not None else []
        return json.dumps({"long_term": items}, ensure_ascii=False)


class FlakyHippocampus(StreamingChatModel):
    """The configured hippocampus, failing every ``every``-th run (``--fail-every``): the
    failure is ``LLMUnavailable``, as from a provider that is down, so the turn takes the
    failure fallback and the catch-up must recover the turn's facts on a later run."""

    def __init__(self, inner: ChatModel, every: int) -> None:
        self.inner = inner
        self.every = every
        self.calls = 0

    def expect(self, turn: ScriptTurn) -> None:
        """Tell a scripted inner model (the oracle) which turn comes next."""
        expect = getattr(self.inner, "expect", None)
        if callable(expect):
            expect(turn)

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def supports_tools(self) -> bool:
        return False

    @property
    def supports_json_schema(self) -> bool:
        return self.inner.supports_json_schema

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
        self.calls += 1
        if self.calls % self.every == 0:
            raise LLMUnavailable("failure injected by --fail-every", model=self.model)
        async for delta in self.inner.stream(
            messages,
            tools=tools,
            json_schema=json_schema,
            temperature=temperature,
            max_tokens=max_tokens,
            sampling=sampling,
        ):
            yield delta

    async def aclose(self) -> None:
        await self.inner.aclose()
