"""The hippocampus: prompt, JSON schema, defensive parse and merge into session state.

Pure (docs/architecture.md): no I/O, no clock, no model calls. The engine calls the model
with ``build_messages(...)`` and ``HIPPOCAMPUS_SCHEMA``, parses the answer with
``parse_result`` (``HippocampusParseError`` → failure fallback), and folds it into the
session state with ``merge`` (``result=None`` is the failure fallback). The contracts
("full" and "compact") are described in docs/memory-formation.md.

Modules: ``state`` (types), ``prompt``, ``schema``, ``extract`` (finding the JSON object
in an answer), ``parse``, ``compact`` (the small models' contract), ``merge``, ``budget``.
"""

from __future__ import annotations

from backend.hippocampus.budget import (
    ITEM_OVERHEAD_TOKENS,
    MIN_TOKEN_BUDGET,
    enforce_budget,
    estimate_tokens,
    short_term_tokens,
    truncate_middle,
)
from backend.hippocampus.merge import fallback_state, merge
from backend.hippocampus.parse import HippocampusParseError, parse_result
from backend.hippocampus.prompt import build_messages
from backend.hippocampus.schema import HIPPOCAMPUS_SCHEMA, hippocampus_schema
from backend.hippocampus.state import (
    HippocampusResult,
    Role,
    SessionMemoryState,
    ShortTermItem,
)

__all__ = [
    "HIPPOCAMPUS_SCHEMA",
    "ITEM_OVERHEAD_TOKENS",
    "MIN_TOKEN_BUDGET",
    "HippocampusParseError",
    "HippocampusResult",
    "Role",
    "SessionMemoryState",
    "ShortTermItem",
    "build_messages",
    "enforce_budget",
    "estimate_tokens",
    "fallback_state",
    "hippocampus_schema",
    "merge",
    "parse_result",
    "short_term_tokens",
    "truncate_middle",
]
