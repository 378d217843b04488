"""Recalled notes stay where they were shown, so a local model's prompt cache holds.

llama.cpp reuses its previous prompt's tokens up to the first one that differs. If each
turn's notes block replaced the last one, the previous turn's block would be the first
difference, and every turn would evaluate again the previous exchange plus a whole new
block (the preamble, the background, up to eight notes): on a 2-core CPU that made the
time to the first token grow from 0.4 s to 5.6 s over ten turns (docs/benchmarks.md,
"Chat latency"). Instead, the block a turn was shown stays in the history right before
that turn's user message, and the new turn gets a block with the best recalled notes
(``ALWAYS_SHOWN``) when the message is about them (``pertinent``) and they were not shown
with one of the last few messages (``RECENT_TURNS``), and otherwise only what
the history does not show yet: notes not shown in the window, and, once short-term has
been trimmed, the background's lines whose message has left it and no block showed; and no
note formed from a message the window still shows verbatim (it is right there), nor one
the background the prompt shows already says (``said_in``: compact mode rolls the
session's facts into the background). The new prompt is then the previous one plus
the reply plus a short tail, and a turn with nothing new to show adds no block at all:
each block costs its preamble and notes (~130 tokens, ~2 s to the first token of
Qwen2.5-Coder-1.5B on two cores), so repeating the same three notes before every small-talk
message made a long evening's replies start in 3-8 s (docs/benchmarks.md, "Reply
quality").

A note knows its session and when it was written, not its message. Merges run in order
and write their notes before they save, so a note of the session written after a turn's
user message was stored (``Merged.at``) is from a message after those merged by then
(``Merged.seq``). Left out: the session's notes written after the first such moment whose
merges had reached the window's verbatim part (every message before it). This errs
towards showing: with either unknown (after a restart; the window's start not read),
none is left out, and a note written before that moment is shown, whatever its message.
A note the outbox writes late, after a store outage, is the exception. While the whole
session is in the window, every note formed in it is left out. A recalled health note
(an allergy, an injury) is always shown next to the message, with the app's rule not to
go against it (``prompt.HEALTH_RULE``): a small model heeds a rule next to the question,
not a message ten turns up.

Per process and in memory only (the cache it serves is too): a session continued in
another process, or after a restart, shows its earlier turns without their blocks, which
costs that process one full prompt evaluation and nothing else. Bounded: a session keeps
only the blocks of user messages still in its short-term window and its last
``MAX_MERGED`` ``Merged`` moments, and at most ``MAX_SESSIONS`` sessions are kept (the
least recently used goes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from backend.engine.prompt import MEMORY_PREAMBLE, is_health_note, memory_block
from backend.hippocampus import SessionMemoryState
from backend.hippocampus.budget import estimate_tokens
from backend.longterm.activation import Activation
from backend.memory.hybrid import cosine_trust, relevance_evidence
from backend.memory.keywords import keyword_set
from backend.memory.own_questions import asks_for_profile
from backend.memory.types import HybridWeights, Memory
from backend.sessions.store import Message

MAX_SESSIONS = 256
# The moments kept per session (``Merged``): more than a short-term window has turns.
MAX_MERGED = 64
# The best recalled notes are shown right before the message even when the window shows
# them already, if the message is about them: a small model uses a note next to the
# question, not one five messages up (the persona demos: 6/9 probes with three, 4/9 with
# one; each costs ~25 prompt tokens a turn, plus the block's preamble).
ALWAYS_SHOWN = 3
# ... unless it was shown with one of the last this many messages: a conversation that
# stays on one topic would otherwise read the same block before every message (the
# prompt then grows by a block a turn: bench.hippocampus_outage).
RECENT_TURNS = 2
# How much the message itself must speak for a note (``relevance_evidence``: the trusted
# cosine and the lexical match, in [0, 1]) for it to be shown again next to it. Alone, a
# MiniLM cosine of ~0.4 ("when is my sister's wedding?" and "The user's sister Mei is
# getting married on 20 December."); small talk beside an unrelated note is ~0.1-0.2.
PERTINENT_EVIDENCE = 0.3
# ... and for a note that may answer the message's question, shown next to it again
# (``answer_ids``): lower, for a question names what it asks, not the answer. "What's the
# race I'm training for again, and where?" and "The user signed up for her first sprint
# triathlon, in September in Geelong." are 0.25; "where's a nice route for a night run near
# where I live now?" and the note of the new flat by West Lake 0.23 (bench.reply_quality's
# probe sessions; unrelated notes there 0.15-0.2).
ANSWER_EVIDENCE = 0.2
# The earlier blocks a prompt carries, in estimated tokens: over this, they all go at once
# (the cache is shifted over the gaps: backend.llm.cache_reuse), but for the newest one
# with a background (shown again, it would cost its whole length: the background alone
# can be ~400 tokens); they also go with their user messages, when short-term is
# trimmed. The notes of the blocks that went are not shown again in this window unless a
# message is about them: else each drop made the next turns show them all again. With
# the 1500-token short-term budget and a ~800-token persona this keeps the prompt near
# 3,100 tokens, well inside a 4k context.
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
class Merged:
    """When a turn's user message was stored (``at``), the session was merged through
    message ``seq``: a note of the session written after ``at`` is from a later message."""

    seq: int
    at: datetime


@dataclass(frozen=True, slots=True)
class NotesPlan:
    """What a turn's prompt shows: the earlier blocks (keyed by the user message they
    precede), and for its own block the notes and the background the window lacks."""

    earlier: dict[str, str]
    memories: list[Memory]
    background: str
    shown: Shown
    kept: list[Shown]  # the earlier blocks the prompt carries
    merged: tuple[Merged, ...] = ()  # the session's moments to keep, old to new
    # Blocks of the window that went for the budget: their notes were read in this window,
    # and are shown again only next to a message about them.
    retired: list[Shown] = field(default_factory=list)
    brief: bool = False  # its own block has the brief preamble (``prompt.memory_block``)
    # The background's lines (casefolded): the user message of the turn that first saw
    # each, or None once shown (``background_news``).
    lines: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Window:
    blocks: list[Shown]
    retired: list[Shown]
    moments: tuple[Merged, ...]
    lines: Mapping[str, str | None]  # ``NotesPlan.lines``


class ShownNotes:
    """The notes blocks shown in each session's current window (module docstring)."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, _Window] = OrderedDict()

    def plan(
        self,
        session_id: str,
        view: SessionMemoryState,
        recalled: Sequence[Memory],
        user_text: str,
        *,
        whole_session: bool = False,
        merged: Merged | None = None,
        verbatim_from: int | None = None,
        pertinent: Collection[str] | None = None,
        answers: Collection[str] = (),
        now: datetime | None = None,
    ) -> NotesPlan:
        """This turn's notes: the window's earlier blocks, and a block with what they lack.

        A note formed in this session from a message the window shows verbatim says what
        the window already shows: left out (module docstring). ``whole_session``: every
        message of the session is in the window verbatim. ``merged``: this turn's moment.
        ``verbatim_from``: the window shows verbatim the message of this ``seq`` and every
        later one (``verbatim_start``); ``None``: unknown. ``pertinent``: the ids of the
        recalled notes the message is about (``pertinent_ids``), the only ones shown again
        when the window shows them already; ``None``: every one of the best. ``answers``:
        the ids of the notes that answer the message's question, shown again unless the
        previous message was shown them. ``now``: what the notes' ages are counted from."""
        known = self._sessions.get(session_id)
        window = known or _Window([], [], (), {})
        moments = window.moments
        if merged is not None:
            moments = (*moments, merged)[-MAX_MERGED:]
        # The first moment whose merges reached the message before the verbatim part; the
        # earlier ones go (should the window start earlier again, a later one leaves out
        # fewer notes, never a wrong one).
        first = None
        if verbatim_from is not None:
            reached = (i for i, moment in enumerate(moments) if moment.seq >= verbatim_from - 1)
            first = next(reached, None)
        if whole_session:
            recalled = [m for m in recalled if m.source_session != session_id or is_health_note(m)]
        elif first is not None:
            moments = moments[first:]
            since = moments[0].at
            recalled = [
                m
                for m in recalled
                if m.source_session != session_id or m.created_at <= since or is_health_note(m)
            ]
        in_window = {item.text for item in view.short_term if item.role == "user"}
        earlier = [s for s in window.blocks if s.user_text in in_window]
        retired = [s for s in window.retired if s.user_text in in_window]
        if sum(estimate_tokens(s.block) for s in earlier) > EARLIER_NOTES_TOKENS:
            carrier = next((s for s in reversed(earlier) if s.background), None)
            retired += [s for s in earlier if s is not carrier]
            earlier = [carrier] if carrier is not None else []
        seen = window.lines if known is not None else None
        background = background_news(view, earlier, seen)
        # A note the background the prompt shows already says (compact mode rolls the
        # session's facts into it) counts as shown: else each turn after a trim showed
        # the trimmed messages' notes under the background that holds them (~130 tokens).
        said = "\n".join([*(s.background for s in earlier if s.background), background])
        covered = frozenset(m.id for m in recalled if said_in(m.content, said))
        visible = covered.union(*(s.memory_ids for s in earlier))
        read = visible.union(*(s.memory_ids for s in retired))

        # Shown with one of the last few messages: still next to this one.
        recent = earlier[len(earlier) - RECENT_TURNS :] if RECENT_TURNS > 0 else []
        lately = frozenset().union(*(s.memory_ids for s in recent))
        last = earlier[-1].memory_ids if earlier else frozenset()

        def again(i: int, m: Memory) -> bool:
            # A note that answers the message's question, whatever its rank: "Which stroke
            # should I plan to use on race day?" got "…consider using the sprint stroke"
            # with "The user will do freestyle in the race" shown two messages up, behind
            # a long training plan (bench.reply_quality's probe sessions).
            if m.id in answers and m.id not in last:
                return True
            if pertinent is not None and m.id not in pertinent:
                return False
            return m.id not in visible or (i < ALWAYS_SHOWN and m.id not in lately)

        new = [
            m
            for i, m in enumerate(recalled)
            if is_health_note(m) or m.id not in read or again(i, m)
        ]
        start = view.short_term[0].text if view.short_term else ""
        # The rules are said once in full in the prompt; later blocks point back to them.
        brief = any(s.block.startswith(MEMORY_PREAMBLE) for s in earlier)
        block = memory_block(background, new, brief=brief, now=now) or ""
        shown = Shown(user_text, block, frozenset(m.id for m in new), background.strip(), start)
        earlier_blocks = {s.user_text: s.block for s in earlier if s.block}
        said_now = {_line_key(line) for line in background.split("\n")}
        lines = {
            key: None if key in said_now else (seen or {}).get(key, user_text)
            for key in map(_line_key, _lines(view.background))
        }
        return NotesPlan(
            earlier_blocks, new, background, shown, earlier, moments, retired, brief, lines
        )

    def record(self, session_id: str, plan: NotesPlan) -> None:
        """Remember the block a turn showed (after its prompt was built)."""
        self._sessions[session_id] = _Window(
            [*plan.kept, plan.shown], plan.retired, plan.merged, plan.lines
        )
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)


