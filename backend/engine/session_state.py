"""A session's memory state (background, short-term, user emotion, missed turns) to and
from the session store, and its seeding from the history a client sent with a new session.

Failure policy: nothing is caught here; a session store error reaches the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from backend.hippocampus import SessionMemoryState, ShortTermItem, enforce_budget
from backend.stores.sessions import SessionStore


async def load_state(sessions: SessionStore, session_id: str) -> SessionMemoryState:
    raw = await asyncio.to_thread(sessions.load_state, session_id)
    return SessionMemoryState.from_dict(
        {
            "background": raw.background,
            "short_term": list(raw.short_term),
            "user_emotion": raw.user_emotion,
            "missed": list(raw.missed),
        }
    )


async def save_state(sessions: SessionStore, session_id: str, state: SessionMemoryState) -> None:
    data = state.to_dict()
    await asyncio.to_thread(
        sessions.save_state,
        session_id,
        data["background"],
        data["short_term"],
        data["user_emotion"],
        data["missed"],
    )


async def seed_state(
    sessions: SessionStore,
    session_id: str,
    state: SessionMemoryState,
    history: Sequence[tuple[str, str]],
    *,
    token_budget: int,
) -> SessionMemoryState:
    """Store the client's earlier messages and start short-term memory with them (within
    ``token_budget``); a new session only (wire.md)."""
    items = [
        ShortTermItem(role=role, text=text)  # type: ignore[arg-type]
        for role, text in history
        if role in ("user", "assistant") and text.strip()
    ]
    for item in items:
        await asyncio.to_thread(
            sessions.append_message, session_id, item.role, item.text, status="complete"
        )
    budgeted = enforce_budget(items, token_budget=token_budget)
    seeded = SessionMemoryState(state.background, tuple(budgeted), state.user_emotion)
    await save_state(sessions, session_id, seeded)
    return seeded
