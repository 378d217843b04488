"""A turn in flight: its reply streamed, stored, and handed to memory (docs/architecture.md,
"One turn", steps 4 and 5).

``TurnEngine.turn`` (``backend.engine.turn``) makes a ``Turn`` once the user message is
stored and the memories recalled; ``Turn.stream`` yields the main model's text as it
arrives and stores the reply as it ends. However the reply ends — complete, cut by a model
failure, by the client going away, or never streamed — ``_finish`` stores it, releases the
session for its next turn and gives the memory worker the turn's ``TurnOutcome``; the
merge itself is background work the engine owns.

Failure policy: a main-model failure is raised to the reader after the partial reply has
been stored marked ``incomplete``; so is any other error (a bug), with the row still given
a final status; the merge still runs so the next turn works.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from backend.engine import report as reports
from backend.engine.echo_bias import echo_bias
from backend.engine.memory_worker import MemoryWorker
from backend.engine.merge import reinforce_recalled
from backend.engine.pending_turns import PendingTurn
from backend.engine.prompt import (
    HEALTH_RULE,
    MEMORY_PREAMBLE,
    second_person,
)
from backend.engine.reply_guard import (
    Rejection,
    ReplyGuard,
    asks_caution,
    asks_question,
    asks_to_make,
    language_lead,
)
from backend.engine.stand_ins import lost_thread
from backend.engine.tools import MAX_TOOL_ROUNDS, MEMORY_TOOLS, MemoryTools
from backend.engine.turn_types import EngineParts, TurnOutcome
from backend.llm.port import (
    Delta,
    Finish,
    LLMError,
    Sampling,
    TextDelta,
    Tokenizing,
    ToolCall,
    ToolSpec,
    Usage,
)
from backend.longterm.memory import Activation, WriteOutcome
from backend.memory.types import Memory, Namespace
from backend.personas import Persona
from backend.sessions.store import Message, Session

GONE = "the client went away"
# The app's own rules in the prompt: a reply's sentence that recites them is left out.
INSTRUCTIONS = (MEMORY_PREAMBLE, HEALTH_RULE)
# The notes ``recall_reminder`` says: the first two that answer the question.
RECALLED_SAID = 2
# Attempts at a reply the guard lets through; the last one is shown whatever it says.
MAX_ATTEMPTS = 3
# The last this many pieces before the reply cap are shown a whole sentence at a time, so
# that a reply the cap cuts ends at a sentence's end (``ReplyGuard.near_cap``); a piece
# of a stream is about a token.
CAP_TAIL_PIECES = 40
RESAMPLE_SEED_STEP = 7919  # a retry's seed: the client's + this × the attempt
RETRY_WARMING = 0.15  # a retry's temperature: + this × the attempt, at most the max
MAX_RETRY_TEMPERATURE = 1.0
log = logging.getLogger(__name__)


class TurnHost(EngineParts, Protocol):
    """What a turn uses of its engine: the engine's parts and its memory worker."""

    memory: MemoryWorker


