"""One chat turn: persist → activation ∥ hippocampus → main stream → persist → merge
(docs/architecture.md, "One turn" and "A turn is a context").

``async with engine.turn(request) as turn:`` is a turn's lifetime. Entering it persists
the user message, hands the turn to the session's memory worker (which starts the
hippocampus at once) and waits only for activation; ``turn.stream()`` then yields the
main model's text as it arrives and stores the reply when it ends
(``backend.engine.turn_reply``). Leaving it, however the block ends — the reply read to
its end, an exception, a cancellation, a client gone, a stream never read — stores what
the reply got to, releases the session and leaves the merge to the engine's background
tasks (``drain``): a transport never has to remember to close a turn.

A reply never waits for a hippocampus run: it is prompted from the last merged state
plus the turns not merged yet, verbatim. Replies of one session are ordered (turn t+1
begins once turn t's reply is stored); sessions never block each other. The merge is the
memory worker's (``backend.engine.memory_worker``), its steps ``backend.engine.merge``'s,
the session's memory state ``backend.engine.session_state``'s.

Which session a request's turn runs in, and what it does there, is
``backend.engine.session_placement``'s: a new turn; a redo (a regeneration replaces the
turn's stored reply, a continuation extends it: neither adds a turn or runs the
hippocampus again, so the turn's memories are written once); or one more reply with no
user message (a group chat's next speaker), which the memory worker folds in verbatim.

Failure policy: the hippocampus can never break or delay a reply (failure, timeout or
garbage → the deterministic fallback, reported); activation trouble yields no recalled
memories; a main-model failure is raised to the reader after the partial reply is stored
(``backend.engine.turn_reply``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from backend.clock import Clock
from backend.engine import report as reports
from backend.engine.conversation_match import Placement, place, tail_needed
from backend.engine.memory_health import MemoryHealth
from backend.engine.memory_worker import MemoryWorker
from backend.engine.next_prompt import NextPrompt
from backend.engine.pending_turns import PendingTurn
from backend.engine.prompt import build_main_messages, is_health_note
from backend.engine.reply_guard import asks_question, restricts
from backend.engine.session_order import acquire_session, release_session
from backend.engine.session_placement import Resolved, SessionConflict, plain_turn, resolve
from backend.engine.session_state import load_state, reply_view, seed_state, without_turn
from backend.engine.shown_notes import (
    Merged,
    ShownNotes,
    answer_ids,
    injected_memories,
    pertinent_ids,
    verbatim_start,
)
from backend.engine.turn_reply import Turn
from backend.engine.turn_types import TurnOutcome, TurnRequest, TurnSettings
from backend.hippocampus import SessionMemoryState
from backend.llm.port import ChatModel, ReadAhead
from backend.longterm.memory import Activation, LongTermMemory, QueryEmbedding
from backend.memory.dietary import dietary_kind
from backend.memory.entities import introduce
from backend.memory.types import Namespace
from backend.personas import Persona, PersonaRegistry
from backend.sessions.locks import LockHandle
from backend.sessions.store import Message, Session, SessionStore

log = logging.getLogger(__name__)

# The most recalled notes a retry's "you do know this" hint says (``reply_guard``).
ANSWER_NOTES = 3
# The session's earlier replies the guard compares sentences with: a long evening's
# formula ("That's great to hear!") came back 40 turns on (bench.reply_quality's long part).
SESSION_REPLIES = 40


__all__ = ["SessionConflict", "Turn", "TurnEngine", "TurnOutcome", "TurnRequest", "TurnSettings"]


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
        settings: TurnSettings,
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
        self.memory = MemoryWorker(self, on_idle=self.read_ahead)
        self.memory_health = MemoryHealth(clock)
        self.shown_notes = ShownNotes()
        self.next_prompt = NextPrompt()

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

    @contextlib.asynccontextmanager
    async def turn(self, request: TurnRequest) -> AsyncIterator[Turn]:
        """``async with engine.turn(request) as turn:``, the turn's lifetime (module
        docstring). Entering raises ``SessionConflict``, ``UnknownPersona`` or a storage
        error with nothing held; leaving waits for the reply's storing (``Turn.close``),
        never for the merge. A turn that outlives one block (a response streamed after
        its handler returned) is entered on a ``contextlib.AsyncExitStack``, closed
        where the response ends.

        Next, the caller reads ``Turn.stream`` (``backend.engine.turn_reply``), which
        stores the reply as it ends; the memory worker (``backend.engine.memory_worker``)
        already has the turn, and merges it once the reply is stored."""
        turn = await self._begin(request)
        try:
            yield turn
        finally:
            await turn.close()

    async def _begin(self, request: TurnRequest) -> Turn:
        """Entering ``turn``: persist the user message, start the hippocampus, wait for
        activation only. Only ``turn`` calls it, so that leaving is never forgotten."""
        started = self.clock.now()  # the guard's retries have until a deadline after it
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
                self.spawn(self._unlock(held, lock))

        try:
            # A reply left pending by a process that died mid-turn is now known dead.
            await asyncio.to_thread(self.sessions.mark_incomplete_pending, session.id)
            turn = await self._begin_locked(request, resolved, persona, release, query_embedding)
            turn.started = started
            return turn
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
        """``_begin``'s work under the session's lock, in the order of "One turn": what the
        request does in the session (a turn, a redo, a reply: ``conversation_match``),
        the user message stored (step 1), the ``Turn`` made, activation (step 3) and the
        main prompt; then, in ``finally``, the ``PendingTurn`` (none for a redo) handed
        to the memory worker (step 2: ``MemoryWorker.submit`` starts the hippocampus)."""
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
        # A redo replaces (or, continuing, extends) its target's text; a new reply is merged.
        target = placement.target if redo else None
        continued = target is not None and kind == "continue"
        base = _continue_base(target.content, request) if target and continued else ""
        pending = None
        if target is None:
            # A reply with no user message: its row comes next in the transcript.
            following = unmerged[-1].seq if unmerged else merged_seq
            user_seq = stored.seq if stored is not None else following + 1
            namespace = Namespace(session.user_id, persona.id)
            pending = PendingTurn(
                turn_id, session.id, persona, namespace, user_seq,
                loop.create_future(), loop.create_future(), loop.create_future(),
            )  # fmt: skip
        turn = Turn(
            session=session,
            persona=persona,
            turn_id=turn_id,
            activation=None,
            messages=[],
            _engine=self,
            _pending=pending,
            _release=release,
            _temperature=temperature,
            _max_tokens=request.max_tokens or self.settings.chat_max_tokens,
            _sampling=request.sampling,
            kind=kind,
            _target=target,
            _base=base,
            _redo_report=loop.create_future() if target is not None else None,
            _redo_emotion=reports.emotion_part(state.user_emotion) if target is not None else None,
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
            # Otherwise, the notes formed from messages still in it verbatim are left out:
            # how far the merges had come when this message was stored, and where the
            # window's verbatim part starts (read only when a note is this session's).
            merged: Merged | None = None
            start: int | None = None
            if kind == "turn" and stored is not None:
                merged = Merged(merged_seq, stored.created_at)
                if not whole and any(m.source_session == session.id for m in turn.recalled):
                    count = len(view.short_term) + 8  # + this message, + some empty ones
                    rows = await asyncio.to_thread(self.sessions.tail, session.id, count)
                    start = verbatim_start(view, [m for m in rows if m.seq < stored.seq])
            retrieval = turn.persona.retrieval_policy or self.long_term.activation.retrieval
            # The weights the activation ranked with (``cjk_cosine`` 1 with two-part vectors).
            weights = (turn.activation and turn.activation.weights) or retrieval.hybrid
            pertinent = pertinent_ids(turn.activation, user_text, weights)
            # Each note names its people and pets with their relation ("Xiaoyu moved the
            # wedding" is shown as "your sister Xiaoyu…"): the prompt's copies only.
            table = turn.activation.entities if turn.activation is not None else ()
            recalled = [
                dataclasses.replace(m, content=introduce(m.content, table)) if table else m
                for m in turn.recalled
            ]
            # The notes a question is about: shown next to it again (``shown_notes``), and a
            # reply that says it does not know them is asked again (``reply_guard``).
            # Health notes last: always shown, they answer "how much weight have I lost?"
            # too (the 1.5B said "3 kg" next to "Your weight is 69.5 kg now.").
            answers = sorted((m for m in recalled if m.id in pertinent), key=is_health_note)
            answers = answers[:ANSWER_NOTES]
            now = self.clock.now()
            notes = self.shown_notes.plan(
                session.id,
                view,
                recalled,
                user_text,
                whole_session=whole,
                merged=merged,
                verbatim_from=start,
                pertinent=pertinent,
                answers=(
                    {m.id for m in answers}
                    | answer_ids(turn.activation, user_text, weights, ANSWER_NOTES)
                    if asks_question(user_text)
                    else ()
                ),
                now=now,
            )
            turn.messages = build_main_messages(
                system_prompt=persona.system_prompt,
                client_system=request.client_system,
                state=dataclasses.replace(view, background=notes.background),
                memories=notes.memories,
                user_message=user_text if kind != "reply" else None,
                earlier_notes=notes.earlier,
                examples=request.examples,
                continuing=base if kind == "continue" else None,
                instruction=request.instruction,
                images=request.images if kind == "turn" else (),
                brief_notes=notes.brief,
                now=now,
            )
            self.shown_notes.record(session.id, notes)
            turn.injected = injected_memories(turn.activation, turn.recalled, notes)
            self.next_prompt.remember(
                session.id,
                system_prompt=persona.system_prompt,
                client_system=request.client_system,
                examples=request.examples,
            )
            if kind != "continue":
                # The guard leaves out a sentence an earlier reply said, beyond the prompt's.
                rows = await asyncio.to_thread(
                    self.sessions.tail, session.id, 2 * SESSION_REPLIES + 2
                )
                before = target.seq if target is not None else None
                turn.session_replies = tuple(
                    m.content
                    for m in rows
                    if m.role == "assistant"
                    and m.content.strip()
                    and (before is None or m.seq < before)
                )[-SESSION_REPLIES:]
            # The reply guard holds back a go-ahead that ignores one (reply_guard.py); a
            # dietary note restricts by what it is ("The user is pescatarian now").
            turn.health_notes = tuple(
                m.content
                for m in notes.memories
                if is_health_note(m) and (restricts(m.content) or dietary_kind(m) is not None)
            )
            turn.answer_notes = tuple(m.content for m in answers)
        except BaseException:
            turn.end_unstreamed("the turn failed before its reply")
            raise
        finally:
            if pending is not None:
                pending.activated.set_result(turn.recalled)
                # 2. The memory worker starts the hippocampus; it never blocks the reply.
                # Not before activation: its database reads compete with it for the
                # interpreter (bench.turn_latency's TTFT overhead: 56.0 ms before, 49.3 ms
                # after).
                self.memory.submit(pending)
        return turn

    async def read_ahead(self, session_id: str) -> None:
        """Once a session's merges are saved: the start of its next prompt into a local
        chat model's cache, while the user types (``backend.engine.next_prompt``)."""
        if not isinstance(self.chat, ReadAhead):
            return
        busy = self._locks.get(session_id)
        try:
            state, merged_seq = await load_state(self.sessions, session_id)
            unmerged = await asyncio.to_thread(self.sessions.messages_after, session_id, merged_seq)
            view = reply_view(state, unmerged, token_budget=self.settings.token_budget)
            messages = self.next_prompt.start(session_id, view, self.shown_notes)
            if messages is None or (busy is not None and busy.locked()):
                return  # not seen here, or a turn runs: its prompt is the newer one
            await self.chat.read_ahead(messages)
        except Exception:
            log.warning("reading session %s's next prompt ahead failed", session_id, exc_info=True)

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
            activation = await asyncio.to_thread(
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
        embedder = self.long_term.embedder is not None
        self.memory_health.activation_done(activation.degraded, embedder=embedder)
        return activation

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        """Background work the engine owns: ``drain`` waits for it (merges, reinforcement,
        storing a reply whose client left)."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def run(self, request: TurnRequest) -> tuple[Turn, dict[str, Any]]:
        """A whole turn without streaming: the reply text is in ``turn.reply``."""
        async with self.turn(request) as turn:
            async for _ in turn.stream():
                pass
        assert turn.merged is not None
        return turn, await turn.merged

    async def drain(self) -> None:
        """Wait for every pending hippocampus run and merge (graceful shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def cancel_background(self) -> None:
        """Stop the background work without letting it finish: what a process that dies
        leaves behind (turns stored, not merged). The opposite of ``drain``; the cluster
        tests use it to stand for a killed process."""
        pending = list(self._background)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
