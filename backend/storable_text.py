"""Text every store can hold: no NUL character, no unpaired UTF-16 surrogate.

JSON lets a client (or a model) send ``"\\u0000"`` and a lone ``"\\ud800"``; Python
decodes both into a ``str``, but neither survives the trip into storage: PostgreSQL
refuses NUL in text, and a lone surrogate cannot be encoded as UTF-8 at all (SQLite,
Chroma, the HTTP response). The web layer refuses such input with a 400 that names it
(``unstorable_reason``); the stores replace what still arrives from elsewhere (a
model's reply) with U+FFFD (``storable``), so a turn never fails on it.
"""

from __future__ import annotations

import re

# A decoded surrogate pair is one astral code point, so any surrogate left is unpaired.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def unstorable_reason(text: str) -> str | None:
    """Why ``text`` cannot be stored as it is, or ``None`` when it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000)"
    return f"contains an unpaired UTF-16 surrogate (\\u{ord(found.group()):04x})"


def storable(text: str) -> str:
    """``text`` with every NUL and unpaired surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text)
