"""Warm the local models at start, so the first reply starts as fast as the later ones.

A local model loads on first use (the file's sha256 is checked, the weights mapped) and
then evaluates the whole prompt; every later turn of a session finds most of its prompt
in the model's cache (``backend.engine.prompt`` orders it so). At start the app does both
for what every conversation shares: the default persona's system message for the chat
model, the hippocampus's rules and worked examples for the hippocampus. Measured on a
2-core CPU with Qwen2.5-0.5B: the first reply of a fresh app started after 7.8 s
without it (docs/benchmarks.md, "Chat latency").

Failure policy: a model that cannot warm up is logged and left as it is (its first
turn loads it, and reports the failure if there is one); remote models are not touched.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from backend.engine.prompt import build_main_messages
from backend.hippocampus import SessionMemoryState, build_messages
from backend.hippocampus.compact import build_compact_messages
from backend.llm.port import LLMError, PromptCache

if TYPE_CHECKING:
    from backend.engine.turn import TurnEngine

log = logging.getLogger(__name__)

# A stand-in first message: what follows the shared prefix is evaluated again anyway.
FIRST_MESSAGE = "Hello!"


async def warm_up(engine: TurnEngine) -> None:
    """Prime each local model with the prompt prefix its turns share (the chat first)."""
    empty = SessionMemoryState()
    persona = engine.personas.default
    chat_prompt = build_main_messages(
        system_prompt=persona.system_prompt,
        client_system=None,
        state=empty,
        memories=[],
        user_message=FIRST_MESSAGE,
    )
    if engine.settings.hippocampus_mode == "compact":
        hippocampus_prompt = build_compact_messages(empty, FIRST_MESSAGE)
    else:
        focus = persona.hippocampus_focus
        hippocampus_prompt = build_messages(empty, FIRST_MESSAGE, persona_focus=focus)
    for role, model, prompt in (
        ("chat", engine.chat, chat_prompt),
        ("hippocampus", engine.hippocampus, hippocampus_prompt),
    ):
        await _prime(role, model, prompt)


async def _prime(role: str, model: Any, prompt: list[dict[str, Any]]) -> None:
    if not isinstance(model, PromptCache):
        return
    try:
        await model.prime(prompt)
    except LLMError as exc:
        log.warning("%s model did not warm up: %s", role, exc)
    else:
        log.info("%s model warm (%s)", role, getattr(model, "model", "?"))
