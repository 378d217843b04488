"""A stateless completion: a client's utility request (a chat title, tags, search queries,
a SillyTavern quiet prompt) answered from its own messages alone.

No persona, no session, no memory read or written. It runs on the background model (the
hippocampus role): on the embedded default that model steps aside while a reply is
generating (``backend.llm.reply_first``), so a client's tasks never slow the chat's own
turns.

Failure policy: an ``LLMError`` reaches the caller, as a turn's does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from backend.llm.port import ChatModel, Finish, Message, Sampling, TextDelta, Usage


@dataclass
class PlainCompletion:
    model: ChatModel
    messages: Sequence[Message]
    temperature: float | None = None
    max_tokens: int | None = None
    sampling: Sampling | None = None
    reply: str = ""
    usage: Usage | None = None
    finish_reason: str | None = None
    _parts: list[str] = field(default_factory=list)

    async def stream(self) -> AsyncIterator[str]:
        async for delta in self.model.stream(
            self.messages,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            sampling=self.sampling,
        ):
            if isinstance(delta, TextDelta) and delta.text:
                self._parts.append(delta.text)
                self.reply = "".join(self._parts)
                yield delta.text
            elif isinstance(delta, Usage):
                self.usage = delta
            elif isinstance(delta, Finish):
                self.finish_reason = delta.reason
