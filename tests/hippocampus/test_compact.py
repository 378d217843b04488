"""The compact hippocampus contract: its prompt, its parse and the rolling background."""

from __future__ import annotations

import json
import re

import pytest

from backend.hippocampus import HippocampusParseError, SessionMemoryState, ShortTermItem, merge
from backend.hippocampus.compact import (
    COMPACT_SCHEMA,
    COMPACT_SYSTEM,
    MAX_FACTS,
    build_compact_messages,
    compact_schema,
    fact_openers,
    in_chinese,
    parse_compact,
    roll_background,
    run_openers,
)
from backend.hippocampus.schema import BACKGROUND_MAX_CHARS

STATE = SessionMemoryState(
    background="The user's hamster is called Tudou.",
    short_term=(
        ShortTermItem("user", "my sister is getting married"),
        ShortTermItem("assistant", "Congratulations to her! When?"),
    ),
)


def test_the_stable_prefix_comes_first_and_only_the_last_message_varies() -> None:
    one = build_compact_messages(STATE, "in October, in Chengdu")
    two = build_compact_messages(STATE, "and I'm lactose intolerant")
    assert one[0] == {"role": "system", "content": COMPACT_SYSTEM}
    assert one[:-1] == two[:-1]  # rules and worked examples: llama.cpp reuses their KV cache
    last = one[-1]["content"]
    assert last == "NEW MESSAGE:\nin October, in Chengdu"  # no earlier turn: see the module


def test_missed_messages_are_read_with_the_new_one() -> None:
    state = SessionMemoryState(missed=(ShortTermItem("user", "I moved to Hangzhou"),))
    content = build_compact_messages(state, "and I got a cat")[-1]["content"]
    assert "NEW MESSAGES (oldest first):\n- I moved to Hangzhou\n- and I got a cat" in content


def test_parse_gives_user_candidates_and_a_closed_emotion() -> None:
    answer = {
        "facts": [
            {
                "fact": "The user's sister marries in October.",
                "category": "relationship",
                "importance": 0.9,
            },
            {
                "fact": "The user's sister marries in October.",
                "category": "relationship",
                "importance": 0.9,
            },
            {"fact": "", "category": "general", "importance": 0.5},
        ],
        "emotion": "happy-ish",
    }
    result = parse_compact(json.dumps(answer), STATE)
    assert [c.content for c in result.long_term] == ["The user's sister marries in October."]
    candidate = result.long_term[0]
    assert (candidate.subject, candidate.category, candidate.confidence) == (
        "user",
        "relationship",
        0.9,
    )
    assert "october" in candidate.keywords
    assert result.user_emotion is not None and result.user_emotion.label == "joy"
    assert result.short_term == STATE.short_term and result.background == STATE.background
    assert result.dropped == ("facts[2]: unusable, ignored",)


def test_parse_finds_the_object_in_prose_and_refuses_garbage() -> None:
    text = 'Sure! {"x": 1} Here: {"facts": [], "emotion": "neutral"} done'
    result = parse_compact(text, STATE)
    assert result.long_term == () and result.user_emotion is None
    with pytest.raises(HippocampusParseError):
        parse_compact("I cannot help with that.", STATE)


def test_schema_bounds_the_answer() -> None:
    facts = COMPACT_SCHEMA["properties"]["facts"]
    assert facts["maxItems"] == MAX_FACTS
    assert facts["items"]["maxLength"] <= 300
    # A catch-up run reads several messages: room for their facts, still bounded.
    assert compact_schema(2)["properties"]["facts"]["maxItems"] == 2 * MAX_FACTS
    assert compact_schema(50)["properties"]["facts"]["maxItems"] == 3 * MAX_FACTS