@dataclass
class Turn:
    """A turn in flight. Iterate ``stream()`` once; then ``merged`` resolves to the memory
    report, once the memory worker has merged the turn."""

    session: Session
    persona: Persona
    turn_id: str
    activation: Activation | None
    messages: list[dict[str, Any]]
    _engine: TurnHost
    _pending: PendingTurn | None  # None: a redo (regeneration, continuation), not merged
    _release: Callable[[], None]  # the session's turn lock, once the reply is stored
    _temperature: float | None = None
    _max_tokens: int | None = None
    _sampling: Sampling | None = None
    kind: str = "turn"  # conversation_match.Kind
    # A redo's stored reply: replaced by ``_base`` + the new text once the stream ends.
    _target: Message | None = None
    _base: str = ""
    _redo_report: asyncio.Future[dict[str, Any]] | None = None
    _redo_emotion: dict[str, Any] | None = None
    reply: str = ""
    status: str = "pending"
    error: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    merged: asyncio.Future[dict[str, Any]] | None = None
    reply_seq: int | None = None  # the reply's message seq, once stored
    _tool_outcomes: list[WriteOutcome] = field(default_factory=list)
    _tool_recalled: list[Memory] = field(default_factory=list)
    # Reinforcement starts with the first token: the injected memories are in use by then.
    _reinforced: asyncio.Future[None] | None = None
    # The recalled memories the prompt shows (this turn's block and the earlier blocks it
    # carries), less those held below the relevance floor only: what is reinforced.
    injected: tuple[Memory, ...] = ()
    _stream: AsyncGenerator[str, None] | None = None  # the one ``stream()`` handed out
    rejected: list[str] = field(default_factory=list)  # the guard's reasons, per retry
    rejected_openings: list[str] = field(default_factory=list)  # what each one stopped
    health_notes: tuple[str, ...] = ()  # recalled health notes shown with this turn
    # The recalled notes the message is about: a reply that denies knowing them is
    # sampled again with them (``reply_guard``'s "forgot").
    answer_notes: tuple[str, ...] = ()
    # The session's earlier replies, older ones included (``SESSION_REPLIES``): the guard
    # leaves out a sentence said in any of them, not only in the prompt's.
    session_replies: tuple[str, ...] = ()
    started: datetime | None = None  # when the request came (``TurnEngine._begin``)

    @property
    def namespace(self) -> Namespace:
        return Namespace(self.session.user_id, self.persona.id)

    @property
    def recalled(self) -> list[Memory]:
        return [] if self.activation is None else self.activation.memories

    def stream(self) -> AsyncGenerator[str, None]:
        """The reply's text as it arrives. Raises ``LLMError`` after storing what came."""
        self._stream = self._streamed()
        return self._stream

    def outcome(self) -> TurnOutcome:
        """How the reply ended, for the memory worker (``PendingTurn.outcome``)."""
        return TurnOutcome(
            reply=self.reply,
            reply_seq=self.reply_seq,
            status=self.status,
            error=self.error,
            activation=self.activation,
            tool_outcomes=tuple(self._tool_outcomes),
        )

    async def close(self) -> None:
        """End the turn however far it got (``TurnEngine.turn``'s exit; idempotent).

        A stream cut mid-way ends as one whose client went away (the partial reply is
        stored marked ``incomplete``); a turn whose stream never began ends the same way,
        with no reply row. Either way the session is released and the merge is the
        engine's background work, not the caller's: this waits for the reply's storing
        only, never for the merge."""
        stream = self._stream
        if stream is not None:
            if stream.ag_running:
                return  # read by another task right now: its own end finishes the turn
            await stream.aclose()  # a stream suspended mid-way: its ``finally`` stores it
        if self.merged is None:  # the stream never began
            self.merged = self._report_future()
            await asyncio.shield(self.end_unstreamed(GONE))
        # A report nobody reads may fail (the memory worker logs why): not an error here.
        self.merged.add_done_callback(_retrieve)

    def end_unstreamed(self, error: str) -> asyncio.Future[None]:
        """End a turn whose reply never streamed: stored as ``incomplete`` with ``error``
        (no reply row), released, handed to memory. Spawned at once, so no cancellation
        of the caller can stop it."""
        self.status, self.error = "incomplete", error
        return self._engine.spawn(self._finish(None))

    async def _streamed(self) -> AsyncGenerator[str, None]:
        engine = self._engine
        # The pending reply row is written while the model starts, off the TTFT path (a
        # redo replaces its target row at the end instead).
        reply_row = None
        if self._target is None:
            reply_row = asyncio.ensure_future(
                asyncio.to_thread(
                    engine.sessions.append_message,
                    self.session.id,
                    "assistant",
                    "",
                    status="pending",
                    turn_id=self.turn_id,
                )
            )
        parts: list[str] = []
        try:
            async for text in self._generate(parts):
                if self._reinforced is None and self._target is None:
                    self._reinforced = engine.spawn(
                        reinforce_recalled(
                            engine.long_term, self.namespace, self.injected, self.session.id
                        )
                    )
                yield text
            self.status = "complete"
        except LLMError as exc:
            self.status, self.error = "incomplete", str(exc)
            raise
        except (asyncio.CancelledError, GeneratorExit):
            self.status, self.error = "incomplete", GONE
            raise
        except Exception as exc:  # a bug, not the model: the row still gets a final status
            self.status, self.error = "incomplete", f"the turn failed: {exc!r}"
            raise
        finally:
            self.reply = "".join(parts)
            # Spawned before anything is awaited: a client that goes away can cancel this
            # generator again mid-finally, and the row must be finished (and the session
            # released) all the same.
            stored = engine.spawn(self._finish(reply_row, streamed=True))
            self.merged = self._report_future()
            await asyncio.shield(stored)

    def _report_future(self) -> asyncio.Future[dict[str, Any]]:
        if self._pending is not None:
            return self._pending.report
        assert self._redo_report is not None
        return self._redo_report

    async def _finish(self, reply_row: asyncio.Future[Any] | None, streamed: bool = False) -> None:
        """Store the reply, let the session's next turn begin, hand the turn to memory:
        ``PendingTurn.outcome`` then ``reply_done``, which the memory worker's merge
        waits for (``backend.engine.memory_worker``) before folding the reply in."""
        try:
            if self._target is not None:
                if streamed and self.reply:
                    await self._replace_target()
            elif reply_row is not None:
                row = await reply_row
                self.reply_seq = row.seq
                sessions = self._engine.sessions
                await asyncio.to_thread(
                    sessions.finish_message, row.id, self.reply, self.status, self.error
                )
        finally:
            if self._pending is not None:  # before the next turn can redo this reply
                self._pending.outcome = self.outcome()
            self._release()
            engine = self._engine
            await reinforce_recalled(
                engine.long_term, self.namespace, self._tool_recalled, self.session.id
            )
            if self._reinforced is not None:
                await self._reinforced
            if self._pending is not None and not self._pending.reply_done.done():
                self._pending.reply_done.set_result(None)
            if self._redo_report is not None and not self._redo_report.done():
                self._redo_report.set_result(self._redo_summary())

    async def _replace_target(self) -> None:
        """A redo's reply takes its target's place, in the transcript and in short-term
        memory (once merged); long-term memory is left alone: the turn's facts were
        written when it first ran."""
        target = self._target
        assert target is not None
        content = self._base + self.reply
        sessions = self._engine.sessions
        # A regeneration keeps the text it replaces as a version (swipes, the UI's ‹ 1/2 ›).
        await asyncio.to_thread(
            functools.partial(
                sessions.replace_message, keep_previous=self.kind == "regenerate"
            ),
            target.id, content, self.status, self.error,
        )  # fmt: skip
        self.reply_seq = target.seq
        self._engine.memory.replace_reply(self.session.id, target, content)

    def _redo_summary(self) -> dict[str, Any]:
        """A redo's memory report: what it recalled; nothing was merged or written."""
        return {
            "turn_id": self.turn_id,
            **reports.activation_part(self.activation),
            **reports.outcomes_part(self._tool_outcomes),
            "hippocampus": {"status": "skipped", "reason": f"{self.kind}: nothing new to merge"},
            "reply": {"status": self.status, "error": self.error},
            "user_emotion": self._redo_emotion,
        }

    async def _generate(self, parts: list[str]) -> AsyncIterator[str]:
        engine = self._engine
        model = engine.chat
        messages = list(self.messages)
        tools_on = engine.settings.use_tools and model.supports_tools
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            offer_tools = tools_on and round_ < MAX_TOOL_ROUNDS
            calls: list[ToolCall] = []
            async for delta in self._guarded(messages, MEMORY_TOOLS if offer_tools else None):
                if isinstance(delta, TextDelta) and delta.text:
                    parts.append(delta.text)
                    yield delta.text
                elif isinstance(delta, ToolCall):
                    calls.append(delta)
                elif isinstance(delta, Usage):
                    self.usage = delta
                elif isinstance(delta, Finish):
                    self.finish_reason = delta.reason
            if not calls:
                return
            # Execute the memory tools server-side and continue the same visible answer.
            messages.append(
                {
                    "role": "assistant",
                    "content": "".join(parts) or None,
                    "tool_calls": [call.as_message_part() for call in calls],
                }
            )
            tools = MemoryTools(engine.long_term, self.namespace, self.session.id)
            for call in calls:
                result = await asyncio.to_thread(tools.execute, call.name, call.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            self._tool_outcomes += tools.outcomes
            self._tool_recalled += tools.recalled

    async def _guarded(
        self, messages: list[dict[str, Any]], tools: Sequence[ToolSpec] | None
    ) -> AsyncIterator[Delta]:
        """The model's deltas through the reply guard (``backend.engine.reply_guard``): an
        attempt whose opening is a refusal, an echo, a repeat of an earlier reply or a
        help-desk line is stopped before anything of it is shown, and sampled again with a
        hint for the model (and another seed); the last attempt is shown whatever it
        says, unless it gives a go-ahead against a recalled health note, says the
        message back or refuses: then the health note is said back instead, to a go-ahead
        or a message that asks leave (``health_reminder``), or the notes that answer the
        question (``recall_reminder``), or, to a refusal or with neither, a plain request
        to go on (``lost_thread``). A retry started before the deadline
        (``retry_deadline_s`` after the request) that has shown nothing by it, or a last
        attempt that would start after it, gives way to that same last resort at once,
        its reason "late". A first retry that starts after it (the first attempt alone
        took that long: a long prompt read) runs: its answer is worth its second (the
        probe sessions).
        Help-desk sentences are left out of every attempt. A continuation, or a guard
        switched off (``chat.reply_guard``), streams as the model writes."""
        on = self._engine.settings.reply_guard and self.kind != "continue"
        user_text, earlier = _conversation(messages)
        said_before = _user_messages(messages)[:-1]
        if self._target is not None and self.kind == "regenerate":
            earlier.append(self._target.content)  # a regeneration is asked to differ
        hints: list[str] = []
        bias: dict[str, float] = {}  # against the message's words, once an attempt echoed
        # A message in the other language than the reply before it: said before the
        # message, never after it (there, the 1.5B answered the line instead: "谢谢你的关心
        # 和鼓励。" to a message about overtime, the messages part).
        lead = language_lead(user_text, earlier) if on else None
        if lead is not None and messages[-1].get("role") == "user":
            messages = [*messages[:-1], {"role": "system", "content": lead}, messages[-1]]
        deadline = self._retry_deadline() if on else None
        for attempt in range(MAX_ATTEMPTS if on else 1):
            last = attempt == MAX_ATTEMPTS - 1
            # A retry started before the deadline must show something by it; the first
            # retry after a first attempt that alone took past it runs unbounded.
            bound: datetime | None = None
            if attempt and not self._past(deadline):
                bound = deadline
            elif last and deadline is not None:  # no time left for a third attempt
                yield TextDelta(self._last_resort(user_text, earlier, "late"))
                yield Finish("stop")
                return
            guard = (
                ReplyGuard(
                    user_text,
                    earlier,
                    check_opening=not last,
                    health_notes=self.health_notes,
                    answer_notes=self.answer_notes,
                    session_replies=self.session_replies,
                    earlier_messages=said_before,
                    instructions=(self.persona.system_prompt, *INSTRUCTIONS),
                    first_attempt=attempt == 0,
                )
                if on
                else None
            )
            prompt = messages + [{"role": "system", "content": hint} for hint in hints]
            stream = self._engine.chat.stream(
                prompt,
                tools=tools,
                temperature=_warmer(self._temperature, attempt),
                max_tokens=self._max_tokens,
                sampling=_resampled(self._sampling, attempt, bias),
            )
            rejected: Rejection | None = None
            late = False  # a retry still showing nothing at its deadline
            shown_any = False
            ending: list[Delta] = []  # Usage and Finish, after what the guard still holds
            cap = self._max_tokens
            tail_from = max(1, cap - CAP_TAIL_PIECES) if cap else None
            pieces = 0
            try:
                async for delta in stream:
                    if guard is None or not isinstance(delta, TextDelta):
                        if guard is not None and isinstance(delta, Usage | Finish):
                            ending.append(delta)
                        else:
                            yield delta
                        continue
                    pieces += 1
                    if not shown_any and self._past(bound):
                        late = True
                        break
                    if pieces == tail_from:
                        guard.near_cap()
                    shown = guard.feed(delta.text)
                    if isinstance(shown, Rejection):
                        rejected = shown
                        break
                    if shown:
                        shown_any = shown_any or bool(shown.strip())
                        yield TextDelta(shown)
                if rejected is None and guard is not None and not late:
                    cut = any(isinstance(d, Finish) and d.reason == "length" for d in ending)
                    rest = guard.end(cut=cut)
                    if isinstance(rest, Rejection):
                        rejected = rest
                    elif shown_any or rest.strip() or not guard.left_out:
                        yield TextDelta(rest)
                    else:  # every sentence was left out (a retry's hint said back)
                        yield TextDelta(lost_thread(user_text, [*self.session_replies, *earlier]))
            except LLMError:
                held = guard.flush() if guard is not None else ""
                if held:  # what came before the failure is shown (and stored) with it
                    yield TextDelta(held)
                raise
            finally:
                close = getattr(stream, "aclose", None)  # stops a generation cut short
                if close is not None:
                    await close()
            if late:
                yield TextDelta(self._last_resort(user_text, earlier, "late"))
                yield Finish("stop")
                return
            if rejected is None:
                for delta in ending:
                    yield delta
                return
            self.rejected.append(rejected.reason)
            self.rejected_openings.append(rejected.opening)
            log.info(
                "turn %s: attempt %d rejected (%s): %r",
                self.turn_id, attempt + 1, rejected.reason, rejected.opening[:80],
            )  # fmt: skip
            if last:  # the last attempt is checked for a go-ahead, an echo, "I don't know"
                yield TextDelta(self._last_resort(user_text, earlier, rejected.reason))
                yield Finish("stop")
                return
            hints.append(rejected.hint)
            if rejected.reason == "echo" and not bias and isinstance(self._engine.chat, Tokenizing):
                bias = echo_bias(user_text, self._engine.chat.token_ids)

    def _last_resort(self, user_text: str, earlier: Sequence[str], reason: str) -> str:
        """What the turn shows when no attempt may be: the note the message is about, a
        health note to a go-ahead or to a message that asks leave; else, to a question,
        the notes that answer it (not the lactose note to "what's his name again?", a
        third echo: the probes); to a refusal, or with neither, ``lost_thread``. ``reason``:
        the last attempt's rejection, or "late" (the deadline; then the reasons of the
        attempts before it count)."""
        if reason == "late":
            log.info("turn %s: the retries ran out of time", self.turn_id)
            self.rejected.append("late")
            self.rejected_openings.append("")
            before = self.rejected[:-1]
            reason = "health" if "health" in before else (before[-1] if before else "late")
        health = reason == "health" or asks_caution(user_text)
        if reason == "forgot":
            return recall_reminder(user_text, self.answer_notes)
        if self.health_notes and health and reason != "refusal":
            return health_reminder(user_text, self.health_notes)
        # Said to a question only: "I do remember what you told me: Your interview next
        # Wednesday…" answered "thanks, that's fair. I'll wait until after the interview",
        # and the cat note a poem request (the long session, seed 1).
        asked = asks_question(user_text) and not asks_to_make(user_text)
        if self.answer_notes and reason != "refusal" and asked:
            return recall_reminder(user_text, self.answer_notes)
        return lost_thread(user_text, [*self.session_replies, *earlier])

    def _retry_deadline(self) -> datetime | None:
        seconds = self._engine.settings.retry_deadline_s
        if seconds is None or self.started is None:
            return None
        return self.started + timedelta(seconds=seconds)

    def _past(self, deadline: datetime | None) -> bool:
        return deadline is not None and self._engine.clock.now() >= deadline


def recall_reminder(user_text: str, notes: Sequence[str]) -> str:
    """The reply when every attempt said it did not know what the notes next to the
    question say: the first two, said back (in Chinese to a message in Chinese)."""
    said = " ".join(second_person(note).strip() for note in notes[:RECALLED_SAID])
    if any("\u3400" <= ch <= "\u9fff" for ch in user_text):
        return f"我记得你说过：{said}"
    return f"I do remember what you told me: {said}"


def health_reminder(user_text: str, notes: Sequence[str]) -> str:
    """The reply when every attempt gave a go-ahead against a recalled health note: the
    note, said back, and a question (in Chinese to a message in Chinese)."""
    said = " ".join(second_person(note).strip() for note in notes)
    if any("\u3400" <= ch <= "\u9fff" for ch in user_text):
        return f"等一下，我记得：{said} 有没有对你来说安全的选择？"
    return f"Hold on, I remember this: {said} Is there a way to do it that's safe for you?"


def _text(message: Mapping[str, Any]) -> str | None:
    """A prompt message's text (its text parts, for one with images), or None."""
    content = message.get("content")
    if isinstance(content, list):  # text and image parts
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None


def _conversation(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """The prompt's last user message (its text) and the assistant replies before it."""
    user_text, earlier = "", []
    for message in messages:
        content = _text(message)
        if content is None:
            continue
        if message.get("role") == "user":
            user_text = content
        elif message.get("role") == "assistant" and content.strip():
            earlier.append(content)
    return user_text, earlier


def _user_messages(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The prompt's user messages, in order."""
    return [
        text
        for message in messages
        if message.get("role") == "user" and (text := _text(message)) is not None
    ]


def _warmer(temperature: float | None, attempt: int) -> float | None:
    """A retry's temperature: a little higher, so it leaves the rut the attempt was in
    (unset stays the model's default; 0, greedy, stays greedy: the hint changes it)."""
    if not temperature or attempt == 0:
        return temperature
    return min(MAX_RETRY_TEMPERATURE, temperature + RETRY_WARMING * attempt)


def _resampled(
    sampling: Sampling | None, attempt: int, bias: Mapping[str, float] | None = None
) -> Sampling | None:
    """A retry's sampling: another seed where the client fixed one (else the model draws
    a new one each call), and ``bias`` (``echo_bias``) under the client's own logit bias,
    which wins for a token both name."""
    if attempt == 0:
        return sampling
    if bias:
        own = dict(sampling.logit_bias or {}) if sampling is not None else {}
        sampling = dataclasses.replace(sampling or Sampling(), logit_bias={**bias, **own})
    if sampling is None or sampling.seed is None:
        return sampling
    return dataclasses.replace(sampling, seed=sampling.seed + RESAMPLE_SEED_STEP * attempt)


def _retrieve(report: asyncio.Future[Any]) -> None:
    if not report.cancelled():
        report.exception()
