"""Keywords: limbic's ASCII rule exactly, plus the Unicode/CJK extension."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.memory.keywords import (
    STOP_WORDS_EN,
    STOP_WORDS_ZH,
    _extract_unicode,
    extract_keywords,
    is_cjk,
    keyword_set,
    stored_keyword_tokens,
)


def limbic_keywords(text: str) -> list[str]:
    """Reference: limbic's rule on ASCII (lower-case, [a-z] runs > 2, minus stop words)."""
    words = [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2]
    out: list[str] = []
    for word in words:
        if word not in STOP_WORDS_EN and word not in out:
            out.append(word)
    return out


# --- English -------------------------------------------------------------------------


def test_english_sentence() -> None:
    assert extract_keywords("User drinks coffee every morning") == [
        "user",
        "drinks",
        "coffee",
        "every",
        "morning",
    ]


def test_stop_words_and_short_words_are_dropped() -> None:
    assert extract_keywords("I am in the garden with my dog and it is nice") == [
        "garden",
        "dog",
        "nice",
    ]


def test_contractions_and_possessives_split_like_limbic() -> None:
    # "don't" → "don" (stop word) + "t"; "User's" → "user" + "s".
    assert extract_keywords("I don't like the User's manager") == ["user", "manager"]


def test_order_is_first_occurrence_and_deduplicated() -> None:
    assert extract_keywords("Tea, coffee, TEA and Coffee again; tea!") == ["tea", "coffee"]


def test_numbers_are_not_keywords() -> None:
    assert extract_keywords("In 2024 I bought 3 mp3 players for 100dollars") == [
        "bought",
        "players",
        "dollars",
    ]


def test_empty_and_punctuation() -> None:
    assert extract_keywords("") == []
    assert extract_keywords("?!... --- 123") == []
    assert keyword_set("coffee coffee tea") == frozenset({"coffee", "tea"})


def test_fixture_words_are_not_stop_words() -> None:
    # golden-scoring.json needs |M| = 5 for "User drinks coffee every morning".
    assert {"user", "every", "drinks", "coffee", "morning"}.isdisjoint(STOP_WORDS_EN)
    assert all(len(word) > 2 and word.isascii() and word.isalpha() for word in STOP_WORDS_EN)


ascii_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=80)
wordy_text = st.lists(
    st.sampled_from(
        [*sorted(STOP_WORDS_EN)[:40], "Coffee", "tea", "a", "an", "Dave's", "x1y", "morning"]
    )
    | st.text(alphabet="abcXYZ019 '-_.", max_size=8),
    max_size=20,
).map(" ".join)


@given(st.one_of(ascii_text, wordy_text))
def test_ascii_equals_limbic_rule(text: str) -> None:
    assert extract_keywords(text) == limbic_keywords(text)
    # The Unicode path agrees on ASCII too (it is what non-ASCII text goes through).
    assert _extract_unicode(text) == limbic_keywords(text)


# --- Unicode beyond ASCII ------------------------------------------------------------


def test_accented_latin_keeps_accents() -> None:
    assert extract_keywords("Café naïve Müller, Straße à Zürich") == [
        "café",
        "naïve",
        "müller",
        "straße",
        "zürich",
    ]


def test_decomposed_accents_and_fullwidth_are_normalised() -> None:
    assert extract_keywords("cafe\u0301") == ["café"]
    assert extract_keywords("Ｃｏｆｆｅｅ and ﬁsh") == ["coffee", "fish"]


def test_lowering_is_str_lower() -> None:
    # "ß".lower() stays "ß" (casefold would give "ss"), like Memory's stored keywords.
    assert extract_keywords("STRAßE Groß") == ["straße", "groß"]


def test_cyrillic_and_greek() -> None:
    assert extract_keywords("Москва — столица России, да") == ["москва", "столица", "россии"]
    assert extract_keywords("ΟΔΟΣ Αθήνα") == ["οδος", "αθήνα"]


def test_scripts_with_combining_marks_stay_whole_words() -> None:
    assert extract_keywords("हिन्दी भाषा") == ["हिन्दी", "भाषा"]


# --- CJK -----------------------------------------------------------------------------


def test_chinese_becomes_overlapping_bigrams() -> None:
    assert extract_keywords("我喜欢喝咖啡") == ["我喜", "喜欢", "欢喝", "喝咖", "咖啡"]


def test_chinese_punctuation_splits_runs() -> None:
    assert extract_keywords("拿铁，咖啡。") == ["拿铁", "咖啡"]


def test_single_cjk_character_stays_a_unigram() -> None:
    assert extract_keywords("猫") == ["猫"]
    assert extract_keywords("a 猫 b") == ["猫"]


def test_chinese_stop_tokens_are_dropped_as_whole_tokens() -> None:
    assert extract_keywords("我们") == []
    assert extract_keywords("的") == []
    # A bigram that merely contains a stop character is kept.
    assert extract_keywords("我们的猫") == ["们的", "的猫"]
    assert {"我们", "什么", "没有", "可以", "的", "了"} <= STOP_WORDS_ZH


def test_mixed_text_splits_cjk_runs_at_non_cjk_characters() -> None:
    assert extract_keywords("我在Melbourne工作") == ["我在", "melbourne", "工作"]
    assert extract_keywords("2024年我去了Osaka") == ["年我", "我去", "去了", "osaka"]
    assert extract_keywords("2024年 Osaka") == ["年", "osaka"]


def test_japanese_kana() -> None:
    assert extract_keywords("東京に行きました") == ["東京", "京に", "に行", "行き", "きま"]
    assert extract_keywords("コーヒーが好き") == ["コー", "ーヒ", "ヒー", "ーが", "が好", "好き"]
    # The katakana middle dot separates names.
    assert extract_keywords("ジョン・スミス") == ["ジョ", "ョン", "スミ", "ミス"]


def test_korean_hangul_bigrams() -> None:
    assert extract_keywords("서울 커피") == ["서울", "커피"]


def test_is_cjk() -> None:
    assert is_cjk("Melbourne 工作")
    assert is_cjk("ひらがな")
    assert not is_cjk("café Москва")


# --- stored keywords -----------------------------------------------------------------


def test_stored_keywords_ascii_are_taken_as_they_are() -> None:
    # Limbic keeps stored keywords verbatim (lower-cased), short ones and phrases included.
    assert stored_keyword_tokens(["AI", "new york", " flat ", ""]) == {"ai", "new york", "flat"}


def test_stored_cjk_keywords_become_bigrams() -> None:
    assert stored_keyword_tokens(["拿铁咖啡", "猫", "Café"]) == {
        "拿铁",
        "铁咖",
        "咖啡",
        "猫",
        "café",
    }


@pytest.mark.parametrize("text", ["", " ", "\u200b", "🙂🙂🙂", "\x00abc\x00"])
def test_odd_inputs_never_raise(text: str) -> None:
    assert isinstance(extract_keywords(text), list)
