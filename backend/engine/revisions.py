"""Deleting or editing what the user said revises what it formed (issue 30).

Each memory records the user messages it was formed from (``backend.sessions.provenance``,
written by ``backend.engine.merge.record_provenance``). When the user

- **deletes** a turn (``delete_turn``): its messages leave the transcript, and their
  verbatim copies the session's short-term memory; a memory formed only from them is
  deleted from the long-term store (its vectors and lexical index entries with it, so no
  recall, search or export finds it again); a memory also formed from another message
  stays, and no longer counts the deleted one;
- the same words in the conversation's other branches count as the same message (a
  branch starts with copies of its parent's messages, and the memories name the
  originals), so a memory formed from a message goes whichever copy of it is deleted;
- **edits** a message (``retract_for_edit``): the same for the memories the old text
  formed, without deleting the message, which stays in the conversation it was said in;
  the new text is then a turn of a branch (``edit_request``), whose hippocampus run forms
  its memories through the normal write path.

Either way the result is a ``Revision``: what was removed and why, what was kept and
why, saved as a report of the session (``REVISION_PREFIX``) and shown with the turn's.

Both run with the session's turn lock (no reply is being written) and its memory lock
(no merge is running), once the turn's memory was formed: a turn not merged yet is
waited for, up to ``merge_wait_s``, then refused (``NotMergedYet``) rather than revised
while its memories may still be on their way.

Memories with no provenance (formed before it was recorded, by a memory tool, imported or
made by hand) are never removed by a revision.

Failure policy: a long-term store that is down raises before the transcript is changed
(the call can be repeated); session store errors reach the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from backend.engine.session_order import acquire_session, release_session
from backend.engine.session_placement import BRANCH_MARK, BRANCHES
from backend.engine.session_state import load_state, save_state, verbatim_items
from backend.engine.turn_types import EngineParts, TurnRequest
from backend.hippocampus import SessionMemoryState, ShortTermItem, enforce_budget
from backend.memory.types import Namespace
from backend.sessions.store import MAX_SESSION_ID, Message, Session, SessionStore

log = logging.getLogger(__name__)

REVISION_PREFIX = "revision-"  # the turn id of a revision's report
WHY = {
    "delete": "formed only from the deleted message",
    "edit": "formed only from the message before your edit",
}
KEPT = "also formed from another message"
POLL_S = 0.2


TITLE_CHARS = 60  # a title made from a message: its start
EDITED = " (edited)"


def auto_title(text: str) -> str:
    """A conversation's title made from a message (the browser UI names a conversation
    after its first one): its start, on one line."""
    return " ".join(text.split())[:TITLE_CHARS]


def branch_title(title: str | None, old: str, new: str) -> str:
    """An edit's branch's title: the conversation's, marked; one made from the old text
    is made from the new one instead (the old text is taken back)."""
    base = title or ""
    if not base or base == auto_title(old):
        base = auto_title(new)
    return (base + EDITED)[:200]


class NotMergedYet(Exception):
    """The turn's memories are still being formed: try again in a moment."""


@dataclass(frozen=True, slots=True)
class RevisedMemory:
    id: str
    content: str
    reason: str


@dataclass(frozen=True, slots=True)
class Revision:
    kind: Literal["delete", "edit"]
    messages: tuple[Message, ...]  # deleted (delete) or edited (edit)
    removed: tuple[RevisedMemory, ...] = ()
    kept: tuple[RevisedMemory, ...] = ()
    report_id: str = ""

    def report(self) -> dict[str, Any]:
        """The revision as a memory report (the panel's and the REST API's)."""
        what = "deleted" if self.kind == "delete" else "edited"
        return {
            "turn_id": self.report_id,
            "revision": self.kind,
            "messages": [m.seq for m in self.messages],
            "removed": [dataclasses.asdict(m) for m in self.removed],
            "kept": [dataclasses.asdict(m) for m in self.kept],
            "hippocampus": {"status": "skipped", "reason": f"a message was {what}"},
        }


