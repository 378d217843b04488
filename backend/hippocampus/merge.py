"""Merge a hippocampus result into the session state (docs/architecture.md, "One turn", step 5).

Pure and deterministic: the same inputs always give the same state.

- new ``background`` = the result's (the parser already kept the previous one when the
  model's was missing);
- new ``short_term`` = the result's items + the user message + the reply, verbatim. A
  result item is marked compressed unless its text equals a verbatim item of the
  previous state; a trailing result item that repeats the new user message is dropped
  (the model was told not to include it; the verbatim copy is appended anyway);
- ``user_emotion`` = the result's, or the previous one when the result has none.

Failure policy: ``result=None`` (the hippocampus failed, timed out or answered garbage)
keeps the previous background, short-term and emotion and appends the new verbatim turn.
Either way the token budget is then enforced by code (``budget.enforce_budget``): the
oldest items go, the newest turn stays (cut from the middle only if it alone exceeds the
budget). Nothing is lost: the transcript keeps every raw message. Code never folds
dropped items into the background; that is the hippocampus's job — so what the budget
drops while the hippocampus is failing goes to ``missed`` (at most ``MISSED_BUDGET_FACTOR``
times the short-term budget, the newest kept), and so do the failed runs' user messages
still in short-term (verbatim, in both: the hippocampus forms long-term facts from
``missed_turns`` and the new message only, and a session that ends on a failed run has
them listed for the user's next session to read). Each working run is shown the oldest
of them (``budget.catch_up_batch``, via ``prompt.build_messages``) and can still fold
them into the background and long-term; its merge removes that batch from ``missed``.
With ``catch_up="message"`` (the compact contract, which reads only new messages) a
failed run leaves its user message itself in ``missed`` instead, since no run has read it.

Long-term candidates are not handled here: the engine sends ``result.long_term`` through
the save gate.
"""

from __future__ import annotations

from typing import Literal

from backend.hippocampus.budget import catch_up_batch, enforce_budget, item_tokens
from backend.hippocampus.parse import clean_text
from backend.hippocampus.state import HippocampusResult, SessionMemoryState, ShortTermItem

# How much of an outage the next working run catches up on, in short-term budgets: a
# longer outage's oldest turns stay in the transcript only (the hippocampus prompt must
# stay bounded too).
MISSED_BUDGET_FACTOR = 2


def _bounded_missed(items: list[ShortTermItem], token_budget: int) -> tuple[ShortTermItem, ...]:
    """The newest of ``items`` that fit ``MISSED_BUDGET_FACTOR * token_budget`` tokens."""
    limit = MISSED_BUDGET_FACTOR * token_budget
    kept: list[ShortTermItem] = []
    total = 0
    for item in reversed(items):
        total += item_tokens(item)
        if total > limit:
            break
        kept.append(item)
    return tuple(reversed(kept))


def _new_turn(user_message: str, reply: str) -> list[ShortTermItem]:
    """The newest turn, verbatim; an empty message or reply adds no item."""
    turn: list[ShortTermItem] = []
    if user_message.strip():
        turn.append(ShortTermItem(role="user", text=user_message, compressed=False))
    if reply.strip():
        turn.append(ShortTermItem(role="assistant", text=reply, compressed=False))
    return turn


def _carried_items(
    previous: SessionMemoryState, result: HippocampusResult, user_message: str
) -> list[ShortTermItem]:
    verbatim = {item.text.strip() for item in previous.short_term if not item.compressed}
    items = [
        ShortTermItem(role=item.role, text=item.text, compressed=item.text.strip() not in verbatim)
        for item in result.short_term
    ]
    new_message = clean_text(user_message)
    if items and items[-1].role == "user" and items[-1].text.strip() == new_message:
        items.pop()
    return items


def merge(
    previous: SessionMemoryState,
    result: HippocampusResult | None,
    user_message: str,
    reply: str,
    *,
    token_budget: int,
    catch_up: Literal["trimmed", "message"] = "trimmed",
    trim_to: int | None = None,
    trim_at: int | None = None,
) -> SessionMemoryState:
    """The session state after one turn (see the module docstring for the rules).

    ``trim_to``: once short-term is over the budget (or ``trim_at``:
    ``budget.merge_trim_at``), trim it down to this many tokens (``budget.chunked_trim``)
    rather than just below the budget.

    ``catch_up``: what a failed run (``result=None``) leaves for the next working one:
    the short-term items the budget trims (the full contract), or the user message no
    run has read (the compact one).

    ``token_budget`` bounds ``budget.short_term_tokens(state.short_term)``; a budget
    below ``budget.MIN_TOKEN_BUDGET`` raises ``ValueError`` (a configuration error).
    """
    turn = _new_turn(user_message, reply)
    if result is None:
        background = previous.background
        carried = list(previous.short_term)
        emotion = previous.user_emotion
    else:
        background = result.background
        carried = _carried_items(previous, result, user_message)
        emotion = result.user_emotion if result.user_emotion is not None else previous.user_emotion
    short_term = enforce_budget(
        carried + turn,
        token_budget=token_budget,
        protected=len(turn),
        trim_to=trim_to,
        trim_at=trim_at,
    )
    unread = [item for item in turn if item.role == "user"]
    if result is None and catch_up == "message":
        missed = _bounded_missed(list(previous.missed) + unread, token_budget)
    elif result is None:
        # The budget drops the oldest carried items (the new turn is protected): no
        # hippocampus has folded them in yet. The user messages still in the window
        # that no run has read are listed too, so that a session ending here is caught
        # up by the user's next one (the engine's ``_adopt_unread``).
        dropped = carried[: len(carried) - (len(short_term) - len(turn))]
        window = set(carried)
        earlier = [item for item in previous.missed if item not in window]
        pending = {item for item in previous.missed if item in window} | set(unread)
        still = [item for item in short_term if item in pending]
        # (bounded apart: the window's are bounded by the short-term budget already)
        missed = _bounded_missed(earlier + dropped, token_budget) + tuple(still)
    else:  # this run was shown the oldest batch (the same function built its prompt)
        missed = previous.missed[len(catch_up_batch(previous.missed)) :]
    return SessionMemoryState(
        background=background, short_term=short_term, user_emotion=emotion, missed=missed
    )


def fallback_state(
    previous: SessionMemoryState,
    user_message: str,
    reply: str,
    *,
    token_budget: int,
    catch_up: Literal["trimmed", "message"] = "trimmed",
) -> SessionMemoryState:
    """The failure fallback: ``merge(previous, None, user_message, reply, ...)``."""
    return merge(previous, None, user_message, reply, token_budget=token_budget, catch_up=catch_up)