def pertinent_ids(
    activation: Activation | None, query_text: str, weights: HybridWeights
) -> frozenset[str]:
    """The recalled notes the message itself speaks for (``PERTINENT_EVIDENCE``); to a
    message about the user as a whole ("what do you know about me?"), every recalled note
    of the user: what it asks for, though it names none of them."""
    if activation is None:
        return frozenset()
    trust = cosine_trust(query_text, weights)
    profile = asks_for_profile(query_text)
    return frozenset(
        item.memory.id
        for item in activation.retrieval.items
        if relevance_evidence(item.score, trust, weights) >= PERTINENT_EVIDENCE
        or (profile and item.memory.subject == "user")
    )


def answer_ids(
    activation: Activation | None, query_text: str, weights: HybridWeights, n: int
) -> frozenset[str]:
    """The ``n`` recalled notes, health ones aside (always shown), the message speaks for
    most, down to ``ANSWER_EVIDENCE``: to a question, what may answer it."""
    if activation is None or n <= 0:
        return frozenset()
    trust = cosine_trust(query_text, weights)
    evidence = [
        (relevance_evidence(item.score, trust, weights), item.memory.id)
        for item in activation.retrieval.items
        if not is_health_note(item.memory)
    ]
    best = sorted((e for e in evidence if e[0] >= ANSWER_EVIDENCE), key=lambda e: -e[0])
    return frozenset(memory_id for _, memory_id in best[:n])


