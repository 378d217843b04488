"""The reranking stage (backend.memory.rerank) with a scripted reranker: how it blends,
where it runs in the hybrid pipeline, what it leaves alone, and how it is explained."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from backend.memory.explain import RERANK, explain_hybrid
from backend.memory.hybrid import cjk_share, cosine_trust
from backend.memory.rerank import MIN_PAIR_WEIGHT, rerank
from backend.memory.retrieve import (
    DIVERSITY_WINDOW,
    Retrieval,
    diversify,
    diversify_around,
    retrieve,
)
from backend.memory.types import Memory, RetrievalPolicy, ScoreBreakdown, ScoredMemory
from tests.memory.helpers import NOW, memory, unit


class ScriptedReranker:
    """A reranker that says ``relevance[content]`` (``default`` otherwise) and records
    every call."""

    model = "scripted"

    def __init__(self, relevance: Mapping[str, float], default: float = 0.0) -> None:
        self.relevance = dict(relevance)
        self.default = default
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, passages: Sequence[str]) -> Sequence[float] | None:
        self.calls.append((query, list(passages)))
        return [self.relevance.get(p, self.default) for p in passages]


class DownReranker(ScriptedReranker):
    def score(self, query: str, passages: Sequence[str]) -> Sequence[float] | None:
        super().score(query, passages)
        return None


def scored(id: str, final: float, content: str | None = None) -> ScoredMemory:
    score = ScoreBreakdown(0.0, 0.5, 0.2, 0.0, 0.3, final, final)
    return ScoredMemory(memory(id, content or f"memory {id}"), score)


def ids(items: Sequence[ScoredMemory]) -> list[str]:
    return [item.memory.id for item in items]


RANKED = [scored("a", 0.9), scored("b", 0.8), scored("c", 0.7), scored("d", 0.6)]


def test_weight_one_orders_the_top_n_by_the_model_alone() -> None:
    model = ScriptedReranker({"memory c": 0.9, "memory b": 0.5, "memory a": 0.1})
    result = rerank(RANKED, "a question", model, n=3, weight=1.0)
    assert ids(result.ranked) == ["c", "b", "a", "d"]
    assert result.skipped is None and result.scored == 3
    assert model.calls == [("a question", ["memory a", "memory b", "memory c"])]
    c = result.ranked[0].score
    assert (c.rerank, c.final) == (pytest.approx(0.9), pytest.approx(0.9))
    # Below the top n nothing is read: d's score is scaled away, never passing a read one.
    d = result.ranked[-1].score
    assert d.rerank is None and d.final == pytest.approx(0.0)


def test_the_blend_is_a_weighted_mean_of_the_two_scores() -> None:
    model = ScriptedReranker({"memory b": 1.0})
    result = rerank(RANKED, "a question", model, n=2, weight=0.5)
    by_id = {item.memory.id: item.score for item in result.ranked}
    assert by_id["b"].final == pytest.approx(0.5 * 0.8 + 0.5 * 1.0)
    assert by_id["a"].final == pytest.approx(0.5 * 0.9 + 0.5 * 0.0)
    assert by_id["c"].final == pytest.approx(0.5 * 0.7)  # unread: scaled
    assert ids(result.ranked) == ["b", "a", "c", "d"]
    assert result.weights == {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}


def test_no_unread_memory_passes_a_read_one() -> None:
    # The model rejects the whole top 2; the unread third still stays behind them.
    model = ScriptedReranker({}, default=0.0)
    result = rerank(RANKED, "a question", model, n=2, weight=0.7)
    assert ids(result.ranked) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("n", "weight", "model", "why"),
    [
        (0, 0.7, ScriptedReranker({}), "off"),
        (5, 0.0, ScriptedReranker({}), "off"),
        (5, 0.7, None, "no reranker"),
        (5, 0.7, DownReranker({}), "reranker unavailable"),
    ],
)
def test_a_skipped_stage_leaves_the_ranking_as_it_was(
    n: int, weight: float, model: ScriptedReranker | None, why: str
) -> None:
    result = rerank(RANKED, "a question", model, n=n, weight=weight)
    assert result.skipped == why
    assert [item.score for item in result.ranked] == [item.score for item in RANKED]
    assert result.weights == {}
    if why == "off":
        assert model is not None and model.calls == []


def test_a_chinese_message_skips_the_model() -> None:
    model = ScriptedReranker({"memory c": 1.0})
    result = rerank(RANKED, "我的狗叫什么名字？", model, n=4, weight=1.0)
    assert result.skipped == "non-English message" and model.calls == []
    assert ids(result.ranked) == ids(RANKED)


def test_a_chinese_memory_is_not_sent_and_counts_as_unvouched() -> None:
    # The model cannot read the Chinese note: its share of the weight is no vouching, as
    # for a memory below the top n, so the model's silence does not lift it over an
    # English note it read (before, it kept its whole hybrid score and passed them all).
    ranked = [
        scored("en", 0.8, "The user's dog is called Pepper"),
        scored("zh", 0.9, "用户的狗叫胡椒"),
        scored("below", 0.85, "The user likes tea"),
    ]
    model = ScriptedReranker({}, default=0.5)
    result = rerank(ranked, "what is my dog called", model, n=2, weight=0.5)
    assert model.calls == [("what is my dog called", ["The user's dog is called Pepper"])]
    by_id = {item.memory.id: item.score for item in result.ranked}
    assert by_id["zh"].final == pytest.approx(0.5 * 0.9) and by_id["zh"].rerank is None
    assert by_id["en"].final == pytest.approx(0.5 * 0.8 + 0.5 * 0.5)
    assert by_id["below"].final == pytest.approx(0.5 * 0.85)
    assert ids(result.ranked) == ["en", "zh", "below"]
    assert result.weights["zh"] == 0.0 and result.query_weight == pytest.approx(0.5)


def test_a_partly_chinese_memory_keeps_the_model_s_word_for_its_english_share() -> None:
    # 2 of its 13 letters are CJK: the model's verdict counts for 11/13 of the query's weight.
    ranked = [scored("mixed", 0.6, "Dumpling 饺子 cat")]
    model = ScriptedReranker({}, default=1.0)
    result = rerank(ranked, "my cat", model, n=1, weight=0.3)
    share = 1.0 - cjk_share("Dumpling 饺子 cat")
    assert result.ranked[0].score.final == pytest.approx(0.7 * 0.6 + 0.3 * share * 1.0)


def test_a_mixed_message_weighs_the_model_less() -> None:
    model = ScriptedReranker({"memory a": 1.0})
    english = rerank(RANKED, "dog name", model, n=1, weight=0.8)
    mixed = rerank(RANKED, "dog 名字", model, n=1, weight=0.8)  # 2 of 5 letters CJK
    assert english.weights["a"] == pytest.approx(0.8)
    assert mixed.weights["a"] == pytest.approx(0.8 * 3 / 5)
    assert mixed.weights["a"] >= MIN_PAIR_WEIGHT


# ---- in the hybrid pipeline ---------------------------------------------------------


def pool() -> list[Memory]:
    """Ten memories of one cosine neighbourhood; the last is what the message asks for."""
    out = [
        memory(f"m{i}", f"The user went hiking on trail number {i}", vector=unit(1, 0.1 * i))
        for i in range(9)
    ]
    out.append(memory("asked", "The user's sister lives in Lyon", vector=unit(0.2, 1)))
    return out


def run(model: ScriptedReranker | None, **policy: object) -> tuple[list[str], Retrieval]:
    result = retrieve(
        pool(),
        now=NOW,
        query_text="where does my sister live",
        query_vector=unit(1, 0),
        target_emotion=None,
        policy=RetrievalPolicy(mode="hybrid", **policy),  # type: ignore[arg-type]
        reranker=model,
    )
    return [item.memory.id for item in result.items], result


def test_the_stage_runs_before_the_diversity_window_and_gist() -> None:
    # k=1: only DIVERSITY_WINDOW candidates enter the collapse and GIST. "asked" is ranked
    # last by the hybrid score; the model lifts it over the window's edge and to the top.
    model = ScriptedReranker({"The user's sister lives in Lyon": 0.99}, default=0.01)
    without, _ = run(None, k=1, rerank_n=10)
    assert without != ["asked"]
    got, result = run(model, k=1, rerank_n=10, rerank_weight=0.9)
    assert got == ["asked"]
    assert len(model.calls) == 1 and len(model.calls[0][1]) == 10 > DIVERSITY_WINDOW
    assert result.reranked == 10 and result.rerank_skipped is None


def test_rerank_n_zero_turns_the_stage_off() -> None:
    model = ScriptedReranker({"The user's sister lives in Lyon": 0.99})
    plain, _ = run(None, k=3)
    got, result = run(model, k=3, rerank_n=0)
    assert got == plain and model.calls == []
    assert result.rerank_skipped == "off" and result.reranked == 0
    for explanation in result.explanations.values():
        assert RERANK not in [c.channel for c in explanation.channels]


def test_the_explanation_shows_the_rerank_channel_and_still_adds_up() -> None:
    model = ScriptedReranker({"The user's sister lives in Lyon": 0.9}, default=0.2)
    _, result = run(model, k=4, rerank_n=5, rerank_weight=0.6)
    assert result.explanations
    for item in result.items:
        explanation = result.explanations[item.memory.id]
        channels = {c.channel: c for c in explanation.channels}
        assert RERANK in channels
        total = sum(c.share for c in explanation.channels if c.share is not None)
        assert total + explanation.remainder == pytest.approx(item.score.final)
        assert abs(explanation.remainder) < 1e-9
        if item.score.rerank is not None:
            assert channels[RERANK].share == pytest.approx(0.6 * item.score.rerank)
            assert channels[RERANK].weight == pytest.approx(0.6)
        else:  # below the top n: listed as missing
            assert channels[RERANK].missing and channels[RERANK].share is None


def test_explain_hybrid_scales_the_other_channels_by_one_minus_w() -> None:
    score = ScoreBreakdown(0.0, 0.8, 0.5, 0.0, 0.6, 0.0, 0.0, rerank=0.9)
    trust = cosine_trust("a question")
    plain = explain_hybrid(score, trust)
    blended = explain_hybrid(score, trust, rerank_weight=0.25)
    assert RERANK not in [c.channel for c in plain.channels]
    for before, after in zip(plain.channels, blended.channels, strict=False):
        assert after.weight == pytest.approx(0.75 * before.weight)
    assert blended.share(RERANK) == pytest.approx(0.25 * 0.9)


def near_pair() -> tuple[list[ScoredMemory], np.ndarray]:
    """a and b near each other (two turns of one conversation: cosine 0.86, not one fact),
    c and d apart."""
    vectors = {
        "a": unit(1, 0, 0), "b": unit(1, 0.6, 0), "c": unit(0, 1, 0), "d": unit(0, 0, 1),
    }  # fmt: skip
    finals = {"a": 0.9, "b": 0.85, "c": 0.5, "d": 0.45}
    texts = {
        "a": "Caroline went hiking on Sunday", "b": "Melanie painted a lake at sunrise",
        "c": "The user's cat is called Dumpling", "d": "The user plays chess on Fridays",
    }  # fmt: skip
    ranked = [
        ScoredMemory(memory(i, texts[i], vector=v), ScoreBreakdown(0, 0.5, 0.2, 0, 0.3, f, f))
        for (i, v), f in zip(vectors.items(), finals.values(), strict=True)
    ]
    matrix = np.stack(list(vectors.values()))
    return ranked, np.clip(1.0 - matrix @ matrix.T, 0.0, 2.0).astype(np.float32)


def test_gist_keeps_what_the_model_vouched_for_and_diversifies_the_rest() -> None:
    ranked, distances = near_pair()
    # Diversity alone drops b for being near a.
    plain = diversify(ranked, k=2, lam=5.0, distances=distances)
    assert ids(plain.items) == ["a", "c"]
    # The model called b relevant: it stays, and GIST picks the other slot.
    kept = diversify_around(ranked, [1], k=2, lam=5.0, distances=distances)
    assert ids(kept.items) == ["a", "b"]
    three = diversify_around(ranked, [1], k=3, lam=5.0, distances=distances)
    assert ids(three.items) == ["a", "b", "c"] and three.degraded is None
    # Nothing vouched for: GIST as ever. More vouched for than k: the best k, in order.
    assert ids(diversify_around(ranked, [], k=2, lam=5.0, distances=distances).items) == [
        "a", "c",
    ]  # fmt: skip
    assert ids(diversify_around(ranked, [3, 1, 2], k=2, lam=5.0, distances=distances).items) == [
        "b", "c",
    ]  # fmt: skip


def test_the_pipeline_keeps_memories_the_model_calls_relevant_through_gist() -> None:
    ranked, _ = near_pair()
    pool = [item.memory for item in ranked]
    model = ScriptedReranker({"Melanie painted a lake at sunrise": 0.9}, default=0.0)

    def got(rerank_keep: float) -> list[str]:
        policy = RetrievalPolicy(
            k=2, lam=5.0, mode="hybrid", rerank_n=4, rerank_weight=0.06, rerank_keep=rerank_keep
        )
        result = retrieve(
            pool, now=NOW, query_text="what did they do", query_vector=unit(1, 0, 0),
            target_emotion=None, policy=policy, reranker=model,
        )  # fmt: skip
        return sorted(ids(result.items))

    # a is the best match; GIST alone (above 1: nothing is kept) drops b for being near it
    assert got(2.0) == ["a", "c"]
    # the model vouched for b: it stays, and the other slot goes to the best of the rest
    assert got(0.2) == ["a", "b"]
