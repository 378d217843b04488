"""What the save gate's screening may count as said: the evidence of one turn.

The user's words are those the hippocampus saw: the new message, the catch-up batch of
messages no run has read, and (full contract) the verbatim user items of short-term; the
compact contract reads only the new messages. The
persona's words are its card (name, description, system prompt, greeting) and its
replies in short-term; never its ``hippocampus_focus``, which is an instruction to the
memory, not something the companion said.
"""

from __future__ import annotations

from backend.hippocampus import SessionMemoryState
from backend.hippocampus.budget import catch_up_batch
from backend.hippocampus.compact import new_messages
from backend.memory.screening import Evidence
from backend.personas import Persona


def turn_evidence(
    state: SessionMemoryState, user_message: str, persona: Persona, *, compact: bool = False
) -> Evidence:
    """The evidence for this turn's candidates. ``compact``: the compact contract reads
    only the new messages, so only they are evidence (a fact repeated from an earlier
    turn is not this turn's)."""
    persona_words = [persona.name, persona.description, persona.system_prompt, persona.greeting]
    persona_words += [item.text for item in state.short_term if item.role == "assistant"]
    persona_evidence = tuple(text for text in persona_words if text)
    # Verbatim items only: a compressed one is the model's rewording, not the user's words.
    earlier = tuple(
        item.text for item in state.short_term if item.role == "user" and not item.compressed
    )
    if compact:
        return Evidence(
            user=new_messages(state, user_message), persona=persona_evidence, context=earlier
        )
    batch = catch_up_batch(state.missed)
    user = [item.text for item in batch if item.role == "user" and not item.compressed]
    return Evidence(user=(*earlier, *user, user_message), persona=persona_evidence)
