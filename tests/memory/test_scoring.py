"""Scoring: the golden fixture, MISSING cosine, the emotion channel, recency."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backend.memory.keywords import keyword_set
from backend.memory.scoring import (
    EMOTION_FAMILIES,
    cosine,
    emotion_family,
    emotion_score,
    memory_keyword_set,
    recency,
    relevance,
    score_memory,
    score_pool,
)
from backend.memory.types import Emotion, Memory, ScoreWeights
from tests.memory.helpers import NOW, memory, unit

TOL = 1e-6

# --- the golden fixture ----------------------------------------------------------------


@pytest.fixture(scope="module")
def golden(fixtures_dir: Path) -> dict[str, Any]:
    return json.loads((fixtures_dir / "golden-scoring.json").read_text(encoding="utf-8"))


def _naive_as_utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _memories(golden: dict[str, Any]) -> list[Memory]:
    return [
        Memory(
            id=row["key"],
            content=row["content"],
            category=row["category"],
            importance=row["importance"],
            keywords=tuple(row["keywords"]),
            created_at=_naive_as_utc(row["created_at"]),
            last_accessed=_naive_as_utc(row["last_accessed"]),
            access_count=row["access_count"],
            subject=row["subject"],
            embedding=None if row["vector"] is None else np.asarray(row["vector"]),
        )
        for row in golden["memories"]
    ]


def _score_all(golden: dict[str, Any], *, with_vector: bool, naive_now: bool = False):
    now = datetime.fromisoformat(golden["now"])
    return score_pool(
        _memories(golden),
        now=now if naive_now else _naive_as_utc(golden["now"]),
        query_text=golden["query"],
        query_vector=np.asarray(golden["query_vector"]) if with_vector else None,
        target_emotion=golden["target_emotion"],
        weights=ScoreWeights(**golden["weights"]),
    )


def test_fixture_query_keywords(golden: dict[str, Any]) -> None:
    assert sorted(keyword_set(golden["query"])) == sorted(golden["query_keywords"])


@pytest.mark.parametrize("naive_now", [False, True])
def test_fixture_scores(golden: dict[str, Any], naive_now: bool) -> None:
    scored = {
        s.memory.id: s.score for s in _score_all(golden, with_vector=True, naive_now=naive_now)
    }
    assert len(scored) == len(golden["memories"])
    for row in golden["memories"]:
        score = scored[row["key"]]
        assert abs(score.base - row["expected_base_score"]) <= TOL, row["key"]
        assert abs(score.final - row["expected_final_score"]) <= TOL, row["key"]
        for channel, expected in row["channels"].items():
            actual = getattr(score, channel)
            if expected is None:
                assert actual is None, (row["key"], channel)
            else:
                assert abs(actual - expected) <= TOL, (row["key"], channel)


def test_fixture_scores_one_by_one_match_the_pool(golden: dict[str, Any]) -> None:
    query = np.asarray(golden["query_vector"])
    pool = {s.memory.id: s.score for s in _score_all(golden, with_vector=True)}
    for item in _memories(golden):
        alone = score_memory(
            item,
            now=_naive_as_utc(golden["now"]),
            query_keywords=keyword_set(golden["query"]),
            query_vector=query,
            target_emotion=None,
        )
        assert alone == pool[item.id]


def test_fixture_order_base(golden: dict[str, Any]) -> None:
    ranked = _score_all(golden, with_vector=False)
    assert all(s.score.cosine is None and s.score.final == s.score.base for s in ranked)
    assert [s.memory.content for s in ranked] == golden["expected_order_base"]


def test_fixture_order_embedded(golden: dict[str, Any]) -> None:
    ranked = _score_all(golden, with_vector=True)
    assert [s.memory.content for s in ranked] == golden["expected_order_embedded"]


def test_fixture_missing_cosine_is_not_zero(golden: dict[str, Any]) -> None:
    scored = {s.memory.id: s.score for s in _score_all(golden, with_vector=True)}
    portuguese = scored["portuguese"]
    assert portuguese.cosine is None
    assert portuguese.final == portuguese.base
    w = ScoreWeights(**golden["weights"])
    as_if_zero = w.base * portuguese.base + w.cosine * 0.0
    assert abs(as_if_zero - portuguese.final) > 0.1


# --- cosine ----------------------------------------------------------------------------


def test_cosine_values() -> None:
    assert cosine(np.array([1.0, 0.0]), np.array([0.6, 0.8])) == pytest.approx(0.6)
    assert cosine(np.array([1.0, 0.0]), np.array([-2.0, 0.0])) == pytest.approx(-1.0)
    assert cosine(np.array([1, 0], dtype=np.float32), [0.0, 3.0]) == 0.0


@pytest.mark.parametrize(
    ("query", "vector"),
    [
        (None, np.array([1.0, 0.0])),
        (np.array([1.0, 0.0]), None),
        (np.array([1.0, 0.0]), np.array([0.0, 0.0])),
        (np.array([0.0, 0.0]), np.array([1.0, 0.0])),
        (np.array([1.0, 0.0]), np.array([np.nan, 1.0])),
        (np.array([1.0, np.inf]), np.array([1.0, 1.0])),
        (np.array([1.0, 0.0]), np.array([1.0, 0.0, 0.0])),
        (np.array([1.0, 0.0]), np.array([[1.0, 0.0]])),
        (np.array([]), np.array([])),
        (np.array([1.0, 0.0]), np.array(["a", "b"], dtype=object)),
    ],
    ids=[
        "no-query",
        "no-vector",
        "zero",
        "zero-query",
        "nan",
        "inf",
        "dims",
        "2d",
        "empty",
        "junk",
    ],
)
def test_cosine_missing_cases(query: Any, vector: Any) -> None:
    assert cosine(query, vector) is None


def test_missing_cosine_keeps_final_equal_to_base() -> None:
    item = memory("a", "coffee", vector=np.zeros(3))
    score = score_memory(item, now=NOW, query_keywords={"coffee"}, query_vector=np.ones(3))
    assert score.cosine is None and score.final == score.base


def test_pool_cosine_matches_scalar_definition() -> None:
    rng = np.random.default_rng(7)
    dim = 384
    query = rng.standard_normal(dim).astype(np.float32)
    vectors: list[np.ndarray | None] = [
        rng.standard_normal(dim).astype(np.float32) for _ in range(60)
    ]
    vectors[3] = None
    vectors[5] = np.zeros(dim)
    vectors[7] = rng.standard_normal(dim + 1)
    vectors[9] = np.full(dim, np.nan)
    pool = [memory(f"m{i:02d}", vector=v) for i, v in enumerate(vectors)]
    ranked = score_pool(pool, now=NOW, query_text="", query_vector=query)
    for item in ranked:
        expected = cosine(query, item.memory.embedding)
        if expected is None:
            assert item.score.cosine is None
        else:
            assert item.score.cosine is not None
            assert abs(item.score.cosine - expected) <= 1e-9
    missing = {s.memory.id for s in ranked if s.score.cosine is None}
    assert missing == {"m03", "m05", "m07", "m09"}


def test_pool_without_query_vector_is_all_missing() -> None:
    pool = [memory("a", vector=unit(1, 0)), memory("b")]
    assert all(s.score.cosine is None for s in score_pool(pool, now=NOW, query_text="x"))


# --- pool ordering and arguments -------------------------------------------------------


def test_pool_ties_break_by_id_ascending() -> None:
    pool = [memory(i) for i in ("c", "a", "b")]
    assert [s.memory.id for s in score_pool(pool, now=NOW, query_text="")] == ["a", "b", "c"]


def test_pool_query_keywords_or_text() -> None:
    pool = [memory("a", "User drinks coffee every morning")]
    by_text = score_pool(pool, now=NOW, query_text="coffee")
    by_keywords = score_pool(pool, now=NOW, query_keywords=["coffee"])
    assert by_text == by_keywords
    assert by_text[0].score.relevance == pytest.approx(0.2)
    with pytest.raises(TypeError):
        score_pool(pool, now=NOW, query_text="coffee", query_keywords=["coffee"])


def test_other_weights_are_honoured() -> None:
    item = memory("a", importance=1.0, days_ago=0)
    weights = ScoreWeights(recency=0.0, importance=1.0, relevance=0.0, emotion=0.0)
    assert score_memory(item, now=NOW, query_keywords=(), weights=weights).base == 1.0


# --- relevance -------------------------------------------------------------------------


def test_relevance_jaccard_over_content_and_stored_keywords() -> None:
    item = memory("a", "User drinks coffee every morning", keywords=("Coffee", "Morning"))
    assert memory_keyword_set(item) == {"user", "drinks", "coffee", "every", "morning"}
    assert relevance({"coffee"}, item) == pytest.approx(1 / 5)
    assert relevance({"coffee", "tea"}, item) == pytest.approx(1 / 6)
    assert relevance(set(), item) == 0.0
    assert relevance({"coffee"}, memory("b", "a an the"), frozenset()) == 0.0


def test_relevance_chinese() -> None:
    item = memory("a", "我喜欢喝咖啡", keywords=("咖啡",))
    assert relevance(keyword_set("咖啡"), item) == pytest.approx(1 / 5)


# --- emotion channel -------------------------------------------------------------------


def _emo(label: str | None, intensity: float = 0.0, category: str = "general") -> Memory:
    emotion = None if label is None else Emotion(label, intensity)
    return memory("e", category=category, emotion=emotion)


@pytest.mark.parametrize(
    ("item", "target", "expected"),
    [
        (_emo(None), None, 0.0),
        (_emo(None, category="emotion"), "joy", 0.3),
        (_emo(None, category="Emotion"), None, 0.3),
        (_emo("joy", 0.7), None, 0.5),
        (_emo("joy", 0.69), None, 0.3),
        (_emo("joy", 0.4), None, 0.3),
        (_emo("joy", 0.39), None, 0.3 * 0.39),
        (_emo("joy", 0.0), None, 0.0),
        (_emo("joy", 0.9), "JOY", 0.9),
        (_emo("joy", 0.9), " joy ", 0.9),
        (_emo("joy", 0.9), "pride", 0.7),
        (_emo("joy", 0.9), "happy", 0.7),
        (_emo("joy", 0.9), "sadness", 0.5),
        (_emo("joy", 0.9), "unknown", 0.5),
        (_emo("joy", 0.9), "", 0.5),
        (_emo("joy", 0.9, category="emotion"), "joy", 1.0),
        (_emo("sadness", 0.5, category="emotion"), "lonely", 0.8),
        (_emo("开心", 0.8), "开心", 0.9),
        (_emo("开心", 0.8), "joy", 0.7),
        (_emo("难过", 0.5), "sadness", 0.5),
        (_emo("焦虑", 0.5), "anxiety", 0.5),
        (_emo("anger", 0.2), "生气", 0.3 * 0.2 + 0.2),
        (_emo("失望", 0.5), "disappointed", 0.5),
        (_emo("nostalgia", 0.5), "loneliness", 0.5),
        (_emo("fear", 0.5), "anxiety", 0.5),
        (_emo("fear", 0.5), "anger", 0.3),
    ],
)
def test_emotion_channel(item: Memory, target: str | None, expected: float) -> None:
    assert emotion_score(item, target) == pytest.approx(expected)


def test_emotion_families_partition_their_labels() -> None:
    seen: dict[str, str] = {}
    for family, members in EMOTION_FAMILIES.items():
        for label in members | {family}:
            assert label not in seen, f"{label} in {seen.get(label)} and {family}"
            seen[label] = family
            assert label == label.strip().lower()


def test_spec_families_and_hippocampus_labels() -> None:
    spec = {
        "happy": "joyful content proud playful excited optimistic peaceful",
        "sad": "lonely vulnerable guilty depressed hurt grief abandoned",
        "angry": "frustrated bitter mad aggressive hostile annoyed resentful",
        "fearful": "scared anxious insecure nervous worried overwhelmed",
        "surprised": "startled confused amazed shocked astonished",
        "disgusted": "disappointed disapproving awful repelled",
        "love": "intimate passionate aroused affectionate caring tender",
    }
    for family, members in spec.items():
        assert emotion_family(family) == family
        for label in members.split():
            assert emotion_family(label) == family, label
    emitted = {
        "joy": "happy",
        "pride": "happy",
        "gratitude": "happy",
        "love": "love",
        "surprise": "surprised",
        "sadness": "sad",
        "loneliness": "sad",
        "nostalgia": "sad",
        "anger": "angry",
        "frustration": "angry",
        "fear": "fearful",
        "anxiety": "fearful",
        "disgust": "disgusted",
    }
    for label, family in emitted.items():
        assert emotion_family(label) == family, label
    assert emotion_family("Joy ") == "happy"
    assert emotion_family("开心") == "happy"
    assert emotion_family("孤独") == "sad"
    assert emotion_family("愤怒") == "angry"
    assert emotion_family("害怕") == "fearful"
    assert emotion_family("惊讶") == "surprised"
    assert emotion_family("厌恶") == "disgusted"
    assert emotion_family("爱") == "love"
    assert emotion_family("banana") is None
    assert emotion_family(None) is None


# --- recency ---------------------------------------------------------------------------


def test_recency_half_life() -> None:
    assert recency(NOW, NOW) == 1.0
    assert recency(NOW - timedelta(days=7), NOW) == pytest.approx(0.5)
    assert recency(NOW - timedelta(days=3.5), NOW) == pytest.approx(math.sqrt(0.5))
    assert recency(NOW - timedelta(days=30), NOW, half_life_days=30) == pytest.approx(0.5)


def test_recency_future_counts_as_now() -> None:
    assert recency(NOW + timedelta(days=3), NOW) == 1.0


def test_recency_naive_is_utc_and_offsets_are_respected() -> None:
    naive_now = NOW.replace(tzinfo=None)
    assert recency(NOW - timedelta(days=7), naive_now) == pytest.approx(0.5)
    tokyo = timezone(timedelta(hours=9))
    assert recency((NOW - timedelta(days=7)).astimezone(tokyo), NOW) == pytest.approx(0.5)


@pytest.mark.parametrize("half_life", [0.0, -1.0, math.inf, math.nan])
def test_recency_bad_half_life_raises(half_life: float) -> None:
    with pytest.raises(ValueError):
        recency(NOW, NOW, half_life_days=half_life)


def test_score_breakdown_is_explainable() -> None:
    item = replace(memory("a", "coffee", importance=0.6, vector=unit(1, 0)), keywords=("coffee",))
    score = score_memory(item, now=NOW, query_keywords={"coffee"}, query_vector=unit(1, 0))
    assert score.recency == 1.0 and score.relevance == 1.0 and score.importance == 0.6
    assert score.cosine == pytest.approx(1.0)
    assert score.base == pytest.approx(0.25 + 0.35 * 0.6 + 0.25)
    assert score.final == pytest.approx(0.7 * score.base + 0.3)
