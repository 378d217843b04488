"""A reply's words about the prompt's notes, left out as the reply streams.

The chat model reads recalled memories in a ``<recalled_notes>`` block; small models
then say where their knowledge came from: "Your exam is on May 10, as noted in your
recalled notes." (Qwen2.5-Coder-1.5B, five replies of one session of
``bench.reply_quality``'s probes, each said after the last). A companion remembers; it
does not cite its prompt. :class:`NotesClauseFilter` leaves out such a clause — "as
noted in your recalled notes", "according to my notes", "from the recalled notes" —
with its comma, and when it opened the sentence the next word is capitalised.

Streaming: text that may still become such a clause ("…May 10, as noted in your re")
is held until it either is one (left out) or cannot be (shown); nothing else is held.
English only: the Chinese replies seen say no such thing. Pure: no I/O.
"""

from __future__ import annotations

import re
from itertools import product

_LEADS = (
    "as noted in", "as mentioned in", "as stated in", "as written in", "as recorded in",
    "as listed in", "as shown in", "as per", "according to", "based on",
)  # fmt: skip
_OWNERS = ("your", "my", "the", "our")
# With "recalled" any lead names the prompt; "notes" alone only after a lead that cites
# ("in your notes" may be the user's own notebook).
PHRASES: tuple[str, ...] = tuple(
    [f"{lead} {owner} recalled notes" for lead, owner in product(_LEADS, _OWNERS)]
    + [f"{lead} {owner} notes" for lead, owner in product(_LEADS, _OWNERS)]
    + [f"{prep} {owner} recalled notes" for prep, owner in product(("in", "from"), _OWNERS)]
)

_PHRASE = "|".join(
    sorted((re.escape(p).replace(r"\ ", r"\s+") for p in PHRASES), key=len, reverse=True)
)
# A whole clause, with the comma or space before it and a comma after it.
_CLAUSE = re.compile(rf"(?P<pre>\s*,\s*|\s+)?\b(?:{_PHRASE})\b(?P<trail>\s*,)?", re.IGNORECASE)
_WORD_START = re.compile(r"(?:^|(?<=[\s,;(]))\S")
_SENTENCE_END = re.compile(r"[.!?…]\s*$")
_TRAILING_COMMA = re.compile(r"\s*,\s*$")


def _may_begin_clause(tail: str) -> bool:
    """``tail`` (from a word's start) begins a phrase and is not yet all of it."""
    flat = " ".join(tail.lower().split()) + (" " if tail[-1:].isspace() else "")
    return bool(flat.strip()) and any(p.startswith(flat) and p != flat.rstrip() for p in PHRASES)


class NotesClauseFilter:
    """Feed the reply's text as it streams; show what comes back (module docstring)."""

    def __init__(self) -> None:
        self._held = ""
        self._at_sentence_start = True  # nothing shown yet, or a sentence just ended
        self._capitalise = False  # a clause opening the sentence was left out

    def feed(self, text: str) -> str:
        """What of ``text`` (after anything held) can be shown now."""
        return self._emit(self._held + text, final=False)

    def flush(self) -> str:
        """The end of the reply: whatever is held, its clause left out if it is one."""
        return self._emit(self._held, final=True)

    def _emit(self, text: str, *, final: bool) -> str:
        self._held = ""
        out: list[str] = []
        last = 0
        cut = len(text)
        for match in _CLAUSE.finditer(text):
            if not final and match.end() == len(text):
                cut = match.start()  # a comma may still follow it: held
                break
            before = text[last : match.start()]
            out.append(self._shown(before))
            ahead = "".join(out)
            opens = (not ahead.strip() and self._at_sentence_start) or bool(
                _SENTENCE_END.search(ahead)
            )
            pre = match.group("pre") or ""
            if opens:  # "According to my notes, your exam…": the sentence starts after it
                out.append(" " if pre and not pre.strip() and ahead else "")
                self._capitalise = True
            last = match.end()
        rest, self._held = text[last:cut], text[cut:]
        if not final and not self._held:
            # Held: a tail that may still become a clause, and a comma that may lead one.
            for start in (m.start() for m in _WORD_START.finditer(rest)):
                if _may_begin_clause(rest[start:]):
                    rest, self._held = rest[:start], rest[start:]
                    break
            comma = _TRAILING_COMMA.search(rest)
            if comma is not None:
                rest, self._held = rest[: comma.start()], rest[comma.start() :] + self._held
        out.append(self._shown(rest))
        shown = "".join(out)
        if shown.strip():
            self._at_sentence_start = bool(_SENTENCE_END.search(shown))
        return shown

    def _shown(self, text: str) -> str:
        """``text`` as shown: its first letter capitalised after a cut-off opening."""
        if not self._capitalise:
            return text
        match = re.search(r"\w", text)
        if match is None:
            return text.lstrip() if not text.strip() else text
        self._capitalise = False
        head = text[: match.start()].lstrip()
        return head + text[match.start()].upper() + text[match.end() :]
