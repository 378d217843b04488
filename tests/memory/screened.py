"""A candidate through the save gate's screening, for the tests of its rules."""

from __future__ import annotations

from collections.abc import Sequence

from backend.memory.screening import Evidence, screen_one
from backend.memory.types import Candidate


def rejection(
    content: str, user_said: Sequence[str], category: str = "personal_fact"
) -> str | None:
    """Why screening rejects ``content`` given what the user said, or None if it passes."""
    candidate = Candidate(content=content, category=category, importance=0.8, confidence=0.9)
    return screen_one(candidate, Evidence(user=tuple(user_said))).rejected