def injected_memories(
    activation: Activation | None, recalled: Sequence[Memory], plan: NotesPlan
) -> tuple[Memory, ...]:
    """The recalled memories the prompt shows as notes (``plan``'s own block and the
    earlier blocks it carries), less those activation held below its relevance floor
    only: reinforcing a note on every turn it is merely held would keep it salient for
    good (docs/memory-model.md, "Retrieval")."""
    shown = plan.shown.memory_ids.union(*(s.memory_ids for s in plan.kept))
    held = frozenset(activation.retrieval.held) if activation is not None else frozenset()
    return tuple(m for m in recalled if m.id in shown and m.id not in held)


def said_in(note: str, background: str) -> bool:
    """Every keyword of ``note`` is in ``background`` (a summary that says it)."""
    words = keyword_set(note)
    return bool(words) and words <= keyword_set(background)


def background_news(
    view: SessionMemoryState, earlier: Sequence[Shown], seen: Mapping[str, str | None] | None
) -> str:
    """What the prompt shows of the background, once short-term has been trimmed since a
    background was last shown (the background carries what left the window: until
    something has left, what it gained is still in the window, verbatim); "" for nothing.

    A background whose lines carry over from merge to merge (compact mode rolls a line a
    fact into it) shows only the lines not shown yet whose message has left the window
    (``seen``: the user message of the turn that first saw each line, None once shown).
    Shown whole at each trim, 1,000-1,500 characters were ~250-350 tokens the next reply
    read before its first token, 6-10 s on two cores, and most of them said what the
    window still showed verbatim or the last block had shown (docs/benchmarks.md, "Reply
    quality", the long session). A background rewritten whole (the full contract's prose)
    is shown whole when it changed, and so is every background of a session this process
    has not shown a turn of (``seen`` None)."""
    lines = _lines(view.background)
    last = next((s for s in reversed(earlier) if s.background), None)
    if not lines:
        return ""
    in_window = {item.text for item in view.short_term}
    if last is not None and (not last.window_start or last.window_start in in_window):
        return ""
    if seen is None:
        return "\n".join(lines)
    if not any(_line_key(line) in seen for line in lines):  # rewritten whole
        return "\n".join(lines)
    gone = [line for line in lines if seen.get(_line_key(line)) not in (None, *in_window)]
    return "\n".join(gone)


def _lines(background: str) -> list[str]:
    lines = (line.strip() for line in background.split("\n"))
    return list(dict.fromkeys(line for line in lines if line))


def _line_key(line: str) -> str:
    return line.strip().casefold()


def verbatim_start(view: SessionMemoryState, messages: Sequence[Message]) -> int | None:
    """The ``seq`` of the oldest of ``messages`` (the session's last ones, in order) that
    the window shows verbatim with every later one: short-term's items matched to them
    from the newest back, up to the first compressed or different one. ``None``: none."""
    said = [m for m in messages if m.role in ("user", "assistant") and m.content.strip()]
    start = None
    for item, message in zip(reversed(view.short_term), reversed(said), strict=False):
        if item.compressed or item.role != message.role:
            break
        if item.text.strip() != message.content.strip():
            break
        start = message.seq
    return start
