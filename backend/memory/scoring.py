"""Scoring: four channels and a cosine blend (docs/memory-model.md, "Scoring").

```
recency   = 0.5 ** (days_since_last_access / 7)          # fractional days
base      = clamp01(0.25*recency + 0.35*importance + 0.25*relevance + 0.15*emotion)
final     = base                                          if cosine is MISSING
final     = clamp01(0.70*base + 0.30*max(0, cosine))     otherwise
```

The weights are :class:`~backend.memory.types.ScoreWeights` (limbic's defaults; the app
may pass others). Failure policy: a MISSING cosine (no query vector, no memory vector,
dimensions differ, a zero or non-finite norm, a vector that is not numeric) is ``None``,
never 0 — substituting 0.0 would change the final score. Runtime trouble in a vector
degrades to MISSING; only a caller's programming error (a non-positive half-life, both
``query_text`` and ``query_keywords``) raises. Naive datetimes are taken as UTC.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime

import numpy as np

from backend.memory.keywords import keyword_set, stored_keyword_tokens
from backend.memory.types import (
    Memory,
    ScoreBreakdown,
    ScoredMemory,
    ScoreWeights,
    clamp01,
    normalise_category,
)

__all__ = [
    "DEFAULT_WEIGHTS",
    "EMOTION_FAMILIES",
    "cosine",
    "emotion_family",
    "emotion_score",
    "memory_keyword_set",
    "pool_cosines",
    "recency",
    "relevance",
    "score_memory",
    "score_pool",
    "to_utc",
]


def _words(text: str) -> frozenset[str]:
    """A whitespace-separated word list as a set (keeps long constant lists readable)."""
    return frozenset(text.split())


DEFAULT_WEIGHTS = ScoreWeights()
_SECONDS_PER_DAY = 86_400.0

# Emotion channel constants (docs/memory-model.md, "Emotion channel", limbic's numbers).
_EMOTION_CATEGORY_BONUS = 0.3  # the memory's category is ``emotion``
_INTENSITY_HIGH, _INTENSITY_HIGH_BONUS = 0.7, 0.5  # intensity >= 0.7 adds 0.5
_INTENSITY_MID, _INTENSITY_MID_BONUS = 0.4, 0.3  # intensity >= 0.4 adds 0.3
_INTENSITY_LOW_SLOPE = 0.3  # below 0.4 adds 0.3 * intensity
_EXACT_MATCH_BONUS = 0.4  # target emotion == memory label (case-insensitive)
_FAMILY_MATCH_BONUS = 0.2  # both labels in one family

# Emotion families: the spec's seven (each family's name is also a member), extended with
# the labels the hippocampus emits (bench/data/eval/README.md: joy, pride, gratitude, love,
# surprise, sadness, loneliness, nostalgia, anger, frustration, fear, anxiety, disgust),
# their noun/adjective forms, and their Chinese names. Every label is in exactly one family.
EMOTION_FAMILIES: Mapping[str, frozenset[str]] = {
    "happy": _words(
        """
        happy joyful content proud playful excited optimistic peaceful joy happiness pride
        gratitude grateful thankful contentment excitement optimism peace glad delighted
        cheerful elated overjoyed satisfied satisfaction relieved relief hopeful hope calm
        开心 快乐 高兴 喜悦 幸福 自豪 骄傲 感激 感恩 感谢 满足 满意 兴奋 乐观 平静 欣慰 愉快
        欢喜 激动 期待 放松 安心
        """
    ),
    "sad": _words(
        """
        sad lonely vulnerable guilty depressed hurt grief abandoned sadness loneliness nostalgia
        nostalgic guilt depression grieving sorrow sorrowful heartbroken heartbreak melancholy
        homesick homesickness unhappy down
        难过 伤心 悲伤 孤独 寂寞 怀念 思念 想念 失落 沮丧 抑郁 内疚 愧疚 委屈 心碎 悲痛 哀伤
        痛苦 无助 脆弱 想家 遗憾
        """
    ),
    "angry": _words(
        """
        angry frustrated bitter mad aggressive hostile annoyed resentful anger frustration
        bitterness aggression hostility annoyance resentment irritated irritation furious fury
        rage outraged
        生气 愤怒 烦躁 恼火 气愤 怨恨 不满 挫败 火大 抓狂 暴躁 不耐烦 烦
        """
    ),
    "fearful": _words(
        """
        fearful scared anxious insecure nervous worried overwhelmed fear anxiety afraid
        insecurity nervousness worry stress stressed panic panicked dread terrified apprehensive
        uneasy
        害怕 恐惧 焦虑 担心 担忧 紧张 不安 恐慌 忐忑 压力 慌张 惶恐 不知所措
        """
    ),
    "surprised": _words(
        """
        surprised startled confused amazed shocked astonished surprise shock amazement
        astonishment confusion awe
        惊讶 吃惊 惊喜 震惊 意外 困惑 惊奇 惊叹 诧异
        """
    ),
    "disgusted": _words(
        """
        disgusted disappointed disapproving awful repelled disgust disappointment disapproval
        revulsion contempt
        厌恶 恶心 失望 反感 讨厌 嫌弃 鄙视
        """
    ),
    "love": _words(
        """
        love intimate passionate aroused affectionate caring tender loving affection care
        intimacy passion tenderness adoration fondness romance romantic
        爱 喜爱 温柔 关心 亲密 爱慕 热爱 深情 疼爱 心动 关爱 浪漫 爱意 甜蜜
        """
    ),
}


def _label_to_family(families: Mapping[str, frozenset[str]]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for family, members in families.items():
        for label in members | {family}:
            if mapping.setdefault(label, family) != family:
                raise ValueError(f"emotion label {label!r} is in {mapping[label]} and {family}")
    return mapping


_FAMILY_OF: Mapping[str, str] = _label_to_family(EMOTION_FAMILIES)


def to_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime; a naive one is taken to be UTC already."""
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def recency(last_accessed: datetime, now: datetime, half_life_days: float = 7.0) -> float:
    """``0.5 ** (days / half_life_days)`` with fractional days since the last access.

    A future ``last_accessed`` counts as 0 days (recency 1). Naive datetimes are UTC.
    Raises ``ValueError`` for a half-life that is not a positive finite number (a
    configuration error, not runtime trouble).
    """
    if not (math.isfinite(half_life_days) and half_life_days > 0):
        raise ValueError(f"half_life_days must be positive and finite, got {half_life_days!r}")
    days = (to_utc(now) - to_utc(last_accessed)).total_seconds() / _SECONDS_PER_DAY
    return 0.5 ** (max(0.0, days) / half_life_days)


