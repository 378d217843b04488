"""Session state types: JSON round trip and tolerant loading."""

from __future__ import annotations

import json

import pytest

from backend.hippocampus import SessionMemoryState, ShortTermItem
from backend.memory.types import Emotion


def test_state_round_trips_through_json() -> None:
    state = SessionMemoryState(
        background="The user is learning Japanese. 用户在学日语。",
        short_term=(
            ShortTermItem("note", "Earlier: talked about Osaka", compressed=True),
            ShortTermItem("user", "I booked the flight!"),
            ShortTermItem("assistant", "Great news."),
        ),
        user_emotion=Emotion("Excited", 0.8),
    )
    text = json.dumps(state.to_dict(), ensure_ascii=False)
    assert SessionMemoryState.from_dict(json.loads(text)) == state


def test_empty_state_round_trips() -> None:
    assert SessionMemoryState.from_dict(SessionMemoryState().to_dict()) == SessionMemoryState()
    assert SessionMemoryState.from_dict(None) == SessionMemoryState()


def test_from_dict_skips_damaged_items_and_defaults_missing_keys() -> None:
    state = SessionMemoryState.from_dict(
        {
            "short_term": [
                {"role": "user", "text": "kept"},
                {"role": "robot", "text": "unknown role"},
                {"role": "assistant", "text": 3},
                "not an object",
            ],
            "user_emotion": {"label": "", "intensity": 0.4},
        }
    )
    assert state.background == ""
    assert state.short_term == (ShortTermItem("user", "kept", compressed=False),)
    assert state.user_emotion is None


def test_short_term_item_from_dict_is_strict() -> None:
    with pytest.raises(ValueError):
        ShortTermItem.from_dict({"role": "system", "text": "x"})
