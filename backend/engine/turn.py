"""One chat turn: persist → activation ∥ hippocampus → main stream → persist → merge (turn.md).

``TurnEngine.begin`` persists the user message, hands the turn to the session's memory
worker (which starts the hippocampus at once) and waits only for activation;
``Turn.stream`` then yields the main model's text as it arrives and persists the reply
when it ends. A reply never waits for a hippocampus run, not even the previous turn's:
it is prompted from the last merged state plus the turns not merged yet, verbatim.
Replies of one session are ordered — turn t+1 begins once turn t's reply is stored —
while different sessions never block each other. The merge (short-term, background,
save gate, user emotion, memory report) is the memory worker's
(``backend.engine.memory_worker``), in order, one hippocampus run per batch of waiting
turns; the background steps themselves are in ``backend.engine.merge``; loading, seeding
and saving the session's memory state in ``backend.engine.session_state``.

Which session a request's turn runs in, and what it does there, is
``backend.engine.session_placement``'s: a new turn; a redo (a regeneration replaces the
turn's stored reply, a continuation extends it: neither adds a turn or runs the
hippocampus again, so the turn's memories are written once); or one more reply with no
user message (a group chat's next speaker), which the memory worker folds in verbatim.

Failure policy: the hippocampus can never break or delay a reply (failure, timeout or
garbage → the deterministic fallback, reported); activation trouble yields no recalled
memories; a main-model failure is raised to the caller after the partial reply has been
stored marked ``incomplete``; the merge still runs so the next turn works.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from backend.clock import Clock
from backend.engine import report as reports
from backend.engine.conversation_match import (
    ClientMessage,
    Final,
    Placement,
    place,
    tail_needed,
)
from backend.engine.memory_worker import MemoryWorker, PendingTurn
from backend.engine.merge import reinforce_recalled
from backend.engine.prompt import build_main_messages
from backend.engine.session_order import acquire_session, release_session
from backend.engine.session_placement import Resolved, SessionConflict, plain_turn, resolve
from backend.engine.session_state import load_state, reply_view, seed_state, without_turn
from backend.engine.shown_notes import ShownNotes
from backend.engine.tools import MAX_TOOL_ROUNDS, MEMORY_TOOLS, MemoryTools
from backend.hippocampus import SessionMemoryState
from backend.llm.port import ChatModel, Finish, LLMError, Sampling, TextDelta, ToolCall, Usage
from backend.longterm.memory import Activation, LongTermMemory, QueryEmbedding, WriteOutcome
from backend.memory.types import Memory, Namespace
from backend.personas import Persona, PersonaRegistry
from backend.sessions.locks import LockHandle
from backend.sessions.store import Message, Session, SessionStore

log = logging.getLogger(__name__)

__all__ = ["SessionConflict", "Turn", "TurnEngine", "TurnRequest", "TurnSettings"]


@dataclass(frozen=True, slots=True)
class TurnSettings:
    token_budget: int = 1500
    hippocampus_timeout_s: float = 120.0
    # "full": turn.md's contract (background, short-term and long-term from the model);
    # "compact": the model only extracts facts, code keeps the rest (small local models;
    # backend.hippocampus.compact).
    hippocampus_mode: Literal["full", "compact"] = "full"
    use_tools: bool = False  # the chat provider supports function calling (config)
    chat_temperature: float | None = None
    chat_max_tokens: int | None = None


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


@dataclass
class Turn:
    """A turn in flight. Iterate ``stream()`` once; then ``merged`` resolves to the memory
    report, once the memory worker has merged the turn."""

    session: Session
    persona: Persona
    turn_id: str
    activation: Activation | None
    messages: list[dict[str, Any]]
    _engine: TurnEngine
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
    # Reinforcement starts with the first token: the recalled memories are in use by then.
    _reinforced: asyncio.Future[None] | None = None

    @property
    def namespace(self) -> Namespace:
        return Namespace(self.session.user_id, self.persona.id)

    @property
    def recalled(self) -> list[Memory]:
        return [] if self.activation is None else self.activation.memories

    async def stream(self) -> AsyncIterator[str]:
        """The reply's text as it arrives. Raises ``LLMError`` after storing what came."""
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
                    self._reinforced = engine._spawn(
                        reinforce_recalled(engine, self, self.recalled)
                    )
                yield text
            self.status = "complete"
        except LLMError as exc:
            self.status, self.error = "incomplete", str(exc)
            raise
        except (asyncio.CancelledError, GeneratorExit):
            self.status, self.error = "incomplete", "the client went away"
            raise
        except Exception as exc:  # a bug, not the model: the row still gets a final status
            self.status, self.error = "incomplete", f"the turn failed: {exc!r}"
            raise
        finally:
            self.reply = "".join(parts)
            # Spawned before anything is awaited: a client that goes away can cancel this
            # generator again mid-finally, and the row must be finished (and the session
            # released) all the same.
            stored = engine._spawn(self._finish(reply_row, streamed=True))
            self.merged = self._report_future()
            await asyncio.shield(stored)

    def _report_future(self) -> asyncio.Future[dict[str, Any]]:
        if self._pending is not None:
            return self._pending.report
        assert self._redo_report is not None
        return self._redo_report

    async def _finish(self, reply_row: asyncio.Future[Any] | None, streamed: bool = False) -> None:
        """Store the reply, let the session's next turn begin, hand the turn to memory."""
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
            self._release()
            await reinforce_recalled(self._engine, self, self._tool_recalled)
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
        await asyncio.to_thread(
            sessions.replace_message, target.id, content, self.status, self.error
        )
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
            async for delta in model.stream(
                messages,
                tools=MEMORY_TOOLS if offer_tools else None,
                temperature=self._temperature,
                max_tokens=self._max_tokens,
                sampling=self._sampling,
            ):
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


