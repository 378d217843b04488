"""One fact per memory: a candidate that strings several of the user's facts together.

Small hippocampus models pack a first message into one note: "The user is Noor, the
user teaches chemistry in Leeds." Stored as one memory, the two facts are recalled,
reinforced and superseded together: the user moving school would replace their name.
``facts_of`` cuts such a candidate where another clause starts with "the user" (after a
comma, a semicolon, ", and", " and" or a full stop; 用户 after ，；。), so that each
fact goes through the save gate on its own.

It cuts only where every piece reads on its own:

- each piece starts with "the user" (or 用户) and has at least ``MIN_WORDS`` words;
- no later piece points back with a pronoun ("…, the user visits her every week": who
  "her" is lives in the piece before) or leaves its verb to it ("…and the user's
  sister does too");
- no piece is a fragment (``fragments.fragment_reason``).

Otherwise the candidate is kept whole. Pure; no I/O.
"""

from __future__ import annotations

import re

from backend.memory.fragments import fragment_reason

MIN_WORDS = 3
_USER_START = re.compile(r"^\s*(?:the user\b|用户)", re.I)
# Where a new clause about the user starts: the separator is dropped, the clause kept.
_CUT = re.compile(
    r"(?:\s*[,;]\s*(?:and\s+)?|\.\s+|\s+and\s+|\s*[，；。]\s*)(?=the user\b|用户)", re.I
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[\u3400-\u9fff]", re.I)
# A later piece with one of these leans on the piece before it.
_BACK_REFERENCE = frozenset(
    (
        "he", "she", "him", "her", "hers", "his", "they", "them", "their", "theirs", "it",
        "its", "this", "these", "those", "there", "both", "one", "too", "also", "either",
        "same", "so",
    )
)  # fmt: skip
_CJK = re.compile(r"[\u3400-\u9fff]")
_CJK_BACK_REFERENCE = ("他", "她", "它", "也", "这", "那")


def _piece(text: str) -> str:
    text = text.strip().rstrip(",;.，；。 ")
    if not text:
        return ""
    end = "。" if _CJK.search(text) else "."
    return text[0].upper() + text[1:] + end


def _reads_alone(piece: str, *, later: bool) -> bool:
    words = [w.lower() for w in _WORD.findall(piece)]
    if len(words) < MIN_WORDS or not _USER_START.match(piece):
        return False
    if later and (
        any(w in _BACK_REFERENCE for w in words) or any(c in piece for c in _CJK_BACK_REFERENCE)
    ):
        return False
    return fragment_reason(piece) is None


def facts_of(content: str) -> tuple[str, ...]:
    """The facts ``content`` strings together, one sentence each; ``(content,)`` when it
    is one fact, or cannot be cut so that each piece reads on its own."""
    if not _USER_START.match(content):
        return (content,)
    pieces = [_piece(p) for p in _CUT.split(content)]
    if len(pieces) < 2 or not all(_reads_alone(p, later=n > 0) for n, p in enumerate(pieces)):
        return (content,)
    return tuple(pieces)