def turn_messages(transcript: Sequence[Message], anchor: Message) -> list[Message]:
    """What deleting ``anchor`` deletes: a user message with its turn's replies (the
    messages of its ``turn_id``, else those up to the next user message); a reply alone."""
    if anchor.role != "user":
        return [anchor]
    if anchor.turn_id is not None:
        return [m for m in transcript if m.turn_id == anchor.turn_id]
    out = [anchor]
    for message in transcript:
        if message.seq <= anchor.seq:
            continue
        if message.role == "user":
            break
        out.append(message)
    return out


async def delete_turn(
    engine: EngineParts, session: Session, anchor: Message, *, merge_wait_s: float = 60.0
) -> Revision:
    """Delete ``anchor``'s turn (``turn_messages``) and revise what it formed (module
    docstring)."""
    async with _held(engine, session.id, anchor.seq, merge_wait_s) as merged_seq:
        sessions = engine.sessions
        transcript = await asyncio.to_thread(sessions.transcript, session.id)
        doomed = turn_messages(transcript, anchor)
        revision = await _revise(engine, session, doomed, "delete")
        await asyncio.to_thread(sessions.delete_messages, session.id, [m.id for m in doomed])
        await _scrub_state(engine, session.id, doomed, merged_seq)
        await _save_report(engine, session.id, revision)
        log.info(
            "session %s: %d messages deleted, %d memories removed",
            session.id, len(doomed), len(revision.removed),
        )  # fmt: skip
        return revision


async def retract_for_edit(
    engine: EngineParts, session: Session, message: Message, *, merge_wait_s: float = 60.0
) -> Revision:
    """The memories formed only from ``message`` are removed and the message no longer
    counts as a source; the transcript is left as it is (the edit is a branch)."""
    async with _held(engine, session.id, message.seq, merge_wait_s):
        return await _revise(engine, session, [message], "edit")


def edit_request(
    session: Session, transcript: Sequence[Message], message: Message, text: str
) -> TurnRequest:
    """The turn that continues from an edited message: a new session (a branch, named as
    ``session_placement`` names them) seeded with the conversation before it, whose first
    turn is the new text."""
    before = [
        (m.role, m.content)
        for m in transcript
        if m.seq < message.seq and m.role in ("user", "assistant") and m.content.strip()
    ]
    base = session.id.split(BRANCH_MARK)[0][: MAX_SESSION_ID - 9]
    return TurnRequest(
        user_id=session.user_id,
        text=text,
        persona_id=session.persona_id,
        session_id=f"{base}{BRANCH_MARK}{uuid.uuid4().hex[:8]}",
        history=before,
        whole_history=True,
    )


async def save_revision_report(engine: EngineParts, session_id: str, revision: Revision) -> None:
    """Keep an edit's revision with the branch it started (its panel shows it)."""
    await _save_report(engine, session_id, revision)


@contextlib.asynccontextmanager
async def _held(
    engine: EngineParts, session_id: str, seq: int, wait_s: float
) -> AsyncIterator[int]:
    """The session's turn and memory locks, once the message ``seq`` is merged (waited
    for up to ``wait_s``, else ``NotMergedYet``); yields the merged seq."""
    locks = engine.sessions.locks
    turn = await acquire_session(locks, session_id, "turn")
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            # A merge holds the memory lock for its whole run: waited for, up to the end.
            memory = await asyncio.to_thread(locks.try_acquire, session_id, "memory")
            if memory is not None:
                try:
                    _, merged_seq = await load_state(engine.sessions, session_id)
                    if merged_seq >= seq:
                        yield merged_seq
                        return
                finally:
                    await release_session(locks, memory)
            if loop.time() > deadline:
                raise NotMergedYet(session_id)
            await asyncio.sleep(POLL_S)
    finally:
        await release_session(locks, turn)