def memory_keyword_set(memory: Memory) -> frozenset[str]:
    """``M`` of the relevance channel: keywords of the content ∪ the stored keywords."""
    return keyword_set(memory.content) | stored_keyword_tokens(memory.keywords)


def relevance(
    query_keywords: Collection[str],
    memory: Memory,
    memory_keywords: frozenset[str] | None = None,
) -> float:
    """Keyword Jaccard ``|Q ∩ M| / |Q ∪ M|``; 0 when either side is empty.

    ``memory_keywords`` may carry a precomputed :func:`memory_keyword_set` (for speed).
    """
    m = memory_keyword_set(memory) if memory_keywords is None else memory_keywords
    q = query_keywords if isinstance(query_keywords, frozenset | set) else set(query_keywords)
    if not q or not m:
        return 0.0
    return len(q & m) / len(q | m)


def _as_vector(vector: object) -> tuple[np.ndarray, float] | None:
    """(float64 1-D array, its L2 norm), or ``None`` when it cannot be compared."""
    if vector is None:
        return None
    try:
        array = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if array.ndim != 1 or array.size == 0:
        return None
    with np.errstate(all="ignore"):
        norm = float(np.linalg.norm(array))
    if not (math.isfinite(norm) and norm > 0.0):
        return None
    return array, norm


def _finish_cosine(value: float) -> float | None:
    if not math.isfinite(value):
        return None
    return -1.0 if value < -1.0 else 1.0 if value > 1.0 else value


def cosine(query: np.ndarray | None, vector: np.ndarray | None) -> float | None:
    """Cosine similarity in [-1, 1], or ``None`` when MISSING — never 0 in its place.

    MISSING: no query vector, no memory vector, not 1-D, dimensions differ, a zero or
    non-finite norm, or values that are not numbers. Computed in float64.
    """
    q = _as_vector(query)
    v = _as_vector(vector)
    if q is None or v is None or q[0].shape != v[0].shape:
        return None
    with np.errstate(all="ignore"):
        value = float(np.dot(q[0], v[0])) / (q[1] * v[1])
    return _finish_cosine(value)


def emotion_family(label: str | None) -> str | None:
    """The family of an emotion label (case-insensitive), or ``None`` if it has none."""
    if not label:
        return None
    return _FAMILY_OF.get(label.strip().lower())


def emotion_score(memory: Memory, target_emotion: str | None) -> float:
    """The emotion channel, in [0, 1] (docs/memory-model.md, "Emotion channel").

    0.3 for the ``emotion`` category; plus 0.5 / 0.3 / 0.3*intensity for the memory's own
    emotion (intensity >= 0.7 / >= 0.4 / below); plus 0.4 when ``target_emotion`` equals
    the memory's label (case-insensitive) or 0.2 when both are in one family; capped at 1.
    """
    score = _EMOTION_CATEGORY_BONUS if normalise_category(memory.category) == "emotion" else 0.0
    emotion = memory.emotion
    if emotion is None:
        return min(score, 1.0)
    intensity = emotion.intensity
    if intensity >= _INTENSITY_HIGH:
        score += _INTENSITY_HIGH_BONUS
    elif intensity >= _INTENSITY_MID:
        score += _INTENSITY_MID_BONUS
    else:
        score += _INTENSITY_LOW_SLOPE * intensity
    target = (target_emotion or "").strip().lower()
    label = emotion.label.strip().lower()
    if target and label:
        if target == label:
            score += _EXACT_MATCH_BONUS
        else:
            family = _FAMILY_OF.get(target)
            if family is not None and family == _FAMILY_OF.get(label):
                score += _FAMILY_MATCH_BONUS
    return min(score, 1.0)