def test_a_fact_opens_with_the_user_or_a_name_of_the_users_words() -> None:
    said = [
        "my sister Anjali is expecting her first baby in March, and Pixel, our pug, snores",
        "Also the university email me. They need 6.5",
        "I like Xiamen beach, I grow up there. He is very beautiful in summer",
        "我的仓鼠叫土豆",
        "I met Tom at the gym",
    ]
    openers = fact_openers(said)
    assert openers[:2] == ("The user", "用户")
    assert set(openers) == {
        "The user", "用户", "The user's sister Anjali", "Anjali", "The user's pug Pixel",
        "Pixel", "The university", "Xiamen", "土豆", "Tom", "The gym",
    }  # fmt: skip
    pattern = re.compile(compact_schema(1, openers)["properties"]["facts"]["items"]["pattern"])
    for fact in (
        "The user's sister Anjali is expecting her first baby in March.",
        "Pixel snores.",
        "The university needs 6.5 overall.",
        "Xiamen is very beautiful in summer.",
        "用户的仓鼠叫土豆。",
        "Tom works at the gym.",
    ):
        assert pattern.match(fact), fact
    for fact in (
        "He is very beautiful in summer.",  # a pronoun names no one once the message is gone
        "They need 6.5 overall.",
        "March is when the baby is due.",  # a month is no one
        'The user said "hi".',  # a quote would break the JSON under a grammar
    ):
        assert not pattern.match(fact), fact
    # Without openers, any sentence (the scripted and remote runs that pass none).
    assert "pattern" not in COMPACT_SCHEMA["properties"]["facts"]["items"]
    # The rules say so only when the grammar does (the default prompt is as measured).
    named = build_compact_messages(STATE, "hi", named_subjects=True)[0]["content"]
    assert "the name of the person" in named and "the name of the person" not in COMPACT_SYSTEM


def test_a_run_may_name_whom_the_recent_turns_named() -> None:
    openers = run_openers(STATE, "he is so excited about it")
    assert "The user's sister" in openers  # "my sister is getting married", a turn before


def test_the_opening_grammar_compiles_for_llama_cpp() -> None:
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    schema = compact_schema(1, fact_openers(["my sister Anjali lives in Leeds", "我的仓鼠叫土豆"]))
    compiled = grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    item = next(r for r in compiled._grammar.splitlines() if r.startswith("facts-item"))
    assert all(part in item for part in ('"Anjal"', '"Leed"', '"用" "户"', '"土" "豆"'))


def test_background_rolls_forward_once_per_fact_and_stays_bounded() -> None:
    background = roll_background("A.", ["B.", "a.", "C."])
    assert background == "A.\nB.\nC."
    long = roll_background("", [f"fact number {i} " + "x" * 80 for i in range(40)])
    assert len(long) <= BACKGROUND_MAX_CHARS
    assert long.endswith("fact number 39 " + "x" * 80)


def test_a_failed_compact_run_leaves_the_message_for_the_next_one() -> None:
    after = merge(
        STATE, None, "I'm allergic to shellfish", "Noted!", token_budget=1500, catch_up="message"
    )
    assert [item.text for item in after.missed] == ["I'm allergic to shellfish"]
    # The next working run reads it (build_compact_messages) and its merge clears it.
    assert "- I'm allergic to shellfish" in build_compact_messages(after, "hi")[-1]["content"]
    result = parse_compact('{"facts": [], "emotion": "calm"}', after)
    assert merge(after, result, "hi", "hello", token_budget=1500, catch_up="message").missed == ()


def test_a_run_of_chinese_messages_asks_for_chinese_facts() -> None:
    assert in_chinese(["我养了一只仓鼠，叫土豆。"])
    assert not in_chinese(["my hamster 土豆 is two years old"])
    pattern = re.compile(compact_schema(1, chinese=True)["properties"]["facts"]["items"]["pattern"])
    assert pattern.match("用户的仓鼠叫土豆。")
    # An English fact of a Chinese message is a translation the screening cannot ground.
    assert not pattern.match("The user's hamster is called Tudou.")
    assert not pattern.match("The user's仓鼠 is called 土豆.")
    named = compact_schema(1, fact_openers(["我的仓鼠叫土豆"]), chinese=True)
    named_pattern = re.compile(named["properties"]["facts"]["items"]["pattern"])
    assert named_pattern.match("土豆两岁了。") and not named_pattern.match("The user is ok.")


def test_only_a_chinese_run_reads_the_chinese_rule_and_example() -> None:
    english = build_compact_messages(STATE, "my hamster Tudou is two")
    chinese = build_compact_messages(STATE, "我的仓鼠叫土豆", chinese=True)
    assert english[0]["content"] == COMPACT_SYSTEM  # the cached prefix, as before
    assert not any("用户" in m["content"] for m in english[:-1])
    assert '"用户"' in chinese[0]["content"]
    assert any("用户在医院当护士" in m["content"] for m in chinese[1:-1])
    assert chinese[-1]["content"] == "NEW MESSAGE:\n我的仓鼠叫土豆"


def test_the_chinese_opening_grammar_compiles_for_llama_cpp() -> None:
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    schema = compact_schema(1, chinese=True)
    compiled = grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    item = next(r for r in compiled._grammar.splitlines() if r.startswith("facts-item"))
    assert '(("用户"))' in item  # the fact opens with 用户
