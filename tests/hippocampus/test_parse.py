"""Defensive parsing: find the object, validate per item, never fail the whole result."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.hippocampus import (
    HippocampusParseError,
    SessionMemoryState,
    ShortTermItem,
    parse_result,
)
from backend.hippocampus.schema import hippocampus_schema
from backend.memory.types import Emotion

PREVIOUS = SessionMemoryState(
    background="The user has a cat named Miso.",
    short_term=(
        ShortTermItem("user", "My cat knocked over a plant."),
        ShortTermItem("assistant", "Oh no, is Miso okay?"),
    ),
    user_emotion=Emotion("amused", 0.4),
)

GOOD: dict[str, Any] = {
    "background": "The user has a cat named Miso who is clumsy.",
    "short_term": [{"role": "user", "text": "Cat knocked over a plant."}],
    "long_term": [
        {
            "content": "The user has a cat named Miso.",
            "category": "personal_fact",
            "importance": 0.7,
            "confidence": 0.9,
            "subject": "user",
            "keywords": ["cat", "miso"],
        }
    ],
    "user_emotion": {"label": "Amused", "intensity": 0.5},
}
GOOD_TEXT = json.dumps(GOOD)


def _check_good(raw: str | dict[str, Any]) -> None:
    result = parse_result(raw, PREVIOUS)
    assert result.background == GOOD["background"]
    assert result.short_term == (ShortTermItem("user", "Cat knocked over a plant.", True),)
    assert [c.content for c in result.long_term] == ["The user has a cat named Miso."]
    assert result.user_emotion == Emotion("joy", 0.5)  # mapped to the closed vocabulary
    assert result.dropped == ()


def test_parses_a_dict() -> None:
    _check_good(GOOD)


def test_parses_plain_json_text() -> None:
    _check_good("  " + GOOD_TEXT + "\n")


def test_parses_a_fenced_block() -> None:
    _check_good(f"Here is the memory update:\n```json\n{GOOD_TEXT}\n```\nDone.")
    _check_good(f"```\n{GOOD_TEXT}\n```")


def test_parses_json_inside_prose() -> None:
    _check_good(f"Sure! {GOOD_TEXT} Hope that helps.")


def test_parses_the_first_object_when_prose_has_more_braces() -> None:
    _check_good(f"Output: {GOOD_TEXT}\nNote: use {{curly}} braces carefully }}")


def test_unwraps_one_level_and_lists() -> None:
    _check_good({"result": GOOD})
    _check_good(json.dumps([GOOD]))


@pytest.mark.parametrize(
    "raw",
    ["", "no json here at all", "{not json}", "[1, 2, 3]", '{"foo": 1}', "```\n```", "}{"],
)
def test_garbage_raises_parse_error(raw: str) -> None:
    with pytest.raises(HippocampusParseError):
        parse_result(raw, PREVIOUS)


def test_non_text_input_raises_parse_error() -> None:
    with pytest.raises(HippocampusParseError):
        parse_result(42, PREVIOUS)  # type: ignore[arg-type]


def test_bad_long_term_items_are_dropped_one_by_one_with_reasons() -> None:
    good = GOOD["long_term"][0]
    raw = dict(
        GOOD,
        long_term=[
            good,
            {"category": "preference", "importance": 0.9},  # no content
            {"content": "   ", "importance": 0.9},  # empty text
            {"content": 42},  # wrong type
            {"content": "The user likes tea.", "importance": "very"},  # not a number
            "The user is 30.",  # not an object
            {"content": "The user likes green tea.", "importance": 0.6, "confidence": 0.8},
        ],
    )
    result = parse_result(raw, PREVIOUS)
    assert [c.content for c in result.long_term] == [
        "The user has a cat named Miso.",
        "The user likes green tea.",
    ]
    assert len(result.dropped) == 5
    assert result.dropped[0].startswith("long_term[1]: content")
    assert "empty content" in result.dropped[1]
    assert "expected a string" in result.dropped[2]
    assert result.dropped[3].startswith("long_term[4]: importance")
    assert result.dropped[4] == "long_term[5]: not an object"
    assert "very" not in " ".join(result.dropped)  # reasons never quote the input


def test_numbers_are_clamped_and_numeric_strings_accepted() -> None:
    raw = dict(
        GOOD,
        long_term=[
            {"content": "A", "importance": 7, "confidence": -2},
            {"content": "B", "importance": "0.8", "confidence": " 0.65 "},
            {"content": "C", "importance": "80%", "confidence": None},
            {"content": "D", "importance": 10**400, "confidence": float("nan")},
            {"content": "E", "emotion": {"label": "Joy", "intensity": "1.5"}},
        ],
        user_emotion={"label": "SAD", "intensity": -1},
    )
    result = parse_result(raw, PREVIOUS)
    scores = [(c.importance, c.confidence) for c in result.long_term]
    assert scores == [(1.0, 0.0), (0.8, 0.65), (0.8, 0.5), (1.0, 0.0), (0.5, 0.5)]
    assert result.long_term[4].emotion == Emotion("joy", 1.0)
    assert result.user_emotion == Emotion("sadness", 0.0)


def test_categories_subjects_and_keywords_are_normalised() -> None:
    raw = dict(
        GOOD,
        long_term=[
            {
                "content": "The companion loves rainy days.",
                "category": "Hobby",
                "subject": "assistant",
                "keywords": ["Rain", "rain", " Days ", "", 7, "x" * 41, "a", "b", "c", "d"],
            },
            {"content": "用户喜欢咖啡。", "category": "PREFERENCE", "keywords": "咖啡, 饮料、早晨"},
            {"content": "The user is tall.", "category": None, "subject": 3, "keywords": {}},
        ],
    )
    first, second, third = parse_result(raw, PREVIOUS).long_term
    assert (first.category, first.subject) == ("general", "persona")
    assert first.keywords == ("rain", "days", "7", "a", "b")
    assert (second.category, second.keywords) == ("preference", ("咖啡", "饮料", "早晨"))
    assert (third.category, third.subject, third.keywords) == ("general", "user", ())


def test_the_subject_the_model_names_is_kept_for_the_gate_to_check() -> None:
    base = {"category": "relationship", "subject": "user", "keywords": []}
    raw = dict(
        GOOD,
        long_term=[
            {"content": "She moved to Osaka.", "about": " Mei ", **base},
            {"content": "The user is tall.", "about": "the user", **base},
            {"content": "The user likes tea.", "about": ["Mei"], **base},
        ],
    )
    first, second, third = parse_result(raw, PREVIOUS).long_term
    assert (first.named, second.named, third.named) == ("Mei", None, None)
    assert "about" in hippocampus_schema()["properties"]["long_term"]["items"]["properties"]


def test_missing_fields_use_the_previous_state() -> None:
    result = parse_result({"long_term": []}, PREVIOUS)
    assert result.background == PREVIOUS.background
    assert result.short_term == PREVIOUS.short_term
    assert result.long_term == ()
    assert result.user_emotion is None  # merge keeps the previous emotion
    assert "background: missing, previous kept" in result.dropped
    assert "short_term: missing, previous items kept" in result.dropped


def test_invalid_fields_use_the_previous_state() -> None:
    raw = {"background": "", "short_term": "oops", "long_term": {}, "user_emotion": 5}
    result = parse_result(raw, PREVIOUS)
    assert result.background == PREVIOUS.background
    assert result.short_term == PREVIOUS.short_term
    assert len(result.dropped) == 4


def test_explicit_empty_short_term_is_respected() -> None:
    assert parse_result(dict(GOOD, short_term=[]), PREVIOUS).short_term == ()


def test_short_term_items_are_validated_one_by_one() -> None:
    raw = dict(
        GOOD,
        short_term=[
            {"role": "Human", "text": " hi "},
            {"role": "AI", "text": "hello"},
            {"role": "summary", "text": "context"},
            {"role": "user"},
            {"role": "user", "text": ""},
            "a bare string becomes a note",
            17,
        ],
    )
    result = parse_result(raw, PREVIOUS)
    assert [(i.role, i.text) for i in result.short_term] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("note", "context"),
        ("note", "a bare string becomes a note"),
    ]
    assert len(result.dropped) == 3


def test_emotion_label_empty_is_none_and_string_is_accepted() -> None:
    assert parse_result(dict(GOOD, user_emotion={"label": " "}), PREVIOUS).user_emotion is None
    assert parse_result(dict(GOOD, user_emotion=None), PREVIOUS).user_emotion is None
    assert parse_result(dict(GOOD, user_emotion="Tired"), PREVIOUS).user_emotion == Emotion(
        "tiredness", 0.5
    )


def test_oversized_output_is_bounded() -> None:
    raw = dict(
        GOOD,
        background="b" * 10_000,
        long_term=[{"content": f"The user fact {i}."} for i in range(40)]
        + [{"content": "x" * 5000}],
    )
    result = parse_result(raw, PREVIOUS)
    assert len(result.background) <= 2400
    assert len(result.long_term) == 12


def test_lone_surrogates_and_control_characters_are_removed() -> None:
    result = parse_result('{"background": "caf\\u00e9\\u0000 \\ud800ok"}', PREVIOUS)
    assert result.background == "café ok"
    result.background.encode("utf-8")


# --- junk never raises anything but HippocampusParseError ----------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.sampled_from(["user", "assistant", "persona", "0.7", "joy", "", "general"]),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(
                [
                    "background",
                    "short_term",
                    "long_term",
                    "user_emotion",
                    "content",
                    "role",
                    "text",
                    "label",
                    "intensity",
                    "importance",
                    "confidence",
                    "category",
                    "subject",
                    "keywords",
                    "emotion",
                    "supersedes",
                    "x",
                ]
            ),
            children,
            max_size=6,
        )
    ),
    max_leaves=30,
)


def _survives(raw: Any) -> None:
    try:
        result = parse_result(raw, PREVIOUS)
    except HippocampusParseError:
        return
    json.dumps([c.content for c in result.long_term])
    assert isinstance(result.background, str)


@settings(max_examples=300)
@given(_json_values)
def test_random_json_values_never_crash(value: Any) -> None:
    _survives(value if isinstance(value, dict) else json.dumps(value))
    _survives(json.dumps(value))


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list('{}[]":,`\\ abc0.9-\nejson')), max_size=80))
def test_random_jsonish_text_never_crashes(text: str) -> None:
    _survives(text)
    _survives("```json\n" + text + "\n```")


@given(st.text(max_size=200), _json_values, st.text(max_size=50))
def test_json_wrapped_in_junk_never_crashes(prefix: str, value: Any, suffix: str) -> None:
    _survives(prefix + json.dumps(value) + suffix)


def test_deep_nesting_is_not_a_crash() -> None:
    with pytest.raises(HippocampusParseError):
        parse_result("[" * 100_000 + "]" * 100_000, PREVIOUS)
    _survives("{" * 5000 + '"background": "x"' + "}" * 5000)


def test_emotion_labels_outside_the_vocabulary_are_mapped_or_dropped() -> None:
    made_up = parse_result(dict(GOOD, user_emotion="happy-smile,confidence:1"), PREVIOUS)
    assert made_up.user_emotion == Emotion("joy", 0.5)
    junk = parse_result(dict(GOOD, user_emotion={"label": "zorblax", "intensity": 1}), PREVIOUS)
    assert junk.user_emotion is None and "user_emotion: unusable, ignored" in junk.dropped
    neutral = parse_result(dict(GOOD, user_emotion="neutral"), PREVIOUS)
    assert neutral.user_emotion is None and not neutral.dropped
