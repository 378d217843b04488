"""The memory worker: folds a session's turns into its memory state, in order, off the
reply's path (docs/architecture.md, "The rule between turns").

A reply never waits for a hippocampus run, not even the previous turn's: it is prompted
from the last merged state plus the turns not merged yet, verbatim
(``session_state.reply_view``). The merging happens here, per session:

- The stored state folds in the transcript up to ``merged_seq``; every message after it
  belongs to a turn not merged yet. That is the queue, and it is durable: a turn whose
  process died is merged by the next worker that runs for the session, in any process.
- One worker per session per process (``submit`` starts it), and the session's
  ``"memory"`` lock between processes: merges run one at a time. Each round takes the
  oldest unmerged turns (at most ``MAX_BATCH``), runs ONE hippocampus over them on the
  state the previous merge saved, and merges them. The earlier turns of a batch are read
  as the catch-up of a failed run is (their user messages in ``missed``), and stay in
  short-term as its newest verbatim items, so several waiting turns cost one run.
- The hippocampus starts as soon as the turn's user message is stored (in parallel with
  the reply); the merge waits for the reply to be stored. The state is saved with
  ``expected_seq``: a merge that lost a race (``StaleMerge``) never lands, so no message
  is merged twice.
- Each turn gets its memory report. The batch's gate outcomes go on its newest turn; the
  hippocampus info names the batch (``turns``). A turn of this process that another
  process merged gets that report, completed with what only its own process knows (the
  activation, the tool calls).

When a session has nothing left to merge, ``on_idle`` runs for it (the engine reads the
start of the session's next prompt ahead: ``backend.engine.next_prompt``).

Failure policy: the hippocampus's failure is the merge's deterministic fallback, as
before. A round that fails (the database is down) fails the memory reports of the turns
of this process in it; their messages stay after ``merged_seq``, so the next round — the
next turn's, in any process — merges them: nothing is lost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from backend.engine.memory_health import INVALID_TO_SWITCH
from backend.engine.merge import run_hippocampus, write_long_term
from backend.engine.pending_turns import (
    PendingTurn,
    TurnMessages,
    group_turns,
    own_report,
    read_with_earlier,
    turn_report,
)
from backend.engine.session_order import FIRST_POLL_S, MAX_POLL_S, acquire_session, release_session
from backend.engine.session_state import load_state, save_state, verbatim_items
from backend.engine.turn_types import EngineParts
from backend.hippocampus import SessionMemoryState, enforce_budget, merge
from backend.hippocampus.budget import chunked_trim, merge_trim_at
from backend.longterm.memory import WriteOutcome
from backend.memory.types import Emotion, Memory, Namespace
from backend.sessions.store import Message, StaleMerge

log = logging.getLogger(__name__)

# Turns one hippocampus run covers at most: a run reads the catch-up of the earlier ones
# (bounded by ``budget.CATCH_UP_TOKENS``) and the newest one's message.
MAX_BATCH = 4


class MemoryWorker:
    """Per-session merging for one turn engine (one process); see the module docstring."""

    def __init__(
        self,
        engine: EngineParts,
        *,
        on_idle: Callable[[str], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self._engine = engine
        # Spawned when a session has nothing left to merge (``TurnEngine.read_ahead``).
        self._on_idle = on_idle
        self._pending: dict[str, list[PendingTurn]] = {}
        self._running: set[str] = set()

    def submit(self, pending: PendingTurn) -> None:
        """Queue a turn whose user message is stored; its session's worker starts now.
        Called by ``TurnEngine.begin`` once activation is done (``backend.engine.turn``)."""
        session_id = pending.session_id
        self._pending.setdefault(session_id, []).append(pending)
        if session_id not in self._running:
            self._running.add(session_id)
            self._engine.spawn(self._run(session_id))

    async def _run(self, session_id: str) -> None:
        delay = FIRST_POLL_S
        try:
            while self._pending.get(session_id):
                if await self._round(session_id):
                    delay = FIRST_POLL_S
                    continue
                # The oldest unmerged turn is another process's, still replying: its own
                # worker merges it, or this one once it is stored.
                await asyncio.sleep(delay)
                delay = min(MAX_POLL_S, delay * 2)
        finally:
            # No await between the check above and this: a turn submitted from now on
            # starts a new worker.
            self._running.discard(session_id)
            self._pending.pop(session_id, None)
        if self._on_idle is not None:
            self._engine.spawn(self._on_idle(session_id))

    async def _round(self, session_id: str) -> bool:
        """Merge the oldest unmerged turns once; False when none could be merged yet."""
        sessions = self._engine.sessions
        held = await acquire_session(sessions.locks, session_id, "memory")
        batch: list[TurnMessages] = []
        try:
            state, merged_seq = await load_state(sessions, session_id)
            if await self._settle_merged(session_id, merged_seq):
                return True
            unmerged = await asyncio.to_thread(sessions.messages_after, session_id, merged_seq)
            batch = self._take_batch(session_id, group_turns(unmerged))
            if not batch:
                return False
            if not batch[0].has_user:
                await self._fold(session_id, state, merged_seq, batch[0])
            else:
                await self._merge(session_id, state, merged_seq, batch)
            return True
        except Exception as exc:
            log.exception("merging session %s failed", session_id)
            self._fail(session_id, batch, exc)
            return True
        finally:
            await release_session(sessions.locks, held)

    def _own(self, session_id: str) -> dict[str, PendingTurn]:
        return {p.turn_id: p for p in self._pending.get(session_id, [])}

    def _take_batch(self, session_id: str, groups: list[TurnMessages]) -> list[TurnMessages]:
        """The oldest turns that can be merged now: this process's own (their replies are
        awaited) and others' whose reply is stored (or that a later turn follows)."""
        own = self._own(session_id)
        batch: list[TurnMessages] = []
        for index, group in enumerate(groups[:MAX_BATCH]):
            followed = index + 1 < len(groups)
            if batch and not group.has_user:
                break  # replies with no user message are folded in on their own
            if group.turn_id in own or group.reply_stored or followed:
                batch.append(group)
                if not group.has_user:
                    break
            else:
                break
        return batch

    async def _fold(
        self, session_id: str, state: SessionMemoryState, merged_seq: int, group: TurnMessages
    ) -> None:
        """Messages with no user message (a group chat's next reply, a client's stored
        reply) join short-term verbatim: there is nothing for the hippocampus to read."""
        engine = self._engine
        pending = self._own(session_id).get(group.turn_id or "")
        messages = list(group.messages)
        through = group.last_seq
        if pending is not None:
            await pending.reply_done
            outcome = pending.ended()
            through = max(through, outcome.reply_seq or 0)
            messages = [
                dataclasses.replace(m, content=outcome.reply)
                if m.role == "assistant" and m.turn_id == group.turn_id
                else m
                for m in messages
            ]
        budget = engine.settings.token_budget
        short_term = enforce_budget(
            [*state.short_term, *verbatim_items(messages)],
            token_budget=budget,
            trim_to=chunked_trim(budget),
            trim_at=merge_trim_at(budget),
        )
        folded = dataclasses.replace(state, short_term=tuple(short_term))
        try:
            await save_state(
                engine.sessions, session_id, folded, merged_seq=through, expected_seq=merged_seq
            )
        except StaleMerge:
            return
        if group.turn_id is not None:
            info = {"status": "skipped", "reason": "no user message to read"}
            await self._report(session_id, [group], info, [], state.user_emotion)

    def replace_reply(self, session_id: str, target: Message, content: str) -> None:
        """A redone reply (a regeneration, a continuation) takes the old one's place in
        short-term memory: in a turn of this process not merged yet, and, once merged, in
        the stored state."""
        for pending in self._pending.get(session_id, []):
            if pending.outcome is not None and pending.outcome.reply_seq == target.seq:
                pending.outcome = dataclasses.replace(pending.outcome, reply=content)
        self._engine.spawn(self._patch_reply(session_id, target, content))

    async def _patch_reply(self, session_id: str, target: Message, content: str) -> None:
        sessions = self._engine.sessions
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._engine.settings.hippocampus_timeout_s + 60.0
        delay = FIRST_POLL_S
        try:
            while True:
                held = await acquire_session(sessions.locks, session_id, "memory")
                try:
                    state, merged_seq = await load_state(sessions, session_id)
                    if merged_seq >= target.seq:
                        patched = _swap_reply(state, target.content, content)
                        if patched is not None:
                            await save_state(
                                sessions,
                                session_id,
                                patched,
                                merged_seq=merged_seq,
                                expected_seq=merged_seq,
                            )
                        return
                finally:
                    await release_session(sessions.locks, held)
                if loop.time() > deadline or session_id not in self._running:
                    # No merge of it runs here: whoever merges it later reads the new
                    # reply from the transcript.
                    return
                await asyncio.sleep(delay)
                delay = min(MAX_POLL_S, delay * 2)
        except Exception:
            log.warning("session %s: the redone reply stays old in short-term", session_id,
                        exc_info=True)  # fmt: skip

    async def _settle_merged(self, session_id: str, merged_seq: int) -> bool:
        """Give this process's turns that another process merged their reports."""
        done = [p for p in self._pending.get(session_id, []) if p.user_seq <= merged_seq]
        for pending in done:
            await pending.reply_done  # at once: it was stored before the other merge read it
            stored = await asyncio.to_thread(
                self._engine.sessions.turn_report, session_id, pending.turn_id
            )
            report = own_report(pending, stored or {})
            await asyncio.to_thread(
                self._engine.sessions.save_turn_report, session_id, pending.turn_id, report
            )
            self._resolve(session_id, pending, report)
        return bool(done)

    async def _merge(
        self,
        session_id: str,
        state: SessionMemoryState,
        merged_seq: int,
        batch: list[TurnMessages],
    ) -> None:
        """One batch merged: the hippocampus run (``merge.run_hippocampus``); its
        long-term candidates through the save gate as soon as it is in
        (``merge.write_long_term``, spawned: it ends in
        ``LongTermMemory.write_or_queue``); then, once the replies are stored
        (``PendingTurn.reply_done``, set by ``backend.engine.turn_reply``), the turns
        folded into the state (``hippocampus.merge``), saved over the state read, and
        reported."""
        engine = self._engine
        own = self._own(session_id)
        mine = [own[g.turn_id] for g in batch if g.turn_id in own]
        newest = batch[-1]
        # A session keeps its user and persona: any turn of ours in it tells them.
        anchor = self._pending[session_id][0]
        persona, namespace = anchor.persona, anchor.namespace
        if merged_seq == 0:
            state = await self._adopt_unread(session_id, state, namespace)
        seen = read_with_earlier(state, batch[:-1])
        # The hippocampus starts now, while the newest reply may still stream.
        result, info = await run_hippocampus(engine, seen, newest.user_text, persona)
        engine.memory_health.hippocampus_ran(info)
        self._switch_contract_if_failing()
        await asyncio.gather(*(p.activated for p in mine))
        recalled: list[Memory] = [m for p in mine for m in p.activated.result()]
        # The user messages the run read: where its memories come from (issue 30).
        said = [(m.id, m.content) for g in batch for m in g.messages if m.role == "user"]
        writes = engine.spawn(
            write_long_term(
                engine, seen, newest.user_text, persona, result, namespace, recalled, session_id,
                said,
            )
        )  # fmt: skip
        await asyncio.gather(*(p.reply_done for p in mine))
        through = newest.last_seq
        if newest.turn_id in own:  # its reply is ours: what was stored, and where
            outcome = own[newest.turn_id].ended()
            reply = outcome.reply
            through = max(through, outcome.reply_seq or 0)
        else:  # another process's turn: its reply was stored when the batch was read
            reply = newest.reply.content if newest.reply is not None else ""
        merged = merge(
            seen,
            result,
            newest.user_text,
            reply,
            token_budget=engine.settings.token_budget,
            catch_up="message" if engine.settings.hippocampus_mode == "compact" else "trimmed",
            trim_to=chunked_trim(engine.settings.token_budget),
            trim_at=merge_trim_at(engine.settings.token_budget),
        )
        outcomes, write_error = await writes
        engine.memory_health.writes_done(outcomes, write_error)
        try:
            await save_state(
                engine.sessions,
                session_id,
                merged,
                merged_seq=through,
                expected_seq=merged_seq,
            )
        except StaleMerge:  # merged meanwhile elsewhere; the next round settles the reports
            log.warning("session %s: turns merged by another worker; result dropped", session_id)
            return
        if write_error:
            info["write_error"] = write_error
        await self._report(session_id, batch, info, outcomes, merged.user_emotion)
        log.debug("session %s merged through %d", session_id, through)

    async def _adopt_unread(
        self, session_id: str, state: SessionMemoryState, namespace: Namespace
    ) -> SessionMemoryState:
        """A session's first run also reads what the user told this persona in another
        session that no run has read: that session's last runs failed and it ended, so its
        own catch-up never came. Taken from it at once (``take_missed``: one session
        reads them, never two), oldest first, into this state's ``missed``, whose
        catch-up reads them and whose fallback keeps them, as for this session's own."""
        sessions = self._engine.sessions
        found = await asyncio.to_thread(
            sessions.left_unread, namespace.user_id, namespace.persona_id, besides=session_id
        )
        adopted: list[dict[str, Any]] = []
        for other, missed in reversed(found):
            if await asyncio.to_thread(sessions.take_missed, other, missed):
                log.info("session %s reads %d unread items of %s", session_id, len(missed), other)
                adopted += missed
        if not adopted:
            return state
        items = SessionMemoryState.from_dict({"missed": adopted}).missed
        return dataclasses.replace(state, missed=items + state.missed)

    def _switch_contract_if_failing(self) -> None:
        """``hippocampus.mode: auto`` on a model that keeps answering the full contract
        with no valid JSON: ask it for facts only (the compact contract) from now on,
        and say so in the health report."""
        engine = self._engine
        settings = engine.settings
        if not (settings.hippocampus_auto and settings.hippocampus_mode == "full"):
            return
        if not engine.memory_health.should_switch_to_compact():
            return
        why = (
            f"{engine.hippocampus.model} gave no valid JSON for the full contract "
            f"{INVALID_TO_SWITCH} times in a row; it is now asked for facts only "
            "(the compact contract)"
        )
        engine.settings = dataclasses.replace(settings, hippocampus_mode="compact")
        engine.memory_health.note_switch(why)
        log.warning("hippocampus: %s", why)

    async def _report(
        self,
        session_id: str,
        batch: list[TurnMessages],
        info: dict[str, Any],
        gate: list[WriteOutcome],
        emotion: Emotion | None,
    ) -> None:
        """Each merged turn's memory report; the batch's gate outcomes on its newest."""
        own = self._own(session_id)
        if len(batch) > 1:
            info["turns"] = [g.turn_id for g in batch if g.turn_id]
        for group in batch:
            if group.turn_id is None:  # messages of no turn (a client's seeded history)
                continue
            outcomes = gate if group is batch[-1] else []
            report = turn_report(group, info, outcomes, emotion, own.get(group.turn_id))
            await asyncio.to_thread(
                self._engine.sessions.save_turn_report, session_id, group.turn_id, report
            )
            if group.turn_id in own:
                self._resolve(session_id, own[group.turn_id], report)

    def _resolve(self, session_id: str, pending: PendingTurn, report: dict[str, Any]) -> None:
        waiting = self._pending.get(session_id, [])
        if pending in waiting:
            waiting.remove(pending)
        if not pending.report.done():
            pending.report.set_result(report)

    def _fail(self, session_id: str, batch: list[TurnMessages], exc: Exception) -> None:
        own = self._own(session_id)
        ids = {g.turn_id for g in batch} or set(own)  # nothing read: all of ours
        for turn_id in ids:
            if turn_id in own:
                pending = own[turn_id]
                self._pending[session_id].remove(pending)
                if not pending.report.done():
                    pending.report.set_exception(exc)


def _swap_reply(state: SessionMemoryState, old: str, new: str) -> SessionMemoryState | None:
    """``state`` with its newest verbatim copy of the reply ``old`` replaced by ``new``."""
    items = list(state.short_term)
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.role == "assistant" and not item.compressed and item.text.strip() == old.strip():
            items[index] = dataclasses.replace(item, text=new)
            return dataclasses.replace(state, short_term=tuple(items))
    return None
