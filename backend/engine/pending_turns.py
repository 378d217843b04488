"""The turns the memory worker folds in (``backend.engine.memory_worker``): a turn of
this process not merged yet (``PendingTurn``), the transcript grouped by turn, the state
a run over several turns reads, and each merged turn's memory report."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.engine import report as reports
from backend.engine.session_state import verbatim_items
from backend.engine.turn_types import TurnOutcome
from backend.hippocampus import SessionMemoryState
from backend.longterm.memory import WriteOutcome
from backend.memory.types import Emotion, Memory, Namespace
from backend.personas import Persona
from backend.sessions.store import Message


@dataclass(eq=False)
class PendingTurn:
    """A turn of this process its session's memory has not folded in yet: what the turn
    handed over when it began, and its ``outcome`` once its reply is stored."""

    turn_id: str
    session_id: str
    persona: Persona
    namespace: Namespace
    user_seq: int
    activated: asyncio.Future[Sequence[Memory]]  # the memories recalled (the gate needs them)
    reply_done: asyncio.Future[None]  # the reply is stored, or the turn ended without one
    report: asyncio.Future[dict[str, Any]]  # the turn's memory report, once merged
    # Set by the turn before ``reply_done`` (and before the session's next turn may begin);
    # a redo of the reply, not merged yet, replaces its text (``replace_reply``).
    outcome: TurnOutcome | None = None

    def ended(self) -> TurnOutcome:
        """The outcome, once ``reply_done`` is."""
        assert self.outcome is not None, "the turn's reply has not ended"
        return self.outcome


@dataclass
class TurnMessages:
    """One turn's messages in the transcript (``turn_id`` None: messages of no turn)."""

    turn_id: str | None
    messages: list[Message] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq

    @property
    def has_user(self) -> bool:
        return any(m.role == "user" for m in self.messages)

    @property
    def user_text(self) -> str:
        return next((m.content for m in self.messages if m.role == "user"), "")

    @property
    def reply(self) -> Message | None:
        return next((m for m in self.messages if m.role == "assistant"), None)

    @property
    def reply_stored(self) -> bool:
        return self.reply is not None and self.reply.status != "pending"


def group_turns(messages: Sequence[Message]) -> list[TurnMessages]:
    """Consecutive messages of one turn, in order."""
    groups: list[TurnMessages] = []
    for message in messages:
        if not groups or groups[-1].turn_id != message.turn_id:
            groups.append(TurnMessages(message.turn_id))
        groups[-1].messages.append(message)
    return groups


def read_with_earlier(
    state: SessionMemoryState, earlier: Sequence[TurnMessages]
) -> SessionMemoryState:
    """The state a run covering several turns reads: the earlier turns as the newest
    verbatim short-term items, and their user messages as ``missed`` (the messages no run
    has read: both contracts fold them into long-term, as after a failed run)."""
    if not earlier:
        return state
    items = tuple(verbatim_items([m for group in earlier for m in group.messages]))
    unread = tuple(item for item in items if item.role == "user")
    return dataclasses.replace(
        state, short_term=state.short_term + items, missed=state.missed + unread
    )


def turn_report(
    group: TurnMessages,
    info: dict[str, Any],
    gate: Sequence[WriteOutcome],
    emotion: Emotion | None,
    pending: PendingTurn | None,
) -> dict[str, Any]:
    """A merged turn's memory report (completed with its own process's part if ours)."""
    reply = group.reply
    report: dict[str, Any] = {
        "turn_id": group.turn_id,
        **reports.activation_part(None),
        **reports.outcomes_part(gate),
        "hippocampus": info,
        "reply": {
            "status": reply.status if reply is not None else "incomplete",
            "error": reply.error if reply is not None else "no reply",
        },
        "user_emotion": reports.emotion_part(emotion),
    }
    return report if pending is None else own_report(pending, report)


def own_report(pending: PendingTurn, report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with what only the turn's own process knows: its activation, the
    outcomes of the memory tools it called, how its reply ended."""
    outcome = pending.ended()
    tools = reports.outcomes_part(outcome.tool_outcomes)
    return {
        **report,
        "turn_id": pending.turn_id,
        **reports.activation_part(outcome.activation),
        **{key: [*report.get(key, []), *value] for key, value in tools.items()},
        "reply": {"status": outcome.status, "error": outcome.error},
    }
