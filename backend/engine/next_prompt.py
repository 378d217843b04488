"""The next turn's prompt up to its new message, read while the user types.

Once a session's merges are saved, its next prompt is known up to the new user message:
the system message, the short-term window as the merge left it (perhaps trimmed), the
earlier turns' notes blocks (``backend.engine.shown_notes``) and, when the next turn
will show it, the new background summary at the start of its own block. A local chat
model reads that much into its cache then (``backend.llm.read_ahead``), and the reply
reads only the message and its recalled notes. Measured over a 67-message evening on two
cores: docs/benchmarks.md, "Reply quality", the long session.

What a session's prompts start with (the persona's system prompt, a client's system
message and example dialogue) is remembered from its last turn, per process and in
memory only, like the shown notes; a session with no turn in this process is not read
ahead. Failure policy: best effort. A read-ahead never delays a turn (the model stops
for any generation), is skipped while a turn of the session runs (its prompt is the
newer one) and logs its failures.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from backend.engine.prompt import build_main_messages
from backend.engine.shown_notes import ShownNotes
from backend.hippocampus import SessionMemoryState

# Sessions whose prompt start is kept (the least recently used goes).
MAX_SESSIONS = 256


@dataclass(frozen=True, slots=True)
class PromptHead:
    """What a session's prompts start with, as its last turn sent it."""

    system_prompt: str
    client_system: str | None
    examples: tuple[Mapping[str, Any], ...] = ()


class NextPrompt:
    """Each session's prompt head, and the start of its next prompt from them."""

    def __init__(self) -> None:
        self._heads: OrderedDict[str, PromptHead] = OrderedDict()

    def remember(
        self,
        session_id: str,
        *,
        system_prompt: str,
        client_system: str | None,
        examples: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self._heads[session_id] = PromptHead(system_prompt, client_system, tuple(examples))
        self._heads.move_to_end(session_id)
        while len(self._heads) > MAX_SESSIONS:
            self._heads.popitem(last=False)

    def start(
        self, session_id: str, view: SessionMemoryState, shown: ShownNotes
    ) -> list[dict[str, Any]] | None:
        """The next turn's messages before its user message (its own notes block cut
        after the background, the part known now), or None for a session not seen."""
        head = self._heads.get(session_id)
        if head is None:
            return None
        # No message yet: no recalled note is shown, only what the window carries.
        notes = shown.plan(session_id, view, [], "", pertinent=frozenset())
        return build_main_messages(
            system_prompt=head.system_prompt,
            client_system=head.client_system,
            state=replace(view, background=notes.background),
            memories=[],
            user_message=None,
            earlier_notes=notes.earlier,
            examples=head.examples,
        )
