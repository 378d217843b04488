"""Recalled notes stay where they were shown, so a local model's prompt cache holds.

llama.cpp reuses its previous prompt's tokens up to the first one that differs. If each
turn's notes block replaced the last one, the previous turn's block would be the first
difference, and every turn would evaluate again the previous exchange plus a whole new
block (the preamble, the background, up to eight notes): on a 2-core CPU that made the
time to the first token grow from 0.4 s to 5.6 s over ten turns (docs/benchmarks.md,
"Chat latency"). Instead, the block a turn was shown stays in the history right before
that turn's user message, and the new turn gets a block with the best recalled notes
(``ALWAYS_SHOWN``) and otherwise only what the history does not show yet: notes not shown
in the window, and the background if it changed since short-term was last trimmed; and
while the whole session is still in the window, no note formed in it (its message is
right there). The new prompt is then the previous one plus the reply plus a short tail.

Per process and in memory only (the cache it serves is too): a session continued in
another process, or after a restart, shows its earlier turns without their blocks, which
costs that process one full prompt evaluation and nothing else. Bounded: a session keeps
only the blocks of user messages still in its short-term window, and at most
``MAX_SESSIONS`` sessions are kept (the least recently used goes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from backend.engine.prompt import memory_block
from backend.hippocampus import SessionMemoryState
from backend.hippocampus.budget import estimate_tokens
from backend.memory.types import Memory

MAX_SESSIONS = 256
# The best recalled notes are shown right before the message even when the window shows
# them already: a small model uses a note next to the question, not one five messages
# up (the persona demos: 6/9 probes with three, 4/9 with one; each costs ~25 prompt
# tokens a turn).
ALWAYS_SHOWN = 3
# The earlier blocks a prompt carries, in estimated tokens: over this, they all go at once
# (the cache is shifted over the gaps: backend.llm.cache_reuse); they also go with their
# user messages, when short-term is trimmed. With the 1500-token short-term budget and a
# ~800-token persona this keeps the prompt near 3,100 tokens, well inside a 4k context.
EARLIER_NOTES_TOKENS = 600


@dataclass(frozen=True, slots=True)
class Shown:
    """The notes block shown right before one user message."""

    user_text: str
    block: str
    memory_ids: frozenset[str]
    background: str
    window_start: str  # the first short-term item's text when the block was shown


@dataclass(frozen=True, slots=True)
class NotesPlan:
    """What a turn's prompt shows: the earlier blocks (keyed by the user message they
    precede), and for its own block the notes and the background the window lacks."""

    earlier: dict[str, str]
    memories: list[Memory]
    background: str
    shown: Shown
    kept: list[Shown]  # the earlier blocks the prompt carries


class ShownNotes:
    """The notes blocks shown in each session's current window (module docstring)."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, list[Shown]] = OrderedDict()

    def plan(
        self,
        session_id: str,
        view: SessionMemoryState,
        recalled: Sequence[Memory],
        user_text: str,
        *,
        whole_session: bool = False,
    ) -> NotesPlan:
        """This turn's notes: the window's earlier blocks, and a block with what they lack.

        ``whole_session``: every message of this session is in the window verbatim, so a
        note formed in this session says what the window already shows: left out."""
        if whole_session:
            recalled = [m for m in recalled if m.source_session != session_id]
        in_window = {item.text for item in view.short_term if item.role == "user"}
        earlier = [s for s in self._sessions.get(session_id, []) if s.user_text in in_window]
        if sum(estimate_tokens(s.block) for s in earlier) > EARLIER_NOTES_TOKENS:
            earlier = []
        visible = frozenset().union(*(s.memory_ids for s in earlier))
        new = [m for i, m in enumerate(recalled) if i < ALWAYS_SHOWN or m.id not in visible]
        start = view.short_term[0].text if view.short_term else ""
        background = view.background if _background_news(view, earlier) else ""
        block = memory_block(background, new) or ""
        shown = Shown(user_text, block, frozenset(m.id for m in new), background.strip(), start)
        earlier_blocks = {s.user_text: s.block for s in earlier if s.block}
        return NotesPlan(earlier_blocks, new, background, shown, earlier)

    def record(self, session_id: str, plan: NotesPlan) -> None:
        """Remember the block a turn showed (after its prompt was built)."""
        self._sessions[session_id] = [*plan.kept, plan.shown]
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)


def _background_news(view: SessionMemoryState, earlier: list[Shown]) -> bool:
    """Show the background if the window does not show it, or if it changed since and
    short-term has been trimmed since: the background carries what left the window, so
    until something has left, what it gained is still in the window, verbatim."""
    background = view.background.strip()
    last = next((s for s in reversed(earlier) if s.background), None)
    if not background or (last is not None and last.background == background):
        return False
    in_window = {item.text for item in view.short_term}
    return last is None or (bool(last.window_start) and last.window_start not in in_window)
