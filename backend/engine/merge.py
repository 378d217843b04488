"""The background half of a turn: the hippocampus run, the save gate, reinforcement and
the merge (turn.md steps 2 and 5), off the reply's path.

``TurnEngine._begin_locked`` spawns ``run_hippocampus`` right after the user message is
persisted and ``write_long_term`` once the turn exists; ``Turn.stream`` spawns
``reinforce_recalled`` with the first token and ``merge_turn`` when the reply ends.

Failure policy: none of these ever breaks or delays a reply. The hippocampus's failure,
timeout or garbage → ``None`` (the merge's deterministic fallback), reported in its info;
a long-term write that could be neither applied nor queued → ``write_error`` in the
report; a failed reinforcement is logged. ``merge_turn`` always releases the session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from backend.engine import report as reports
from backend.engine.evidence import turn_evidence
from backend.engine.outbox_replay import write_or_queue
from backend.engine.session_state import save_state
from backend.hippocampus import (
    HippocampusParseError,
    HippocampusResult,
    SessionMemoryState,
    build_messages,
    hippocampus_schema,
    merge,
    parse_result,
)
from backend.hippocampus.compact import (
    build_compact_messages,
    compact_schema,
    new_messages,
    parse_compact,
    roll_background,
)
from backend.llm.port import LLMError
from backend.memory.screening import Screened, accepted, screen
from backend.memory.types import Emotion, GatePolicy
from backend.personas import Persona
from backend.stores.long_term import WriteOutcome

if TYPE_CHECKING:
    from backend.engine.turn import Turn, TurnEngine

log = logging.getLogger(__name__)


def _gate_policy(engine: TurnEngine, persona: Persona) -> GatePolicy:
    return persona.gate_policy or engine.long_term.gate_policy


def screen_candidates(
    engine: TurnEngine,
    state: SessionMemoryState,
    text: str,
    persona: Persona,
    result: HippocampusResult,
) -> list[Screened]:
    """The save gate's rule 0 on this turn's candidates (``backend.memory.screening``)."""
    compact = engine.settings.hippocampus_mode == "compact"
    return screen(
        result.long_term,
        turn_evidence(state, text, persona, compact=compact),
        min_support=_gate_policy(engine, persona).min_support,
    )


async def _ask(
    engine: TurnEngine, state: SessionMemoryState, text: str, persona: Persona
) -> HippocampusResult:
    """One hippocampus call in the configured contract, parsed."""
    if engine.settings.hippocampus_mode == "compact":
        schema = compact_schema(len(new_messages(state, text)))
        completion = await asyncio.wait_for(
            engine.hippocampus.complete(build_compact_messages(state, text), json_schema=schema),
            timeout=engine.settings.hippocampus_timeout_s,
        )
        result = parse_compact(completion.text, state)
        # Code keeps the background: the facts that pass screening roll into it.
        facts = accepted(screen_candidates(engine, state, text, persona, result))
        background = roll_background(state.background, [c.content for c in facts])
        return dataclasses.replace(result, background=background)
    messages = build_messages(state, text, persona_focus=persona.hippocampus_focus)
    completion = await asyncio.wait_for(
        engine.hippocampus.complete(messages, json_schema=hippocampus_schema()),
        timeout=engine.settings.hippocampus_timeout_s,
    )
    return parse_result(completion.text, state)


async def run_hippocampus(
    engine: TurnEngine, state: SessionMemoryState, text: str, persona: Persona
) -> tuple[HippocampusResult | None, dict[str, Any]]:
    started = time.perf_counter()
    info: dict[str, Any] = {
        "status": "ok",
        "model": engine.hippocampus.model,
        "mode": engine.settings.hippocampus_mode,
    }
    try:
        result = await _ask(engine, state, text, persona)
        if result.dropped:
            info["dropped"] = list(result.dropped)
    except TimeoutError:
        result, info["status"] = None, "timeout"
    except HippocampusParseError as exc:
        result, info["status"], info["error"] = None, "garbage", str(exc)[:300]
    except LLMError as exc:
        result, info["status"], info["error"] = None, "failed", str(exc)[:300]
    except Exception as exc:  # the hippocampus must never break a turn
        log.exception("hippocampus crashed")
        result, info["status"], info["error"] = None, "failed", type(exc).__name__
    info["ms"] = round((time.perf_counter() - started) * 1e3, 1)
    return result, info


async def write_long_term(engine: TurnEngine, turn: Turn) -> tuple[list[WriteOutcome], str | None]:
    """Long-term candidates → save gate → store, as soon as the hippocampus is in.

    A store outage queues the candidates in the outbox (``queue`` outcomes, replayed
    later by ``outbox_loop``); only a write that could be neither applied nor queued
    is reported as ``write_error``.
    """
    result, _info = await turn._hippocampus
    if result is None or not result.long_term:
        return [], None
    screened = screen_candidates(engine, turn._state, turn._user_text, turn.persona, result)
    rejected = [
        WriteOutcome("reject", s.candidate.content, s.rejected)
        for s in screened
        if s.rejected is not None
    ]
    for outcome in rejected:
        log.info("candidate rejected in %s: %s", turn.namespace.key, outcome.reason)
    passed = accepted(screened)
    if not passed:
        return rejected, None
    try:
        outcomes = await asyncio.to_thread(
            write_or_queue,
            engine.long_term,
            turn.namespace,
            passed,
            recalled=turn.recalled,
            source_session=turn.session.id,
            gate_policy=turn.persona.gate_policy,  # None: the configured one
        )
        return outcomes + rejected, None
    except Exception as exc:
        log.exception("long-term write failed for session %s", turn.session.id)
        return [], type(exc).__name__


async def reinforce_recalled(engine: TurnEngine, turn: Turn) -> None:
    used = [m.id for m in turn.recalled]
    if not used:
        return
    try:
        await asyncio.to_thread(engine.long_term.reinforce, turn.namespace, used)
    except Exception:
        log.exception("reinforcement failed for session %s", turn.session.id)


async def merge_turn(
    engine: TurnEngine, turn: Turn, stored: asyncio.Future[Any] | None = None
) -> dict[str, Any]:
    """Step 5 of turn.md; always releases the session for the next turn."""
    try:
        if stored is not None:
            await stored  # the reply row is final before the next turn can begin
        result, info = await turn._hippocampus
        state = merge(
            turn._state,
            result,
            turn._user_text,
            turn.reply,
            token_budget=engine.settings.token_budget,
            catch_up="message" if engine.settings.hippocampus_mode == "compact" else "trimmed",
        )
        await save_state(engine.sessions, turn.session.id, state)
        outcomes: list[WriteOutcome] = []
        if turn._writes is not None:
            outcomes, write_error = await turn._writes
            if write_error:
                info["write_error"] = write_error
        outcomes += turn._tool_outcomes
        if turn._tool_recalled:
            await asyncio.to_thread(
                engine.long_term.reinforce, turn.namespace, [m.id for m in turn._tool_recalled]
            )
        if turn._reinforced is not None:
            await turn._reinforced
        report: dict[str, Any] = {
            "turn_id": turn.turn_id,
            **reports.activation_part(turn.activation),
            **reports.outcomes_part(outcomes),
            "hippocampus": info,
            "reply": {"status": turn.status, "error": turn.error},
            "user_emotion": _emotion_dict(state.user_emotion),
        }
        await asyncio.to_thread(
            engine.sessions.save_turn_report, turn.session.id, turn.turn_id, report
        )
        return report
    finally:
        turn._release()


def _emotion_dict(emotion: Emotion | None) -> dict[str, Any] | None:
    return None if emotion is None else {"label": emotion.label, "intensity": emotion.intensity}
