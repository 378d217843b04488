"""Defensive parsing of the hippocampus output (docs/memory-formation.md, "The hippocampus").

Failure policy, from the outside in:

- the JSON object is taken from a dict, or found in the text (``extract``: JSON, a
  fenced block, the first ``{`` to the last ``}``, the first position where an object
  decodes); ``HippocampusParseError`` is raised only when no object with at least one of
  the expected fields can be found (the caller then applies the failure fallback:
  ``merge(previous, None, ...)``);
- each field and each item is validated on its own (pydantic at this boundary): a bad
  long-term or short-term item is dropped with a reason in ``HippocampusResult.dropped``,
  never the whole result;
- numbers are clamped to [0, 1] (numeric strings and percentages accepted, ``null``
  means the default 0.5); unknown categories become ``general``; emotion labels are
  mapped to the closed vocabulary (``backend.memory.emotions``) or dropped; subject ``assistant``
  becomes ``persona``; keywords are lower-cased, deduplicated, at most 5;
- a missing or unusable ``background`` (or an empty one replacing a non-empty one) keeps
  the previous background; a missing or unusable ``short_term`` keeps the previous
  short-term items (the same as the failure fallback, which is the conservative reading
  of "an item may be dropped only when it was folded in"); an explicit empty list is
  the model's choice and is kept; emotion labels are lower-cased, empty ones are ``None``.

Pure: no I/O, no clock, no logging of message text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, field_validator

from backend.hippocampus.extract import as_result_object, extract_object
from backend.hippocampus.schema import (
    ABOUT_MAX_CHARS,
    KEYWORD_MAX_CHARS,
    KEYWORDS_MAX_ITEMS,
    LABEL_MAX_CHARS,
    PARSE_BACKGROUND_MAX_CHARS,
    PARSE_CONTENT_MAX_CHARS,
    PARSE_LONG_TERM_MAX_ITEMS,
    PARSE_SHORT_TERM_MAX_ITEMS,
    SUPERSEDES_MAX_CHARS,
)
from backend.hippocampus.state import HippocampusResult, Role, SessionMemoryState, ShortTermItem
from backend.memory.emotions import NO_FEELING_LABELS, canonical_emotion
from backend.memory.types import Candidate, Emotion, clamp01, normalise_subject

DEFAULT_SCORE = 0.5  # Candidate's default importance/confidence, and an emotion's intensity

_ROLE_SYNONYMS: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "companion": "assistant",
    "persona": "assistant",
}
_KEYWORD_SPLIT = re.compile(r"[,;，；、]")


class HippocampusParseError(ValueError):
    """No hippocampus JSON object could be found in the model's answer."""


# --- text and number coercion -------------------------------------------------------


def clean_text(value: str) -> str:
    """Strip, drop lone surrogates and control characters (newline and tab kept)."""
    value = value.encode("utf-8", "ignore").decode("utf-8")
    value = "".join(
        ch for ch in value if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cs")
    )
    return value.strip()


