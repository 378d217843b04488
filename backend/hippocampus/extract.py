"""Finding the hippocampus JSON object in a model's text answer.

The outermost layer of the defensive parse (``parse``; docs/memory-formation.md, "The
hippocampus"): the object is taken from text that is JSON, from a fenced block, from the
first ``{`` to the last ``}``, or from the first position where a JSON object decodes;
one level of wrapping (``{"result": {...}}``) or a list around it is looked through.
Nothing here validates a field; ``None`` means no object with an expected field.

Pure: no I/O, no clock, no logging of message text.
"""

from __future__ import annotations

import json
import re
from typing import Any

EXPECTED_FIELDS = frozenset({"background", "short_term", "long_term", "user_emotion"})
# How many ``{`` positions the last-resort scan tries before giving up (bounds the work
# on a long garbage answer).
MAX_SCAN_POSITIONS = 64
_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def as_result_object(value: Any) -> dict[str, Any] | None:
    """The hippocampus object in a decoded value: the dict itself, one level of
    wrapping (``{"result": {...}}``), or the first such dict in a list."""
    if isinstance(value, list):
        for element in value:
            found = as_result_object(element) if isinstance(element, dict) else None
            if found is not None:
                return found
        return None
    if not isinstance(value, dict):
        return None
    if EXPECTED_FIELDS & value.keys():
        return value
    for inner in value.values():
        if isinstance(inner, dict) and EXPECTED_FIELDS & inner.keys():
            return inner
    return None


def extract_object(raw: str) -> dict[str, Any] | None:
    """The hippocampus JSON object in a model's text answer, or ``None``."""
    text = raw.strip().lstrip("\ufeff")
    candidates = [text]
    candidates += [match.group(1).strip() for match in _FENCE.finditer(text)]
    first, last = text.find("{"), text.rfind("}")
    if first != -1 and last > first:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        found = as_result_object(_loads(candidate))
        if found is not None:
            return found
    decoder = json.JSONDecoder()
    for count, match in enumerate(re.finditer(r"\{", text)):
        if count >= MAX_SCAN_POSITIONS:
            break
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        found = as_result_object(value)
        if found is not None:
            return found
    return None
