"""What to leave out of a chat request that a server turned down: reading its complaint.

Servers differ in what they take: llama-cpp-python's server knows ``response_format``
only as ``text`` or ``json_object`` and answers 500 for ``json_schema``; some reject
``stream_options`` or a sampling field they do not know (``top_k``, ``min_p``, ``seed``,
``logit_bias``). ``step_down`` reads an error's message for the part it blames and gives
the next, smaller request: one step at a time, so that a request keeps everything the
server does take. Pure: ``backend.llm.openai_compat`` sends, retries and remembers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

JsonMode = Literal["json_schema", "json_object_with_schema", "json_object", "prompt"]
# How a JSON schema is asked for, and the next way down when a server refuses it:
# OpenAI's structured outputs; JSON mode with the schema beside it (llama-cpp-python's
# server turns ``{"type": "json_object", "schema": ...}`` into a grammar, and has no
# ``json_schema`` type); plain JSON mode; the schema in the prompt only.
DOWNGRADE: dict[JsonMode, JsonMode] = {
    "json_schema": "json_object_with_schema",
    "json_object_with_schema": "json_object",
    "json_object": "prompt",
}

# Statuses that may carry a complaint about the request: 400 and 422 by the book, 500
# from servers whose validation errors escape as server errors (llama-cpp-python's).
COMPLAINT_STATUSES = (400, 422, 500)
# The statuses that are about the request whatever their message says.
_CLIENT_ERRORS = (400, 422)


@dataclass(frozen=True)
class Offer:
    """What one request carries of the optional parts."""

    json_mode: JsonMode | None  # None: the call asks for no JSON
    include_usage: bool
    sampling: frozenset[str] = frozenset()  # the optional sampling fields it sends
    dropped: frozenset[str] = field(default=frozenset())  # sampling fields left out

    def change_from(self, earlier: Offer) -> str:
        """The step from ``earlier`` to this offer, in words (for the log)."""
        if self.dropped != earlier.dropped:
            return "no " + ", ".join(sorted(self.dropped - earlier.dropped))
        if self.include_usage != earlier.include_usage:
            return "no stream_options"
        return f"JSON as {self.json_mode}"


def _named(name: str, complaint: str) -> bool:
    return re.search(rf"(?<![a-z0-9_]){re.escape(name)}(?![a-z0-9_])", complaint) is not None


def step_down(offer: Offer, message: str, status: int, *, usage_known: bool) -> Offer | None:
    """The next request after ``offer`` was answered ``status`` with ``message``, or
    ``None`` when there is nothing left to try (the error stands).

    In order: sampling fields the message names are dropped; ``stream_options`` when it
    is named; the JSON mode one step down when ``response_format`` or JSON is named. A
    400 or 422 that names nothing also steps down: ``stream_options`` first while it is
    not known to work (``usage_known``), then the JSON mode. A 500 that names nothing is
    the server failing, not a complaint: ``None``.
    """
    if status not in COMPLAINT_STATUSES:
        return None
    complaint = message.lower()
    sent = offer.sampling - offer.dropped
    blamed = frozenset(name for name in sent if _named(name, complaint))
    if blamed:
        return replace(offer, dropped=offer.dropped | blamed)
    can_downgrade = offer.json_mode in DOWNGRADE
    if offer.include_usage and "stream_options" in complaint:
        return replace(offer, include_usage=False)
    if can_downgrade and ("response_format" in complaint or "json" in complaint):
        return replace(offer, json_mode=DOWNGRADE[offer.json_mode])  # type: ignore[index]
    if status not in _CLIENT_ERRORS:
        return None
    if offer.include_usage and not usage_known:
        return replace(offer, include_usage=False)
    if can_downgrade:
        return replace(offer, json_mode=DOWNGRADE[offer.json_mode])  # type: ignore[index]
    return None
