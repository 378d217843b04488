"""A session's memory state (background, short-term, user emotion, missed turns) to and
from the session store, the view of it a reply is prompted with, and its seeding from the
history a client sent with a new session.

The stored state folds in the transcript up to ``merged_seq``; the messages after it
are turns the memory worker has not merged yet (``backend.engine.memory_worker``).

Failure policy: nothing is caught here; a session store error reaches the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from backend.hippocampus import SessionMemoryState, ShortTermItem, enforce_budget
from backend.hippocampus.budget import chunked_trim
from backend.sessions.store import Message, SessionStore


async def load_state(sessions: SessionStore, session_id: str) -> tuple[SessionMemoryState, int]:
    """The merged state and the last message ``seq`` it folds in."""
    raw = await asyncio.to_thread(sessions.load_state, session_id)
    state = SessionMemoryState.from_dict(
        {
            "background": raw.background,
            "short_term": list(raw.short_term),
            "user_emotion": raw.user_emotion,
            "missed": list(raw.missed),
        }
    )
    return state, raw.merged_seq


async def save_state(
    sessions: SessionStore,
    session_id: str,
    state: SessionMemoryState,
    *,
    merged_seq: int | None = None,
    expected_seq: int | None = None,
) -> None:
    """Store ``state``; with ``merged_seq``, as folding in the transcript up to it (and,
    with ``expected_seq``, only over the state this merge started from: ``StaleMerge``)."""
    data = state.to_dict()
    await asyncio.to_thread(
        sessions.save_state,
        session_id,
        data["background"],
        data["short_term"],
        data["user_emotion"],
        data["missed"],
        merged_seq=merged_seq,
        expected_seq=expected_seq,
    )


def verbatim_items(messages: Sequence[Message]) -> list[ShortTermItem]:
    """Raw user and assistant messages as verbatim short-term items (empty ones skipped)."""
    return [
        ShortTermItem(role=m.role, text=m.content)  # type: ignore[arg-type]
        for m in messages
        if m.role in ("user", "assistant") and m.content.strip()
    ]


def reply_view(
    state: SessionMemoryState, unmerged: Sequence[Message], *, token_budget: int
) -> SessionMemoryState:
    """What a reply is prompted with: the last merged state, plus the turns no merge has
    folded in yet, verbatim and in order (the newest kept when the budget is short)."""
    items = verbatim_items(unmerged)
    if not items:
        return state
    short_term = enforce_budget(
        [*state.short_term, *items], token_budget=token_budget, trim_to=chunked_trim(token_budget)
    )
    return replace(state, short_term=short_term)


async def seed_state(
    sessions: SessionStore,
    session_id: str,
    state: SessionMemoryState,
    history: Sequence[tuple[str, str]],
    *,
    token_budget: int,
) -> SessionMemoryState:
    """Store the client's earlier messages and start short-term memory with them (within
    ``token_budget``); a new session only (docs/api.md). They count as merged."""
    items = [
        ShortTermItem(role=role, text=text)  # type: ignore[arg-type]
        for role, text in history
        if role in ("user", "assistant") and text.strip()
    ]
    last_seq = 0
    for item in items:
        stored = await asyncio.to_thread(
            sessions.append_message, session_id, item.role, item.text, status="complete"
        )
        last_seq = stored.seq
    budgeted = enforce_budget(items, token_budget=token_budget)
    seeded = SessionMemoryState(state.background, tuple(budgeted), state.user_emotion)
    await save_state(sessions, session_id, seeded, merged_seq=last_seq or None)
    return seeded


def without_turn(
    state: SessionMemoryState, transcript: Sequence[Message], cut: int, merged_seq: int
) -> SessionMemoryState:
    """``state`` as it was before the message ``cut`` (a regeneration is prompted as its
    turn first was): the merged messages from ``cut`` on leave short-term when they are
    its newest verbatim items (a compressed turn stays: it cannot be told apart)."""
    gone = verbatim_items([m for m in transcript if cut <= m.seq <= merged_seq])
    if not gone:
        return state
    tail = state.short_term[-len(gone) :]
    if [(i.role, i.text) for i in tail] != [(i.role, i.text) for i in gone]:
        return state
    return replace(state, short_term=state.short_term[: -len(gone)])
