"""Decay: hand-computed strengths, factors, floors, rounding, fading."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import pytest

from backend.memory.decay import (
    FADE_THRESHOLD,
    half_life_days,
    importance_factor,
    memory_strength,
    should_fade,
    strength,
    whole_days_since,
)
from tests.memory.helpers import NOW, memory


@pytest.mark.parametrize(
    ("category", "days"),
    [
        ("personal_fact", 180),
        ("preference", 90),
        ("relationship", 365),
        ("experience", 60),
        ("emotion", 30),
        ("interest", 45),
        ("work", 30),
        ("health", 60),
        ("general", 60),
        ("something_else", 60),
        (None, 60),
        ("Preference", 90),
    ],
)
def test_half_life_days(category: str | None, days: float) -> None:
    assert half_life_days(category) == days


@pytest.mark.parametrize(
    ("importance", "factor"),
    [
        (1.0, 0.5),
        (0.99, 0.7),
        (0.8, 0.7),
        (0.7999, 0.9),
        (0.6, 0.9),
        (0.5999, 1.1),
        (0.4, 1.1),
        (0.3999, 1.3),
        (0.2, 1.3),
        (0.1999, 1.0),
        (0.0, 1.0),
        (math.nan, 1.0),
    ],
)
def test_importance_factor_thresholds(importance: float, factor: float) -> None:
    assert importance_factor(importance) == factor


def test_hand_computed_strengths() -> None:
    # personal_fact: 180 / 1.1 = 163.64 days; 0.5 ** (30 / 163.64) = 0.88067 → 0.881
    assert (
        strength(importance=0.5, category="personal_fact", access_count=0, days_since_access=30)
        == 0.881
    )
    # emotion with two accesses: (30 + 10) / 1.3 = 30.77; 0.5 ** 3.25 = 0.10511 → 0.105
    assert (
        strength(importance=0.3, category="emotion", access_count=2, days_since_access=100) == 0.105
    )
    # relationship, importance 1: (365 + 15) / 0.5 = 760; 0.5 ** (365 / 760) = 0.71685 → 0.717
    assert (
        strength(importance=1.0, category="relationship", access_count=3, days_since_access=365)
        == 0.717
    )
    # no time passed: full strength
    assert strength(importance=0.0, category="work", access_count=0, days_since_access=0) == 1.0


def test_original_scales_strength() -> None:
    # 0.5 * 0.5 ** (60 / 60) = 0.25
    assert (
        strength(
            importance=0.1, category="health", access_count=0, days_since_access=60, original=0.5
        )
        == 0.25
    )


def test_floors() -> None:
    far = 10_000
    assert strength(importance=0.8, category="work", access_count=0, days_since_access=far) == 0.3
    assert strength(importance=1.0, category="work", access_count=0, days_since_access=far) == 0.3
    assert strength(importance=0.6, category="work", access_count=0, days_since_access=far) == 0.1
    assert (
        strength(importance=0.7999, category="work", access_count=0, days_since_access=far) == 0.1
    )
    assert (
        strength(importance=0.5999, category="work", access_count=0, days_since_access=far) == 0.0
    )
    # a floor never lowers a stronger memory
    assert (
        strength(importance=0.9, category="relationship", access_count=0, days_since_access=1) > 0.9
    )


def test_rounding_is_half_to_even() -> None:
    # 0.5 ** (240 / 60) = 0.0625 exactly: half-to-even gives 0.062 (half-up would give 0.063).
    assert (
        strength(importance=0.1, category="experience", access_count=0, days_since_access=240)
        == 0.062
    )
    # 1.25 * 0.5 ** 2 = 0.3125 exactly → 0.312.
    assert (
        strength(
            importance=0.1,
            category="experience",
            access_count=0,
            days_since_access=120,
            original=1.25,
        )
        == 0.312
    )


def test_negative_inputs_count_as_zero() -> None:
    assert strength(importance=0.1, category="work", access_count=-5, days_since_access=-3) == 1.0


def test_whole_days_are_floored() -> None:
    assert whole_days_since(NOW - timedelta(days=6, hours=23), NOW) == 6
    assert whole_days_since(NOW - timedelta(days=7), NOW) == 7
    assert whole_days_since(NOW + timedelta(days=2), NOW) == 0
    assert whole_days_since(NOW - timedelta(days=1), NOW.replace(tzinfo=None)) == 1


def test_memory_strength_uses_whole_days() -> None:
    # 239.96 days count as 239: 0.5 ** (239 / 60) = 0.0631 → 0.063, not 240's 0.062.
    item = memory("a", category="experience", importance=0.1, days_ago=240 - 1 / 24)
    assert memory_strength(item, NOW) == 0.063
    assert memory_strength(replace(item, access_count=0), NOW + timedelta(hours=1)) == 0.062


@pytest.mark.parametrize(
    ("days", "strength_value", "fades"),
    [
        (259, 0.05, False),  # 0.05018 → 0.05: not below the threshold
        (260, 0.05, False),  # 0.04961 → 0.05 after rounding: still not below
        (261, 0.049, True),  # 0.04904 → 0.049
    ],
)
def test_fade_threshold(days: int, strength_value: float, fades: bool) -> None:
    assert FADE_THRESHOLD == 0.05
    item = memory("a", category="general", importance=0.1, days_ago=days)
    assert memory_strength(item, NOW) == strength_value
    assert should_fade(item, NOW) is fades


def test_pinned_never_fades() -> None:
    item = replace(memory("a", importance=0.0, days_ago=5_000), pinned=True)
    assert memory_strength(item, NOW) == 0.0
    assert should_fade(item, NOW) is False
    assert should_fade(replace(item, pinned=False), NOW) is True


def test_important_memories_never_fade() -> None:
    for importance in (0.6, 0.8, 1.0):
        item = memory("a", category="work", importance=importance, days_ago=100_000)
        assert not should_fade(item, NOW)
