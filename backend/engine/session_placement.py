"""The session a request's turn runs in: named by the client, found from the history it
resent (``backend.engine.conversation_match``), or new; and what the turn does there.

- A client that names its session (``X-Session-Id``, ``Conversation-Id``,
  ``X-OpenWebUI-Chat-Id``, the WebSocket's ``conversation_id``) gets that session, or
  one of its branches: an edit earlier in the history makes a new session
  ``<id>~<suffix>``, and later requests of that conversation find whichever branch their
  history continues.
- A client that names none gets the most recent of the user's sessions with this persona
  whose transcript its history continues (``MATCH_SESSIONS`` are looked at), or a new one.
- A new session is seeded with the client's history (stored as already merged: the
  hippocampus never re-reads history a client resends, so its facts are written once).

Failure policy: store errors reach the caller; an id that belongs to another user is a
``SessionConflict``.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import timedelta

from backend.clock import Clock
from backend.engine.conversation_match import (
    ClientMessage,
    Final,
    Placement,
    place,
    plausible,
    tail_needed,
)
from backend.personas import PersonaRegistry
from backend.sessions.store import MAX_SESSION_ID, Session, SessionExists, SessionStore

MATCH_SESSIONS = 20  # the user's most recent sessions a resent history is matched against
BRANCHES = 200  # a conversation's branches looked at
BRANCH_MARK = "~"
# A one-message request that repeats the one message of a session regenerates its reply
# only this soon after (later, it is a new chat that opens the same way).
FIRST_TURN_REDO = timedelta(minutes=10)


class SessionConflict(Exception):
    """The session id belongs to another user (the web layer answers 404)."""


@dataclass(frozen=True, slots=True)
class Resolved:
    session: Session
    created: bool
    placement: Placement
    seed: tuple[ClientMessage, ...] = ()  # a new session's history, stored as merged


async def resolve(
    sessions: SessionStore,
    personas: PersonaRegistry,
    clock: Clock,
    *,
    user_id: str,
    persona_id: str | None,
    session_id: str | None,
    client: tuple[ClientMessage, ...],
    final: Final,
    whole_history: bool = False,
) -> Resolved:
    if session_id:
        found = await asyncio.to_thread(sessions.get_session, session_id, user_id)
        if found is None:
            persona = personas.resolve(persona_id)
            return await _create(sessions, user_id, persona.id, session_id, client, final)
        if plain_turn(client, final, whole_history):  # no transcript needed
            return Resolved(found, False, Placement("turn", 0))
        best = await _best(
            sessions, [found], client, final, identified=True, clock=clock,
            whole_history=whole_history,
        )  # fmt: skip
        if best is None:  # the history left the named session: one of its branches?
            branches = await asyncio.to_thread(_branches, sessions, found)
            best = await _best(sessions, branches, client, final, identified=False, clock=clock)
        if best is not None:
            return best
        branch = f"{found.id[: MAX_SESSION_ID - 9]}{BRANCH_MARK}{uuid.uuid4().hex[:8]}"
        return await _create(sessions, user_id, found.persona_id, branch, client, final)
    persona = personas.resolve(persona_id)
    candidates = await asyncio.to_thread(
        sessions.list_sessions, user_id, persona.id, MATCH_SESSIONS
    )
    best = await _best(sessions, candidates, client, final, identified=False, clock=clock)
    if best is not None:
        return best
    return await _create(sessions, user_id, persona.id, None, client, final)


def _branches(sessions: SessionStore, session: Session) -> list[Session]:
    base = session.id.split(BRANCH_MARK)[0][: MAX_SESSION_ID - 9] + BRANCH_MARK
    listed = sessions.list_sessions(session.user_id, None, BRANCHES)
    return [s for s in listed if s.id.startswith(base) and s.id != session.id]


async def _best(
    sessions: SessionStore,
    candidates: list[Session],
    client: tuple[ClientMessage, ...],
    final: Final,
    *,
    identified: bool,
    clock: Clock,
    whole_history: bool = False,
) -> Resolved | None:
    """The candidate whose transcript the client's messages overlap most (the most recent
    of equals: candidates come most recent first)."""
    best: Resolved | None = None
    needed = tail_needed(client)
    for session in candidates:
        # Only the transcript's end can line up with the client's messages: its last two
        # say whether it may, then as many as the client sent (not the whole transcript).
        last = await asyncio.to_thread(sessions.tail, session.id, 2)
        if not plausible(last, client):
            continue
        rows = await asyncio.to_thread(sessions.tail, session.id, needed)
        placement = place(
            rows,
            client,
            final,
            identified=identified,
            whole_history=whole_history,
            complete=len(rows) < needed,
        )
        if placement is None:
            continue
        stale = clock.now() - session.updated_at > FIRST_TURN_REDO
        if not identified and placement.overlap < 2 and stale:
            continue  # the one-turn regeneration: only while that chat is fresh
        if best is None or placement.overlap > best.placement.overlap:
            best = Resolved(session, False, placement)
        if placement.overlap >= 2:
            break  # the most recent session a whole exchange lines up with
    return best


def plain_turn(client: tuple[ClientMessage, ...], final: Final, whole_history: bool) -> bool:
    """A named session's request that is only its new message (the ``openai`` SDK with
    ``X-Session-Id``, the browser UI): a new turn, whatever the transcript holds."""
    return len(client) == 1 and final == "turn" and not whole_history


async def _create(
    sessions: SessionStore,
    user_id: str,
    persona_id: str,
    session_id: str | None,
    client: tuple[ClientMessage, ...],
    final: Final,
) -> Resolved:
    try:
        created = await asyncio.to_thread(
            sessions.create_session, user_id, persona_id, None, session_id
        )
    except SessionExists as exc:
        raise SessionConflict(session_id) from exc
    if final == "turn":  # the history is seeded; the last message is the turn's
        return Resolved(created, True, Placement("turn", 0), client[:-1])
    if final == "continue" and client and client[-1].role == "assistant":
        # The reply to continue is stored as this turn's target.
        return Resolved(created, True, Placement("continue", 0, client[-1:]), client[:-1])
    return Resolved(created, True, Placement("reply", 0), client)
