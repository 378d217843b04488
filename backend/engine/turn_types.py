"""The types a turn shares with its background work (docs/architecture.md, "One turn").

They live apart from ``backend.engine.turn`` so that the background steps
(``backend.engine.merge``, ``backend.engine.memory_worker``) never import the turn:
the turn hands them what they need — the engine's parts (``EngineParts``) and how its
reply ended (``TurnOutcome``) — instead of being read by them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from backend.clock import Clock
from backend.engine.conversation_match import ClientMessage, Final
from backend.engine.memory_health import MemoryHealth
from backend.llm.port import ChatModel, Sampling
from backend.longterm.memory import Activation, LongTermMemory, WriteOutcome
from backend.sessions.store import SessionStore


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """What the engine reads of the settings; ``services.turn_settings`` derives it, so
    every default lives in the settings (backend/config/), none here."""

    token_budget: int
    hippocampus_timeout_s: float
    # "full": the hippocampus returns background, short-term and long-term; "compact":
    # it only extracts facts and code keeps the rest (small local models;
    # backend.hippocampus.compact).
    hippocampus_mode: Literal["full", "compact"]
    use_tools: bool  # the chat provider supports function calling (config)
    # Replies go through backend.engine.reply_guard (config: chat.reply_guard).
    reply_guard: bool
    # The mode is config's "auto": the memory worker may turn a full contract that keeps
    # failing validation into the compact one (backend.engine.memory_health).
    hippocampus_auto: bool = False
    # The compact grammar constrains each fact's subject (config:
    # hippocampus.compact_subjects; backend.hippocampus.compact.fact_openers).
    compact_subjects: bool = False
    chat_temperature: float | None = None
    chat_max_tokens: int | None = None
    # Seconds from the request by which a guard retry must show something, else the
    # stand-in is shown (config: chat.retry_deadline); None: none.
    retry_deadline_s: float | None = None


@dataclass(frozen=True, slots=True)
class TurnRequest:
    user_id: str
    text: str  # the new user message; "" when the request has none (continue, reply)
    persona_id: str | None = None
    session_id: str | None = None  # the client named its session
    client_system: str | None = None
    # The client's user/assistant messages before ``text`` (all of them when ``final`` is
    # not "turn"): they find the session they continue, or seed a new one
    # (``backend.engine.session_placement``).
    history: Sequence[tuple[str, str]] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    # What the last message asks for: a new user turn (or a regeneration of the last
    # one), the continuation of the last reply, or one more reply (a group chat).
    final: Final = "turn"
    instruction: str | None = None  # the client's system messages after its last message
    examples: Sequence[Mapping[str, Any]] = ()  # a client's example dialogue, names kept
    sampling: Sampling | None = None
    # The client always sends the whole conversation (``conversation_match.place``).
    whole_history: bool = False
    # The new message's image parts, for a chat model that takes images (the transcript
    # and the memory keep the text).
    images: Sequence[Mapping[str, Any]] = ()

    def client_messages(self) -> tuple[ClientMessage, ...]:
        messages = [
            ClientMessage(role, text)  # type: ignore[arg-type]
            for role, text in self.history
            if role in ("user", "assistant")
        ]
        if self.final == "turn":
            messages.append(ClientMessage("user", self.text))
        return tuple(messages)


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn's reply ended, as stored: what the merge folds in and what only the
    turn's own process can add to its memory report (the activation, the memory tools'
    outcomes). Built by the turn once its reply is stored, before the session is
    released."""

    reply: str
    reply_seq: int | None  # the reply's message seq; None when no reply row was stored
    status: str  # "complete" or "incomplete"
    error: str | None
    activation: Activation | None
    tool_outcomes: tuple[WriteOutcome, ...] = ()


class EngineParts(Protocol):
    """What the turn and its background steps use of ``TurnEngine``."""

    sessions: SessionStore
    long_term: LongTermMemory
    chat: ChatModel
    hippocampus: ChatModel
    settings: TurnSettings
    memory_health: MemoryHealth
    clock: Clock

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        """Run ``coro`` as background work the engine owns (``TurnEngine.drain``)."""
        ...
