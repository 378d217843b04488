"""Merge into session state, the failure fallback and the token budget over many turns."""

from __future__ import annotations

import json

import pytest

from backend.hippocampus import (
    HippocampusResult,
    SessionMemoryState,
    ShortTermItem,
    build_messages,
    estimate_tokens,
    fallback_state,
    merge,
    parse_result,
    short_term_tokens,
)
from backend.memory.types import Candidate, Emotion

PREVIOUS = SessionMemoryState(
    background="The user has a cat.",
    short_term=(
        ShortTermItem("note", "Talked about pets.", compressed=True),
        ShortTermItem("user", "My cat is called Miso."),
        ShortTermItem("assistant", "Miso is a lovely name!"),
    ),
    user_emotion=Emotion("happy", 0.6),
)


def test_merge_orders_old_to_new_and_marks_compressed_items() -> None:
    result = HippocampusResult(
        background="The user has a cat named Miso.",
        short_term=(
            ShortTermItem("note", "Pets; cat is Miso.", compressed=True),
            ShortTermItem("assistant", "Miso is a lovely name!", compressed=True),  # unchanged
        ),
        long_term=(Candidate("The user has a cat named Miso.", importance=0.7),),
        user_emotion=Emotion("proud", 0.5),
    )
    state = merge(PREVIOUS, result, "She is 3 years old.", "Still a young cat!", token_budget=500)
    assert state.background == "The user has a cat named Miso."
    assert state.short_term == (
        ShortTermItem("note", "Pets; cat is Miso.", compressed=True),
        ShortTermItem("assistant", "Miso is a lovely name!", compressed=False),
        ShortTermItem("user", "She is 3 years old.", compressed=False),
        ShortTermItem("assistant", "Still a young cat!", compressed=False),
    )
    assert state.user_emotion == Emotion("proud", 0.5)


def test_merge_keeps_previous_emotion_when_the_result_has_none() -> None:
    result = HippocampusResult(background="b", short_term=())
    state = merge(PREVIOUS, result, "u", "r", token_budget=500)
    assert state.user_emotion == PREVIOUS.user_emotion
    assert [i.text for i in state.short_term] == ["u", "r"]


def test_an_echo_of_the_new_message_is_not_duplicated() -> None:
    result = HippocampusResult(
        background="b", short_term=(ShortTermItem("user", "She is 3.", compressed=True),)
    )
    state = merge(PREVIOUS, result, " She is 3. ", "Young!", token_budget=500)
    assert [i.text for i in state.short_term] == [" She is 3. ", "Young!"]


def test_failure_fallback_keeps_previous_state_and_appends_the_turn() -> None:
    state = merge(PREVIOUS, None, "Are you there?", "Yes!", token_budget=500)
    assert state.background == PREVIOUS.background
    assert state.short_term == (
        *PREVIOUS.short_term,
        ShortTermItem("user", "Are you there?"),
        ShortTermItem("assistant", "Yes!"),
    )
    assert state.user_emotion == PREVIOUS.user_emotion
    assert fallback_state(PREVIOUS, "Are you there?", "Yes!", token_budget=500) == state


def test_empty_reply_adds_no_item() -> None:
    state = merge(PREVIOUS, None, "hello?", "", token_budget=500)
    assert state.short_term[-1] == ShortTermItem("user", "hello?")


def test_parsed_result_with_missing_short_term_keeps_flags() -> None:
    result = parse_result('{"background": "new"}', PREVIOUS)
    state = merge(PREVIOUS, result, "u", "r", token_budget=500)
    assert [i.compressed for i in state.short_term] == [True, False, False, False, False]


def _turn_text(i: int) -> tuple[str, str]:
    user = f"Turn {i}: today I did thing number {i} and it took a while to describe. " * 3
    return user, f"Reply {i}: that sounds like a lot, tell me more about thing {i}."


def test_200_failed_turns_keep_the_prompt_flat() -> None:
    budget = 300
    state = SessionMemoryState()
    prompt_sizes = []
    for i in range(200):
        user, reply = _turn_text(i)
        state = merge(state, None, user, reply, token_budget=budget)
        assert short_term_tokens(state.short_term) <= budget
        assert state.short_term[-2:] == (
            ShortTermItem("user", user),
            ShortTermItem("assistant", reply),
        )
        prompt = json.dumps(build_messages(state, "next"), ensure_ascii=False)
        prompt_sizes.append(estimate_tokens(prompt))
        state = SessionMemoryState.from_dict(json.loads(json.dumps(state.to_dict())))
    # Flat: after the budget fills up the prompt stops growing.
    assert max(prompt_sizes[50:]) - min(prompt_sizes[50:]) < 100
    assert max(prompt_sizes) < 3 * prompt_sizes[20]


def test_budget_with_chinese_text() -> None:
    budget = 120
    state = SessionMemoryState(background="用户有一只猫。")
    for i in range(50):
        user = f"第{i}天：我今天去公园散步，看到很多花，心情很好。"
        reply = "听起来很美好！你最喜欢哪种花？"
        state = merge(state, None, user, reply, token_budget=budget)
        assert short_term_tokens(state.short_term) <= budget
        assert state.short_term[-2].text == user
    # Each Chinese message costs about one token per character: few fit in 120 tokens.
    assert len(state.short_term) < 8


def test_newest_pair_alone_over_budget_is_cut_not_dropped() -> None:
    long_message = "我" * 500 + "END"
    state = merge(PREVIOUS, None, long_message, "好的。", token_budget=64)
    assert [i.role for i in state.short_term] == ["user", "assistant"]
    assert state.short_term[0].text.startswith("我") and state.short_term[0].text.endswith("END")
    assert "…" in state.short_term[0].text
    assert state.short_term[1].text == "好的。"
    assert short_term_tokens(state.short_term) <= 64


def test_bad_budget_is_a_configuration_error() -> None:
    with pytest.raises(ValueError):
        merge(PREVIOUS, None, "u", "r", token_budget=0)
