"""The memory panel's emotion line reads well for every label of the closed vocabulary, in
English and in Chinese ("You seemed anger (60%)" was the bare label)."""

from __future__ import annotations

from typing import Any

import pytest

from backend.memory.emotions import EMOTION_LABELS, canonical_emotion
from backend.web.ui_feeling import FEELING_WORDS, feeling_line, writes_chinese
from backend.web.ui_support import make_templates
from tests.web.harness import REPO

# Labels that are already the word to show ("You seemed calm").
ADJECTIVE_LABELS = {"calm"}


def test_every_label_has_words_in_both_languages() -> None:
    assert set(FEELING_WORDS) == set(EMOTION_LABELS)


@pytest.mark.parametrize("label", EMOTION_LABELS)
def test_the_words_name_the_same_feeling(label: str) -> None:
    english, chinese = FEELING_WORDS[label]
    assert canonical_emotion(english) == label
    assert canonical_emotion(chinese) == label


@pytest.mark.parametrize("label", EMOTION_LABELS)
def test_english_line_says_an_adjective(label: str) -> None:
    line = feeling_line(label, 0.6, chinese=False)
    text = line.lead + line.word + line.tail
    assert line.lang == "en"
    assert text == f"You seemed {FEELING_WORDS[label][0]} (60%)."
    if label not in ADJECTIVE_LABELS:
        assert line.word != label, text


@pytest.mark.parametrize("label", EMOTION_LABELS)
def test_chinese_line_is_all_chinese(label: str) -> None:
    line = feeling_line(label, 0.6, chinese=True)
    text = line.lead + line.word + line.tail
    assert line.lang == "zh"
    assert text == f"你似乎{FEELING_WORDS[label][1]}（60%）。"
    assert not any(ch.isascii() and ch.isalpha() for ch in text), text


def test_without_an_intensity_or_outside_the_vocabulary() -> None:
    line = feeling_line("tiredness", None, chinese=False)
    assert line.lead + line.word + line.tail == "You seemed tired."
    line = feeling_line("wistful-ish", 0.25, chinese=False)
    assert line.lead + line.word + line.tail == "Feeling: wistful-ish (25%)."
    line = feeling_line("wistful-ish", None, chinese=True)
    assert line.lead + line.word + line.tail == "情绪：wistful-ish。"


def test_the_language_is_the_one_the_user_writes() -> None:
    assert writes_chinese("我在Melbourne工作，今天很累")
    assert not writes_chinese("I had 饺子 for dinner with my sister")
    assert not writes_chinese("")


def render_panel(emotion: dict[str, Any], short_term: list[dict[str, Any]]) -> str:
    panel = {
        "session_id": "s1",
        "background": None,
        "short_term": short_term,
        "emotion": emotion,
        "report": None,
    }
    templates = make_templates(REPO / "frontend" / "templates")
    return templates.env.get_template("_panel.html").render(panel=panel)


def test_the_panel_says_the_adjective() -> None:
    english = [{"role": "user", "text": "My landlord kept the deposit", "compressed": False}]
    html = render_panel({"label": "anger", "intensity": 0.6}, english)
    assert '<p class="emotion" lang="en">You seemed <strong>angry</strong> (60%).</p>' in html
    chinese = [{"role": "user", "text": "房东扣了我的押金", "compressed": False}]
    html = render_panel({"label": "anger", "intensity": 0.6}, chinese)
    assert '<p class="emotion" lang="zh">你似乎<strong>很生气</strong>（60%）。</p>' in html
