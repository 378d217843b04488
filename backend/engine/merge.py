"""The background steps of a turn: the hippocampus run, the save gate and reinforcement
(docs/architecture.md, "One turn", steps 2 and 5), off the reply's path.

The memory worker (``backend.engine.memory_worker``) runs ``run_hippocampus`` and
``write_long_term`` for the turns it merges; the turn (``backend.engine.turn_reply``)
spawns ``reinforce_recalled`` with the first token, and again for what the memory tools
recalled when the reply ends. Everything comes in as arguments (the engine's parts,
``turn_types.EngineParts``): nothing here reads a turn.

Failure policy: none of these ever breaks or delays a reply. The hippocampus's failure,
timeout or garbage → ``None`` (the merge's deterministic fallback), reported in its info;
a long-term write that could be neither applied nor queued → ``write_error`` in the
report; a failed reinforcement is logged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from backend.engine.evidence import turn_evidence
from backend.engine.turn_types import EngineParts
from backend.hippocampus import (
    HippocampusParseError,
    HippocampusResult,
    SessionMemoryState,
    build_messages,
    hippocampus_schema,
    parse_result,
)
from backend.hippocampus.compact import (
    build_compact_messages,
    compact_schema,
    in_chinese,
    new_messages,
    parse_compact,
    roll_background,
    run_openers,
)
from backend.llm.port import Completion, LLMError, LLMStreamInterrupted
from backend.longterm.memory import LongTermMemory, WriteOutcome
from backend.memory.provenance import formed_from
from backend.memory.screening import Screened, accepted, screen
from backend.memory.types import GatePolicy, Memory, Namespace
from backend.personas import Persona
from backend.sessions.store import SourceLink

log = logging.getLogger(__name__)


def _gate_policy(engine: EngineParts, persona: Persona) -> GatePolicy:
    return persona.gate_policy or engine.long_term.gate_policy


def screen_candidates(
    engine: EngineParts,
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
    engine: EngineParts, state: SessionMemoryState, text: str, persona: Persona
) -> HippocampusResult:
    """One hippocampus call in the configured contract, parsed."""
    if engine.settings.hippocampus_mode == "compact":
        openers = run_openers(state, text) if engine.settings.compact_subjects else None
        reads = new_messages(state, text)
        chinese = in_chinese(reads)
        schema = compact_schema(len(reads), openers, chinese=chinese)
        completion = await asyncio.wait_for(
            engine.hippocampus.complete(
                build_compact_messages(
                    state, text, named_subjects=openers is not None, chinese=chinese
                ),
                json_schema=schema,
            ),
            timeout=engine.settings.hippocampus_timeout_s,
        )
        result = _parsed(parse_compact, completion, state, engine.hippocampus.model)
        # Code keeps the background: the facts that pass screening roll into it.
        facts = accepted(screen_candidates(engine, state, text, persona, result))
        background = roll_background(state.background, [c.content for c in facts])
        return dataclasses.replace(result, background=background)
    messages = build_messages(state, text, persona_focus=persona.hippocampus_focus)
    completion = await asyncio.wait_for(
        engine.hippocampus.complete(messages, json_schema=hippocampus_schema()),
        timeout=engine.settings.hippocampus_timeout_s,
    )
    return _parsed(parse_result, completion, state, engine.hippocampus.model)


def _parsed(
    parse: Callable[[str, SessionMemoryState], HippocampusResult],
    completion: Completion,
    state: SessionMemoryState,
    model: str,
) -> HippocampusResult:
    """``parse``'s result; unreadable text from a stream with no finish reason was cut
    short (llama-cpp-python's server ends a running stream with a bare ``[DONE]`` when
    another request comes in): ``LLMStreamInterrupted``, so the run is asked again."""
    try:
        return parse(completion.text, state)
    except HippocampusParseError:
        # (The text may be empty: that server's first chunk is the role alone.)
        if completion.finish_reason is None:
            raise LLMStreamInterrupted(
                f"{model}: the answer ended with no finish reason, unreadable",
                partial_text=completion.text,
                model=model,
            ) from None
        raise


async def run_hippocampus(
    engine: EngineParts, state: SessionMemoryState, text: str, persona: Persona
) -> tuple[HippocampusResult | None, dict[str, Any]]:
    """One hippocampus run on ``state`` and the newest message ``text``: its result, or
    ``None`` (the merge's fallback), and its info for the memory report."""
    started = time.perf_counter()
    info: dict[str, Any] = {
        "status": "ok",
        "model": engine.hippocampus.model,
        "mode": engine.settings.hippocampus_mode,
    }
    try:
        try:
            result = await _ask(engine, state, text, persona)
        except LLMStreamInterrupted:
            # Cut short mid-stream: a one-slot server (llama-cpp-python's) stops a running
            # request for the next reply's. Asked again, it waits for that reply first
            # (``services.reply_first``). Once: cut again, the turn is left for the next
            # run to catch up, and it is no failure of the setup ("interrupted").
            info["retried"] = "stream interrupted"
            result = await _ask(engine, state, text, persona)
        if result.dropped:
            info["dropped"] = list(result.dropped)
    except LLMStreamInterrupted as exc:
        result, info["status"], info["error"] = None, "interrupted", str(exc)[:300]
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


async def write_long_term(
    engine: EngineParts,
    state: SessionMemoryState,
    text: str,
    persona: Persona,
    result: HippocampusResult | None,
    namespace: Namespace,
    recalled: Sequence[Memory],
    session_id: str,
    sources: Sequence[tuple[int, str]] = (),
) -> tuple[list[WriteOutcome], str | None]:
    """Long-term candidates → save gate → store, as soon as the hippocampus is in.

    The candidates that pass rule 0 (``screen_candidates``) go to
    ``LongTermMemory.write_or_queue`` (``backend.longterm.memory``): the rest of the
    gate, then the store; this is where a turn ends. A store outage queues the
    candidates in the outbox (``queue`` outcomes, replayed later by
    ``backend.longterm.outbox_replay.outbox_loop``); only a write that could be neither
    applied nor queued is reported as ``write_error``.

    ``sources``: the user messages the run read, ``(id, text)``; each memory written or
    reinforced records those it was formed from (``record_provenance``).
    """
    if result is None:
        return [], None
    # Even with no candidates: the user's name said this turn is one (``name_fact``).
    screened = screen_candidates(engine, state, text, persona, result)
    rejected = [
        WriteOutcome("reject", s.candidate.content, s.rejected)
        for s in screened
        if s.rejected is not None
    ]
    for outcome in rejected:
        log.info("candidate rejected in %s: %s", namespace.key, outcome.reason)
    passed = accepted(screened)
    if not passed:
        return rejected, None
    try:
        outcomes = await asyncio.to_thread(
            engine.long_term.write_or_queue,
            namespace,
            passed,
            recalled=list(recalled),
            source_session=session_id,
            gate_policy=persona.gate_policy,  # None: the configured one
        )
    except Exception as exc:
        log.exception("long-term write failed for session %s", session_id)
        return [], type(exc).__name__
    await record_provenance(engine, namespace, outcomes, sources)
    return outcomes + rejected, None


async def record_provenance(
    engine: EngineParts,
    namespace: Namespace,
    outcomes: Sequence[WriteOutcome],
    sources: Sequence[tuple[int, str]],
) -> None:
    """Each memory the gate wrote or reinforced, with the messages it was formed from
    (``backend.memory.provenance``; ``SessionStore.record_sources``). A failure is logged:
    the memory stays, without provenance, like one formed before it existed."""
    links = [
        SourceLink(o.memory_id, ids, existing=o.action == "reinforce")
        for o in outcomes
        if o.memory_id and o.action in ("write", "supersede", "reinforce")
        for ids in [formed_from(o.content, sources)]
        if ids
    ]
    if not links:
        return
    try:
        await asyncio.to_thread(
            engine.sessions.record_sources, namespace.user_id, namespace.persona_id, links
        )
    except Exception:
        log.exception("could not record where %d memories came from", len(links))


async def reinforce_recalled(
    long_term: LongTermMemory, namespace: Namespace, memories: Sequence[Memory], session_id: str
) -> None:
    """Reinforce the memories a turn used: the notes its prompt injected (``Turn.injected``),
    or those its tools recalled."""
    used = [m.id for m in memories]
    if not used:
        return
    try:
        await asyncio.to_thread(long_term.reinforce, namespace, used)
    except Exception:
        log.exception("reinforcement failed for session %s", session_id)