def _continue_base(stored: str, request: TurnRequest) -> str:
    """The text a continuation extends: the client's copy of the reply (it may have been
    edited or trimmed there), else the stored one."""
    sent = [text for role, text in request.history if role == "assistant"]
    return sent[-1] if sent and sent[-1].strip() else stored


class TurnEngine:
    """Runs turns against the session store, the long-term memory and the two models."""

    def __init__(
        self,
        *,
        sessions: SessionStore,
        long_term: LongTermMemory,
        chat: ChatModel,
        hippocampus: ChatModel,
        personas: PersonaRegistry,
        clock: Clock,
        settings: TurnSettings = TurnSettings(),
    ) -> None:
        self.sessions = sessions
        self.long_term = long_term
        self.chat = chat
        self.hippocampus = hippocampus
        self.personas = personas
        self.clock = clock
        self.settings = settings
        self._locks: dict[str, asyncio.Lock] = {}
        self._background: set[asyncio.Future[Any]] = set()
        self.memory = MemoryWorker(self)
        self.shown_notes = ShownNotes()

    # --- sessions ----------------------------------------------------------------------

    async def open_session(self, request: TurnRequest) -> Resolved:
        """The request's session (created if new) and what the turn does in it."""
        return await resolve(
            self.sessions,
            self.personas,
            self.clock,
            user_id=request.user_id,
            persona_id=request.persona_id,
            session_id=request.session_id,
            client=request.client_messages(),
            final=request.final,
            whole_history=request.whole_history,
        )

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    # --- the turn ----------------------------------------------------------------------

    async def begin(self, request: TurnRequest) -> Turn:
        """Persist the user message, start the hippocampus, wait for activation only."""
        # The query embedding needs only the text: it runs while the session I/O and the
        # locks below do, instead of after them (it is on the TTFT path).
        query_embedding = (
            self.long_term.start_query_embedding(request.text) if request.text.strip() else None
        )
        resolved = await self.open_session(request)
        session = resolved.session
        persona = self.personas.get(session.persona_id) or self.personas.default
        lock = self._lock(session.id)
        await lock.acquire()  # released when this turn's reply is stored
        try:
            # Then the lock between processes (several app processes on one database):
            # the previous turn's reply is stored, wherever that turn ran.
            held = await acquire_session(self.sessions.locks, session.id)
        except BaseException:
            lock.release()
            raise
        released = False

        def release() -> None:  # sync: called from the reply's ``finally``
            nonlocal released
            if not released:
                released = True
                self._spawn(self._unlock(held, lock))

        try:
            # A reply left pending by a process that died mid-turn is now known dead.
            await asyncio.to_thread(self.sessions.mark_incomplete_pending, session.id)
            return await self._begin_locked(request, resolved, persona, release, query_embedding)
        except BaseException:
            release()
            raise

    async def _unlock(self, held: LockHandle, lock: asyncio.Lock) -> None:
        try:
            await release_session(self.sessions.locks, held)
        finally:
            lock.release()

    def _discard_session(self, session: Session) -> None:
        """Best effort: the failure that brought us here (a full disk, the database
        gone) may stop this too; it is logged, and the caller's error stands."""
        try:
            self.sessions.delete_session(session.id, session.user_id)
        except Exception:
            log.warning("could not discard the empty session %s", session.id, exc_info=True)

    async def _begin_locked(
        self,
        request: TurnRequest,
        resolved: Resolved,
        persona: Persona,
        release: Callable[[], None],
        query_embedding: QueryEmbedding | None = None,
    ) -> Turn:
        session, created = resolved.session, resolved.created
        turn_id = uuid.uuid4().hex
        try:
            state, merged_seq = await load_state(self.sessions, session.id)
            if created and resolved.seed:
                history = [(m.role, m.text) for m in resolved.seed]
                state = await seed_state(
                    self.sessions,
                    session.id,
                    state,
                    history,
                    token_budget=self.settings.token_budget,
                )
                _, merged_seq = await load_state(self.sessions, session.id)
            placement = resolved.placement
            plain = created or (
                bool(request.session_id)
                and plain_turn(request.client_messages(), request.final, request.whole_history)
            )
            if not plain:  # re-read under the lock: another turn may have come first
                client = request.client_messages()
                needed = tail_needed(client)
                rows = await asyncio.to_thread(self.sessions.tail, session.id, needed)
                placement = place(
                    rows,
                    client,
                    request.final,
                    identified=True,
                    # A session found by its history: the client sent the whole of it.
                    whole_history=request.whole_history or not request.session_id,
                    complete=len(rows) < needed,
                ) or Placement("turn" if request.final == "turn" else "reply", 0)
            # The client's messages the server lacks, in order, before this turn's own.
            for missing in placement.missing:
                stored_missing = await asyncio.to_thread(
                    self.sessions.append_message,
                    session.id,
                    missing.role,
                    missing.text,
                    status="complete",
                )
                if placement.kind == "continue" and missing.role == "assistant":
                    placement = dataclasses.replace(placement, target=stored_missing)
            unmerged = await asyncio.to_thread(self.sessions.messages_after, session.id, merged_seq)
            stored: Message | None = None
            if placement.kind == "turn":
                # 1. The user's message is committed before any model is called.
                stored = await asyncio.to_thread(
                    self.sessions.append_message,
                    session.id,
                    "user",
                    request.text,
                    status="complete",
                    turn_id=turn_id,
                )
        except Exception:
            if created:  # a new session whose first message could not be stored goes too
                await asyncio.to_thread(self._discard_session, session)
            raise
        loop = asyncio.get_running_loop()
        redo = placement.kind in ("regenerate", "continue") and placement.target is not None
        kind = placement.kind if redo or placement.kind == "turn" else "reply"
        user_text = request.text
        if kind != "turn":
            transcript = await asyncio.to_thread(self.sessions.transcript, session.id)
            last = transcript[-1].seq if transcript else 0
            before = placement.target.seq if redo and placement.target else last + 1
            asked = [m for m in transcript if m.role == "user" and m.seq < before]
            user_msg = asked[-1] if asked else None
            user_text = user_msg.content if user_msg is not None else ""
            if redo:  # the prompt is the one the redone reply had: up to its user message
                cut = user_msg.seq if user_msg is not None else before
                state = without_turn(state, transcript, cut, merged_seq)
                unmerged = [m for m in unmerged if m.seq < cut]
        temperature = request.temperature
        if temperature is None:
            temperature = self.settings.chat_temperature
        turn = Turn(
            session=session,
            persona=persona,
            turn_id=turn_id,
            activation=None,
            messages=[],
            _engine=self,
            _pending=None,
            _release=release,
            _temperature=temperature,
            _max_tokens=request.max_tokens or self.settings.chat_max_tokens,
            _sampling=request.sampling,
            kind=kind,
        )
        if redo:
            assert placement.target is not None
            turn._target = placement.target
            turn._base = (
                _continue_base(placement.target.content, request) if kind == "continue" else ""
            )
            turn._redo_report = loop.create_future()
            turn._redo_emotion = reports.emotion_part(state.user_emotion)
        else:
            # A reply with no user message: its row comes next in the transcript.
            following = unmerged[-1].seq if unmerged else merged_seq
            user_seq = stored.seq if stored is not None else following + 1
            turn._pending = PendingTurn(
                turn, user_seq, loop.create_future(), loop.create_future(), loop.create_future()
            )
        try:
            if query_embedding is None or user_text != request.text:
                query_embedding = None
            turn.activation = await self._activate(turn, user_text, state, query_embedding)
            view = reply_view(state, unmerged, token_budget=self.settings.token_budget)
            # Every message of the session so far is in the window, verbatim (seqs run
            # 1, 2, 3...; an empty or compressed one makes this False, which is safe).
            whole = merged_seq >= 0 and len(view.short_term) == merged_seq + len(unmerged)
            whole = whole and not any(item.compressed for item in view.short_term)
            whole = whole and kind == "turn"
            notes = self.shown_notes.plan(
                session.id, view, turn.recalled, user_text, whole_session=whole
            )
            turn.messages = build_main_messages(
                system_prompt=persona.system_prompt,
                client_system=request.client_system,
                state=dataclasses.replace(view, background=notes.background),
                memories=notes.memories,
                user_message=user_text if kind != "reply" else None,
                earlier_notes=notes.earlier,
                examples=request.examples,
                continuing=turn._base if kind == "continue" else None,
                instruction=request.instruction,
                images=request.images if kind == "turn" else (),
            )
            self.shown_notes.record(session.id, notes)
        except BaseException:
            turn.status, turn.error = "incomplete", "the turn failed before its reply"
            self._spawn(turn._finish(None))
            raise
        finally:
            if turn._pending is not None:
                turn._pending.activated.set_result(None)
                # 2. The memory worker starts the hippocampus; it never blocks the reply.
                # Not before activation: its database reads compete with it for the
                # interpreter (bench.turn_latency's TTFT overhead: 56.0 ms before, 49.3 ms
                # after).
                self.memory.submit(turn._pending)
        return turn

    async def _activate(
        self,
        turn: Turn,
        text: str,
        state: SessionMemoryState,
        query_embedding: QueryEmbedding | None,
    ) -> Activation | None:
        """Recall for this turn; a failure recalls nothing (it never fails a turn)."""
        target = state.user_emotion.label if state.user_emotion else None
        try:
            return await asyncio.to_thread(
                self.long_term.activate,
                turn.namespace,
                text,
                target_emotion=target,
                policy=turn.persona.retrieval_policy,  # None: the configured one
                pending_embedding=query_embedding,
            )
        except Exception:
            log.exception("activation failed for session %s", turn.session.id)
            return None

    def _spawn(self, coro: Any) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def abandon(self, turn: Turn) -> None:
        """Close a turn whose stream will never be read (the client left before it began)."""
        if turn.merged is None:
            turn.status, turn.error = "incomplete", "the client went away"
            turn.merged = turn._report_future()
            await turn._finish(None)
        await asyncio.shield(turn.merged)

    async def run(self, request: TurnRequest) -> tuple[Turn, dict[str, Any]]:
        """A whole turn without streaming: the reply text is in ``turn.reply``."""
        turn = await self.begin(request)
        async for _ in turn.stream():
            pass
        assert turn.merged is not None
        return turn, await turn.merged

    async def drain(self) -> None:
        """Wait for every pending hippocampus run and merge (graceful shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
