"""The closed emotion vocabulary: every label the app stores or shows comes from here.

A model proposes a feeling in its own words ("happy-smile,confidence:1", "Stressed!",
"开心"); :func:`canonical_emotion` maps it to one of :data:`EMOTION_LABELS` or to
``None`` (no usable feeling). The vocabulary is the one of the evaluation data
(bench/data/eval/README.md: joy, pride, gratitude, love, surprise, sadness, loneliness,
nostalgia, anger, frustration, fear, anxiety, disgust) plus ``calm`` and ``tiredness``,
which companions hear every day. ``neutral`` and friends mean "no feeling": ``None``.

Mapping, in order: the whole label, then each word of it (the first that maps wins), each
looked up in :data:`_SYNONYMS` (English forms and Chinese names), then through the
scoring module's emotion families (``happy`` family → ``joy`` and so on), so a label the
families know is never lost.

Pure: no I/O; never raises.
"""

from __future__ import annotations

import re
import unicodedata

from backend.memory.scoring import emotion_family

EMOTION_LABELS: tuple[str, ...] = (
    "joy",
    "pride",
    "gratitude",
    "love",
    "surprise",
    "sadness",
    "loneliness",
    "nostalgia",
    "anger",
    "frustration",
    "fear",
    "anxiety",
    "disgust",
    "calm",
    "tiredness",
)

# Labels that name no feeling: mapped to ``None`` rather than to a made-up one.
NO_FEELING_LABELS = frozenset(
    [
        "neutral",
        "none",
        "normal",
        "ok",
        "okay",
        "fine",
        "nothing",
        "unknown",
        "n/a",
        "na",
        "null",
        "平静的",
        "一般",
        "没什么",
        "无",
    ]
)


def _table(rows: dict[str, str]) -> dict[str, str]:
    table: dict[str, str] = {}
    for label, words in rows.items():
        for word in words.split():
            table[word] = label
        table[label] = label
    return table


_SYNONYMS: dict[str, str] = _table(
    {
        "joy": "happy happiness joyful glad cheerful delighted excited excitement elated "
        "content contentment pleased hopeful hope optimistic fun amused relieved relief "
        "开心 快乐 高兴 喜悦 幸福 兴奋 愉快 欣慰 期待 激动",
        "pride": "proud accomplished accomplishment confident confidence 自豪 骄傲",
        "gratitude": "grateful thankful thanks appreciative appreciation 感激 感恩 感谢",
        "love": "loving affection affectionate caring tender fondness romantic 爱 喜爱 心动 甜蜜",
        "surprise": "surprised amazed shocked astonished startled 惊讶 吃惊 惊喜 意外",
        "sadness": "sad unhappy down depressed grief grieving heartbroken hurt upset "
        "disappointed disappointment gloomy blue 不开心 不高兴 难过 伤心 悲伤 失落 沮丧 委屈",
        "loneliness": "lonely alone isolated homesick homesickness 孤独 寂寞 想家",
        "nostalgia": "nostalgic wistful missing 怀念 思念 想念",
        "anger": "angry mad furious rage outraged irritated 生气 愤怒 火大 气愤",
        "frustration": "frustrated annoyed annoyance exasperated fed-up 烦躁 恼火 挫败 烦",
        "fear": "afraid scared frightened terrified fearful dread 害怕 恐惧",
        "anxiety": "anxious worried worry nervous stressed stress overwhelmed tense uneasy "
        "panicked panic apprehensive 焦虑 担心 担忧 紧张 不安 压力",
        "disgust": "disgusted grossed revulsion 恶心 厌恶 反感",
        "calm": "relaxed peaceful peace serene chill settled 平静 放松 安心",
        "tiredness": "tired exhausted sleepy drained weary fatigue fatigued burnt-out "
        "burned-out sleepless 累 疲惫 困 疲倦",
    }
)

# The scoring families' names → our label, for labels only the families know.
_FAMILY_LABEL = {
    "happy": "joy",
    "sad": "sadness",
    "angry": "anger",
    "fearful": "anxiety",
    "surprised": "surprise",
    "disgusted": "disgust",
    "love": "love",
}
_CJK_NAMES = sorted((word for word in _SYNONYMS if not word.isascii()), key=len, reverse=True)
_WORD = re.compile(r"[^\W\d_]+")


def _lookup(word: str) -> str | None:
    if word in _SYNONYMS:
        return _SYNONYMS[word]
    family = emotion_family(word)
    return _FAMILY_LABEL.get(family) if family else None


def canonical_emotion(label: str | None) -> str | None:
    """``label`` mapped to :data:`EMOTION_LABELS`, or ``None`` when it names no known feeling."""
    if not label or not isinstance(label, str):
        return None
    text = unicodedata.normalize("NFKC", label).strip().lower()
    if not text or text in NO_FEELING_LABELS:
        return None
    found = _lookup(text)
    if found:
        return found
    for word in _WORD.findall(text):
        if word in NO_FEELING_LABELS:
            return None
        found = _lookup(word)
        if found:
            return found
    # Chinese has no spaces: the longest known name inside the text ("我很开心" → 开心).
    for name in _CJK_NAMES:
        if name in text:
            return _SYNONYMS[name]
    return None
