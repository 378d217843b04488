"""Decay: the forgetting curve, its floors and the fade threshold (docs/memory-model.md, "Decay").

```
half_life   = HALF_LIFE_DAYS.get(category, 60)                       # days
factor      = first of (1.0→0.5, 0.8→0.7, 0.6→0.9, 0.4→1.1, 0.2→1.3) whose threshold
              <= importance; 1.0 below 0.2
effective   = (half_life + 5*access_count) / factor
strength    = original * 0.5 ** (days_since_access / effective)
floors      : importance >= 0.8 → at least 0.3; importance >= 0.6 → at least 0.1
result      = round(strength, 3)                                     # half-to-even
```

Every number is limbic's, as the spec quotes it. The decay pass (scheduled by the app)
uses ``original = 1`` and WHOLE days since the last access: the floor of the elapsed
days, so 6 days 23 hours count as 6. A memory below :data:`FADE_THRESHOLD` fades unless
the user pinned it.

Failure policy: pure arithmetic that never raises on data — a negative ``days`` or
``access_count`` (a clock skew, a bad row) counts as 0, an unknown category decays as
``general`` (60 days). Naive datetimes are taken as UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from backend.memory.scoring import to_utc
from backend.memory.types import Memory, normalise_category

__all__ = [
    "DEFAULT_HALF_LIFE_DAYS",
    "FADE_THRESHOLD",
    "HALF_LIFE_DAYS",
    "IMPORTANCE_FACTORS",
    "half_life_days",
    "importance_factor",
    "memory_strength",
    "should_fade",
    "strength",
    "whole_days_since",
]

# Half-life in days per category (docs/memory-model.md, "Decay"; limbic's table).
HALF_LIFE_DAYS: Mapping[str, float] = {
    "personal_fact": 180.0,
    "preference": 90.0,
    "relationship": 365.0,
    "experience": 60.0,
    "emotion": 30.0,
    "interest": 45.0,
    "work": 30.0,
    "health": 60.0,
}
# Any other category, ``general`` included (spec: ``.get(category, 60)``).
DEFAULT_HALF_LIFE_DAYS = 60.0

# (threshold, factor): the first whose threshold <= importance wins; the effective
# half-life is divided by the factor, so important memories decay slower (spec, limbic).
IMPORTANCE_FACTORS: tuple[tuple[float, float], ...] = (
    (1.0, 0.5),
    (0.8, 0.7),
    (0.6, 0.9),
    (0.4, 1.1),
    (0.2, 1.3),
)
# The factor below the lowest threshold (importance < 0.2) (spec, limbic).
DEFAULT_IMPORTANCE_FACTOR = 1.0

# Each access lengthens the half-life by 5 days (spec: ``half_life + 5*access_count``).
ACCESS_BONUS_DAYS = 5.0

# (importance threshold, minimum strength), checked in order (spec "floors", limbic):
# important memories never decay below these.
STRENGTH_FLOORS: tuple[tuple[float, float], ...] = ((0.8, 0.3), (0.6, 0.1))

# Strength is rounded to 3 decimals with Python's round (half-to-even) (spec, limbic).
STRENGTH_DECIMALS = 3

# A memory whose strength falls below this fades from retrieval (spec, limbic).
FADE_THRESHOLD = 0.05


def half_life_days(category: str | None) -> float:
    """The category's half-life in days; unknown categories (``general``) get 60."""
    return HALF_LIFE_DAYS.get(normalise_category(category), DEFAULT_HALF_LIFE_DAYS)


def importance_factor(importance: float) -> float:
    """The first factor whose threshold <= ``importance``; 1.0 below 0.2 (and for NaN)."""
    for threshold, factor in IMPORTANCE_FACTORS:
        if importance >= threshold:
            return factor
    return DEFAULT_IMPORTANCE_FACTOR


def strength(
    *,
    importance: float,
    category: str | None,
    access_count: int,
    days_since_access: float,
    original: float = 1.0,
) -> float:
    """Memory strength after ``days_since_access`` days, rounded half-to-even to 3 decimals.

    ``effective = (half_life + 5*access_count) / factor``;
    ``strength = original * 0.5 ** (days / effective)``, then the importance floors.
    Negative ``days_since_access`` or ``access_count`` count as 0.
    """
    effective = (half_life_days(category) + ACCESS_BONUS_DAYS * max(0, access_count)) / (
        importance_factor(importance)
    )
    value = original * 0.5 ** (max(0.0, days_since_access) / effective)
    for threshold, floor in STRENGTH_FLOORS:
        if importance >= threshold:
            value = max(value, floor)
            break
    return round(value, STRENGTH_DECIMALS)


def whole_days_since(last_accessed: datetime, now: datetime) -> int:
    """Whole days from ``last_accessed`` to ``now`` (floor; a future time gives 0)."""
    # timedelta.days is already the floor of the elapsed days (exact, no float rounding).
    return max(0, (to_utc(now) - to_utc(last_accessed)).days)


def memory_strength(memory: Memory, now: datetime) -> float:
    """The decay pass's strength of ``memory``: ``original = 1``, whole days since access."""
    return strength(
        importance=memory.importance,
        category=memory.category,
        access_count=memory.access_count,
        days_since_access=whole_days_since(memory.last_accessed, now),
        original=1.0,
    )


def should_fade(memory: Memory, now: datetime) -> bool:
    """Whether the decay pass fades ``memory``: strength below 0.05 and not pinned."""
    return not memory.pinned and memory_strength(memory, now) < FADE_THRESHOLD