def _breakdown(
    memory: Memory,
    *,
    now: datetime,
    query_keywords: Collection[str],
    cos: float | None,
    target_emotion: str | None,
    weights: ScoreWeights,
    memory_keywords: frozenset[str] | None,
) -> ScoreBreakdown:
    w = weights
    rec = recency(memory.last_accessed, now, w.recency_half_life_days)
    imp = memory.importance
    rel = relevance(query_keywords, memory, memory_keywords)
    emo = emotion_score(memory, target_emotion)
    base = clamp01(w.recency * rec + w.importance * imp + w.relevance * rel + w.emotion * emo)
    final = base if cos is None else clamp01(w.base * base + w.cosine * max(0.0, cos))
    return ScoreBreakdown(
        recency=rec, importance=imp, relevance=rel, emotion=emo, cosine=cos, base=base, final=final
    )


def score_memory(
    memory: Memory,
    *,
    now: datetime,
    query_keywords: Collection[str],
    query_vector: np.ndarray | None = None,
    target_emotion: str | None = None,
    weights: ScoreWeights = DEFAULT_WEIGHTS,
    memory_keywords: frozenset[str] | None = None,
) -> ScoreBreakdown:
    """Every channel, the cosine (``None`` when MISSING), base and final of one memory.

    ``base = clamp01(w.recency*recency + w.importance*importance + w.relevance*relevance
    + w.emotion*emotion)``; ``final = base`` when the cosine is MISSING, else
    ``clamp01(w.base*base + w.cosine*max(0, cosine))``.
    """
    return _breakdown(
        memory,
        now=now,
        query_keywords=query_keywords,
        cos=cosine(query_vector, memory.embedding),
        target_emotion=target_emotion,
        weights=weights,
        memory_keywords=memory_keywords,
    )


def pool_cosines(query_vector: np.ndarray | None, memories: Sequence[Memory]) -> list[float | None]:
    """:func:`cosine` of the query against every memory, vectorised with numpy.

    Same definition as the scalar one (float64, same MISSING cases); values agree with it
    to rounding error (well within 1e-9).
    """
    result: list[float | None] = [None] * len(memories)
    query = _as_vector(query_vector)
    if query is None:
        return result
    q, q_norm = query
    rows: list[np.ndarray] = []
    indices: list[int] = []
    for index, memory in enumerate(memories):
        if memory.embedding is None:
            continue
        try:
            row = np.asarray(memory.embedding, dtype=np.float64)
        except (TypeError, ValueError):
            continue
        if row.shape == q.shape:
            rows.append(row)
            indices.append(index)
    if not rows:
        return result
    matrix = np.stack(rows)
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(matrix, axis=1)
        values = (matrix @ q) / (norms * q_norm)
    for index, norm, value in zip(indices, norms.tolist(), values.tolist(), strict=True):
        if math.isfinite(norm) and norm > 0.0:
            result[index] = _finish_cosine(value)
    return result


def score_pool(
    memories: Iterable[Memory],
    *,
    now: datetime,
    query_text: str | None = None,
    query_keywords: Collection[str] | None = None,
    query_vector: np.ndarray | None = None,
    target_emotion: str | None = None,
    weights: ScoreWeights = DEFAULT_WEIGHTS,
) -> list[ScoredMemory]:
    """Score every memory; sorted by final score descending, ties by memory id ascending.

    The query's keywords come from ``query_keywords`` or else from ``query_text`` (give
    one, not both: both raise ``TypeError``; neither means no keywords, relevance 0).
    Cosines are computed for the whole pool at once; a MISSING one is ``None``.
    """
    if query_text is not None and query_keywords is not None:
        raise TypeError("give query_text or query_keywords, not both")
    if query_keywords is None:
        q: Collection[str] = keyword_set(query_text or "")
    else:
        q = frozenset(query_keywords)
    pool = list(memories)
    cosines = pool_cosines(query_vector, pool)
    scored = [
        ScoredMemory(
            memory=memory,
            score=_breakdown(
                memory,
                now=now,
                query_keywords=q,
                cos=cos,
                target_emotion=target_emotion,
                weights=weights,
                memory_keywords=None,
            ),
        )
        for memory, cos in zip(pool, cosines, strict=True)
    ]
    scored.sort(key=lambda item: (-item.score.final, item.memory.id))
    return scored