def _cut_middle(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = max_chars // 2
    return text[:head] + "…" + text[len(text) - (max_chars - head - 1) :]


def _to_text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return clean_text(value)


def _to_unit(value: Any) -> float:
    """A number in [0, 1] from a number, a numeric string or a percentage; null → 0.5."""
    if value is None:
        return DEFAULT_SCORE
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    if isinstance(value, int | float):
        try:
            return clamp01(float(value))
        except OverflowError:
            return 1.0 if value > 0 else 0.0
    if isinstance(value, str):
        text = value.strip()
        percent = text.endswith("%")
        try:
            number = float(text.rstrip("%").strip())
        except ValueError:
            raise ValueError("expected a number") from None
        return clamp01(number / 100 if percent else number)
    raise ValueError(f"expected a number, got {type(value).__name__}")


Text = Annotated[str, BeforeValidator(_to_text)]
Unit = Annotated[float, BeforeValidator(_to_unit)]


def _emotion(value: Any) -> tuple[Emotion | None, bool]:
    """(emotion, usable). ``None``/empty label → (None, True); junk → (None, False)."""
    if value is None:
        return None, True
    if isinstance(value, str):
        label, intensity = clean_text(value), DEFAULT_SCORE
    elif isinstance(value, Mapping):
        raw_label = value.get("label")
        if raw_label is None:
            return None, True
        if not isinstance(raw_label, str):
            return None, False
        label = clean_text(raw_label)
        try:
            intensity = _to_unit(value.get("intensity"))
        except ValueError:
            intensity = DEFAULT_SCORE
    else:
        return None, False
    if not label:
        return None, True
    # The closed vocabulary (backend.memory.emotions): mapped, or dropped as unusable.
    canonical = canonical_emotion(label[: 2 * LABEL_MAX_CHARS])
    if canonical is None:
        return None, label.casefold() in NO_FEELING_LABELS
    return Emotion(label=canonical, intensity=intensity), True


def _keywords(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raw: list[Any] = _KEYWORD_SPLIT.split(value)
    elif isinstance(value, list | tuple):
        raw = list(value)
    else:
        return ()
    seen: list[str] = []
    for item in raw:
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            continue
        word = clean_text(str(item)).lower()
        if word and len(word) <= KEYWORD_MAX_CHARS and word not in seen:
            seen.append(word)
        if len(seen) == KEYWORDS_MAX_ITEMS:
            break
    return tuple(seen)


# --- item models (pydantic at the boundary) -----------------------------------------


class _LongTermIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    content: Text
    category: Any = None
    importance: Unit = DEFAULT_SCORE
    confidence: Unit = DEFAULT_SCORE
    subject: Any = None
    about: Any = None
    keywords: Any = None
    emotion: Any = None
    supersedes: Any = None

    @field_validator("content")
    @classmethod
    def _content_bounds(cls, value: str) -> str:
        if not value:
            raise ValueError("empty content")
        if len(value) > PARSE_CONTENT_MAX_CHARS:
            raise ValueError(f"content longer than {PARSE_CONTENT_MAX_CHARS} characters")
        return value


class _ShortTermIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Any = None
    text: Text

    @field_validator("text")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("empty text")
        return value


def _reason(error: ValidationError) -> str:
    """A short reason without the offending input (it may be the user's words)."""
    parts = []
    for detail in error.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in detail["loc"]) or "item"
        parts.append(f"{where}: {detail['msg']}")
    return "; ".join(parts)


def _candidate(item: _LongTermIn) -> tuple[Candidate, list[str]]:
    notes: list[str] = []
    emotion, usable = _emotion(item.emotion)
    if not usable:
        notes.append("emotion unusable, ignored")
    supersedes: str | None = None
    if isinstance(item.supersedes, str | int) and not isinstance(item.supersedes, bool):
        supersedes = clean_text(str(item.supersedes))[:SUPERSEDES_MAX_CHARS] or None
    category = item.category if isinstance(item.category, str) else None
    subject = item.subject if isinstance(item.subject, str) else None
    candidate = Candidate(
        content=item.content,
        category=category or "general",  # normalised by Candidate: unknown → general
        importance=item.importance,
        confidence=item.confidence,
        subject=normalise_subject(subject),  # assistant → persona
        keywords=_keywords(item.keywords),
        emotion=emotion,
        supersedes=supersedes,
        named=_named(item.about),
    )
    return candidate, notes


def _named(value: Any) -> str | None:
    """The model's "about": a name or relation; None for the user, or anything else."""
    if not isinstance(value, str):
        return None
    text = clean_text(value)[:ABOUT_MAX_CHARS]
    return None if not text or text.casefold() in ("user", "the user") else text


def _long_term(value: Any, dropped: list[str]) -> tuple[Candidate, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        dropped.append("long_term: not a list, ignored")
        return ()
    out: list[Candidate] = []
    seen: set[str] = set()
    for index, raw in enumerate(value):
        where = f"long_term[{index}]"
        if len(out) == PARSE_LONG_TERM_MAX_ITEMS:
            dropped.append(f"{where}: over the limit of {PARSE_LONG_TERM_MAX_ITEMS} items")
            continue
        if not isinstance(raw, Mapping):
            dropped.append(f"{where}: not an object")
            continue
        try:
            item = _LongTermIn.model_validate(dict(raw))
        except ValidationError as error:
            dropped.append(f"{where}: {_reason(error)}")
            continue
        candidate, notes = _candidate(item)
        dropped.extend(f"{where}: {note}" for note in notes)
        key = candidate.content.casefold()
        if key in seen:
            dropped.append(f"{where}: duplicate content")
            continue
        seen.add(key)
        out.append(candidate)
    return tuple(out)


def _short_term(
    value: Any, previous: SessionMemoryState, dropped: list[str]
) -> tuple[ShortTermItem, ...]:
    if value is None or not isinstance(value, list):
        reason = "missing" if value is None else "not a list"
        dropped.append(f"short_term: {reason}, previous items kept")
        return previous.short_term
    items: list[ShortTermItem] = []
    for index, raw in enumerate(value):
        where = f"short_term[{index}]"
        if isinstance(raw, str):
            raw = {"role": "note", "text": raw}
        if not isinstance(raw, Mapping):
            dropped.append(f"{where}: not an object")
            continue
        try:
            item = _ShortTermIn.model_validate(dict(raw))
        except ValidationError as error:
            dropped.append(f"{where}: {_reason(error)}")
            continue
        role_text = item.role.strip().lower() if isinstance(item.role, str) else ""
        role = _ROLE_SYNONYMS.get(role_text, cast(Role, "note"))
        items.append(ShortTermItem(role=role, text=item.text, compressed=True))
    if value and not items:
        dropped.append("short_term: no usable item, previous items kept")
        return previous.short_term
    if len(items) > PARSE_SHORT_TERM_MAX_ITEMS:
        extra = len(items) - PARSE_SHORT_TERM_MAX_ITEMS
        dropped.append(f"short_term: {extra} oldest items over the limit dropped")
        items = items[extra:]
    return tuple(items)


def _background(value: Any, previous: SessionMemoryState, dropped: list[str]) -> str:
    if not isinstance(value, str):
        reason = "missing" if value is None else "not a string"
        dropped.append(f"background: {reason}, previous kept")
        return previous.background
    text = clean_text(value)
    if not text and previous.background:
        dropped.append("background: empty, previous kept")
        return previous.background
    if len(text) > PARSE_BACKGROUND_MAX_CHARS:
        dropped.append(f"background: cut to {PARSE_BACKGROUND_MAX_CHARS} characters")
        text = _cut_middle(text, PARSE_BACKGROUND_MAX_CHARS)
    return text


def parse_result(raw: str | Mapping[str, Any], previous: SessionMemoryState) -> HippocampusResult:
    """Validate a hippocampus answer (text or an already decoded dict) into a result.

    Raises ``HippocampusParseError`` only when no hippocampus object can be found (see
    the module docstring for everything that is repaired or dropped instead).
    """
    if isinstance(raw, str):
        data = extract_object(raw)
    elif isinstance(raw, Mapping):
        data = as_result_object(dict(raw))
    else:
        raise HippocampusParseError(f"expected text or a dict, got {type(raw).__name__}")
    if data is None:
        raise HippocampusParseError("no hippocampus JSON object found in the answer")
    dropped: list[str] = []
    background = _background(data.get("background"), previous, dropped)
    short_term = _short_term(data.get("short_term"), previous, dropped)
    long_term = _long_term(data.get("long_term"), dropped)
    user_emotion, usable = _emotion(data.get("user_emotion"))
    if not usable:
        dropped.append("user_emotion: unusable, ignored")
    return HippocampusResult(
        background=background,
        short_term=short_term,
        long_term=long_term,
        user_emotion=user_emotion,
        dropped=tuple(dropped),
    )