async def _revise(
    engine: EngineParts, session: Session, messages: Sequence[Message], kind: str
) -> Revision:
    """Remove the memories formed only from ``messages``' user messages; they no longer
    count as sources of the others."""
    sessions, long_term = engine.sessions, engine.long_term
    ns = Namespace(session.user_id, session.persona_id)
    said = [m.id for m in messages if m.role == "user"]
    # The same words in the conversation's other branches are the same message: a branch
    # starts with copies of its parent's messages, and the memories name the originals.
    family = await asyncio.to_thread(_family, sessions, session)
    contents = [m.content for m in messages if m.role == "user"]
    said += await asyncio.to_thread(sessions.same_said, family, contents, besides=said)
    supports = await asyncio.to_thread(sessions.supported_by, said)
    mine = [s for s in supports if (s.user_id, s.persona_id) == (ns.user_id, ns.persona_id)]
    removed: list[RevisedMemory] = []
    kept: list[RevisedMemory] = []
    for support in mine:
        memory = await asyncio.to_thread(long_term.get, ns, support.memory_id)
        if memory is None:  # deleted by the user meanwhile
            continue
        if support.alone:
            removed.append(RevisedMemory(memory.id, memory.content, WHY[kind]))
        else:
            kept.append(RevisedMemory(memory.id, memory.content, KEPT))
    gone = [m.id for m in removed]
    if gone:  # the store first: if it is down, nothing else has changed
        await asyncio.to_thread(long_term.delete_memories, ns, gone)
    await asyncio.to_thread(sessions.retract_sources, said)
    if gone:
        await asyncio.to_thread(sessions.forget_sources, ns.user_id, ns.persona_id, gone)
    report_id = f"{REVISION_PREFIX}{uuid.uuid4().hex[:12]}"
    return Revision(kind, tuple(messages), tuple(removed), tuple(kept), report_id)  # type: ignore[arg-type]


def _family(sessions: SessionStore, session: Session) -> list[str]:
    """The ids of the conversation's other branches and of the one they branched from
    (named as ``backend.engine.session_placement`` names branches)."""
    base = session.id.split(BRANCH_MARK)[0]
    listed = sessions.list_sessions(session.user_id, session.persona_id, BRANCHES)
    return [
        s.id
        for s in listed
        if s.id != session.id and (s.id == base or s.id.startswith(base + BRANCH_MARK))
    ]


async def _scrub_state(
    engine: EngineParts, session_id: str, deleted: Sequence[Message], merged_seq: int
) -> None:
    """The deleted messages leave the session's memory state: their verbatim short-term
    items go. A merged message that is no longer there verbatim (compressed, or folded
    into the background) cannot be picked out: then short-term is rebuilt from the
    transcript left, verbatim, and the background is emptied, so that nothing of it stays
    in what the next reply is prompted with."""
    state, _ = await load_state(engine.sessions, session_id)
    items = list(state.short_term)
    missed = list(state.missed)
    lost = False
    for message in verbatim_items([m for m in deleted if m.seq <= merged_seq]):
        found = _take(items, message) or _take(missed, message)
        lost = lost or not found
    if lost:
        transcript = await asyncio.to_thread(engine.sessions.transcript, session_id)
        merged = verbatim_items([m for m in transcript if m.seq <= merged_seq])
        budget = engine.settings.token_budget
        short_term = enforce_budget(merged, token_budget=budget)
        state = SessionMemoryState("", short_term, state.user_emotion)
    else:
        state = dataclasses.replace(state, short_term=tuple(items), missed=tuple(missed))
    await save_state(engine.sessions, session_id, state, merged_seq=merged_seq)


def _take(items: list[ShortTermItem], gone: ShortTermItem) -> bool:
    """Remove the newest verbatim copy of ``gone`` from ``items``; whether there was one."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        same = item.role == gone.role and item.text.strip() == gone.text.strip()
        if same and not item.compressed:
            del items[index]
            return True
    return False


async def _save_report(engine: EngineParts, session_id: str, revision: Revision) -> None:
    await asyncio.to_thread(
        engine.sessions.save_turn_report, session_id, revision.report_id, revision.report()
    )
