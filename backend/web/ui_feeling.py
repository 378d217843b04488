"""The memory panel's line about the user's last emotion, in the conversation's language.

"You seemed angry (60%)." / "你似乎很生气（60%）。": the stored label is a noun of the closed
vocabulary (``backend.memory.emotions.EMOTION_LABELS``), so each label has the words that
read well after "You seemed" and after "你似乎"; "You seemed anger" is what the bare label
gave. A label from outside the vocabulary (a state stored before it) is shown as it is.

The line is in Chinese when the user writes Chinese: the user's own short-term words, else
the background (which the hippocampus writes in the user's language).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from backend.memory.keywords import is_cjk

# label → (English adjective, Chinese predicate). Each maps back to its label through the
# vocabulary's own synonyms (tests/ui/test_panel_feeling.py).
FEELING_WORDS: dict[str, tuple[str, str]] = {
    "joy": ("happy", "很开心"),
    "pride": ("proud", "很自豪"),
    "gratitude": ("grateful", "心怀感激"),
    "love": ("affectionate", "充满爱意"),
    "surprise": ("surprised", "很惊讶"),
    "sadness": ("sad", "很难过"),
    "loneliness": ("lonely", "很孤独"),
    "nostalgia": ("nostalgic", "在怀念过去"),
    "anger": ("angry", "很生气"),
    "frustration": ("frustrated", "很有挫败感"),
    "fear": ("afraid", "很害怕"),
    "anxiety": ("anxious", "很焦虑"),
    "disgust": ("disgusted", "很反感"),
    "calm": ("calm", "很平静"),
    "tiredness": ("tired", "很疲惫"),
}

_LATIN_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True, slots=True)
class Feeling:
    """The line in parts, so the template marks up ``word``: lead + word + tail."""

    lang: str  # "en" or "zh", for the element's lang attribute
    lead: str
    word: str
    tail: str


def writes_chinese(text: str) -> bool:
    """More Chinese characters than Latin-script words: a Chinese message quoting an
    English name stays Chinese, an English one naming a dish in Chinese stays English."""
    han = sum(1 for ch in text if is_cjk(ch))
    return han > len(_LATIN_WORD.findall(text))


def feeling_line(label: str, intensity: float | None, *, chinese: bool) -> Feeling:
    english, zh = FEELING_WORDS.get(label, (label, label))
    if chinese:
        share = "" if intensity is None else f"（{round(intensity * 100)}%）"
        prefix = "你似乎" if label in FEELING_WORDS else "情绪："
        return Feeling("zh", prefix, zh, f"{share}。")
    share = "" if intensity is None else f" ({round(intensity * 100)}%)"
    prefix = "You seemed " if label in FEELING_WORDS else "Feeling: "
    return Feeling("en", prefix, english, f"{share}.")


def _user_words(short_term: Iterable[Any]) -> str:
    return " ".join(
        str(item.get("text", ""))
        for item in short_term
        if isinstance(item, Mapping) and item.get("role") == "user"
    )


def panel_feeling(panel: Mapping[str, Any]) -> Feeling:
    """The filter ``feeling`` of the templates: the line for a panel that has an emotion."""
    emotion = panel["emotion"]
    sample = _user_words(panel.get("short_term") or ()) or (panel.get("background") or "")
    return feeling_line(emotion["label"], emotion.get("intensity"), chinese=writes_chinese(sample))
