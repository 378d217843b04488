"""The JSON schema of the hippocampus output (docs/memory-formation.md, "The hippocampus").

Sent to providers with a JSON-schema mode; the embedded llama.cpp model compiles it to a
grammar. Every string has ``maxLength`` and every array ``maxItems`` so that a small
grammar-constrained model (SmolLM2-135M) must terminate instead of looping forever
inside a string. llama.cpp does NOT enforce ``minimum``/``maximum`` on numbers: they are
documentation here, the parser clamps.

``emotion`` and ``supersedes`` of a long-term item are optional properties rather than
nullable ones: the grammar compiler handles optional properties everywhere, ``null``
unions less reliably.

The parser is more lenient than the schema (``PARSE_*`` limits, twice the schema's): a
model without constrained decoding that overshoots a little loses nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from backend.hippocampus.state import ROLES
from backend.memory.types import CATEGORIES

# Length bounds (characters, not tokens). The background is the rolling summary that
# must stay about the same size; items and memories are one or two sentences.
BACKGROUND_MAX_CHARS = 1200
ITEM_MAX_CHARS = 400
CONTENT_MAX_CHARS = 300
KEYWORD_MAX_CHARS = 40
LABEL_MAX_CHARS = 24  # emotion labels, categories, subjects, roles
SUPERSEDES_MAX_CHARS = 300
ABOUT_MAX_CHARS = 60  # a name, as the user said it
SHORT_TERM_MAX_ITEMS = 16
LONG_TERM_MAX_ITEMS = 6
KEYWORDS_MAX_ITEMS = 5

# What the parser accepts from a model that ignored the schema.
PARSE_BACKGROUND_MAX_CHARS = 2 * BACKGROUND_MAX_CHARS
PARSE_CONTENT_MAX_CHARS = 2 * CONTENT_MAX_CHARS
PARSE_SHORT_TERM_MAX_ITEMS = 2 * SHORT_TERM_MAX_ITEMS
PARSE_LONG_TERM_MAX_ITEMS = 2 * LONG_TERM_MAX_ITEMS

SUBJECTS: tuple[str, ...] = ("user", "persona")


def _string(max_length: int, *, min_length: int = 0) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "maxLength": max_length}
    if min_length:
        schema["minLength"] = min_length
    return schema


def _enum(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values), "maxLength": LABEL_MAX_CHARS}


def _unit_number() -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "maximum": 1}


def _emotion() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"label": _string(LABEL_MAX_CHARS), "intensity": _unit_number()},
        "required": ["label", "intensity"],
        "additionalProperties": False,
    }


HIPPOCAMPUS_SCHEMA: dict[str, Any] = {
    "title": "HippocampusOutput",
    "type": "object",
    "properties": {
        "background": _string(BACKGROUND_MAX_CHARS),
        "short_term": {
            "type": "array",
            "maxItems": SHORT_TERM_MAX_ITEMS,
            "items": {
                "type": "object",
                "properties": {
                    "role": _enum(ROLES),
                    "text": _string(ITEM_MAX_CHARS, min_length=1),
                },
                "required": ["role", "text"],
                "additionalProperties": False,
            },
        },
        "long_term": {
            "type": "array",
            "maxItems": LONG_TERM_MAX_ITEMS,
            "items": {
                "type": "object",
                "properties": {
                    "content": _string(CONTENT_MAX_CHARS, min_length=1),
                    "category": _enum(CATEGORIES),
                    "importance": _unit_number(),
                    "confidence": _unit_number(),
                    "subject": _enum(SUBJECTS),
                    "about": _string(ABOUT_MAX_CHARS),
                    "keywords": {
                        "type": "array",
                        "maxItems": KEYWORDS_MAX_ITEMS,
                        "items": _string(KEYWORD_MAX_CHARS),
                    },
                    "emotion": _emotion(),
                    "supersedes": _string(SUPERSEDES_MAX_CHARS),
                },
                "required": [
                    "content",
                    "category",
                    "importance",
                    "confidence",
                    "subject",
                    "keywords",
                ],
                "additionalProperties": False,
            },
        },
        "user_emotion": _emotion(),
    },
    "required": ["background", "short_term", "long_term", "user_emotion"],
    "additionalProperties": False,
}
"""The output schema. Shared: do not mutate it; ``hippocampus_schema()`` gives a copy."""


def hippocampus_schema() -> dict[str, Any]:
    """A deep copy of ``HIPPOCAMPUS_SCHEMA`` that the caller may adapt to a provider."""
    return copy.deepcopy(HIPPOCAMPUS_SCHEMA)
