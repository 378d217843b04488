"""The hybrid scoring mode (backend/memory/hybrid.py; docs/memory-model.md, "Hybrid mode")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.memory.hybrid import (
    CorpusStats,
    bm25,
    cjk_share,
    cosine_trust,
    fold,
    lexical_relevance,
    lexical_tokens,
    memory_tokens,
    relevance_evidence,
    score_hybrid,
)
from backend.memory.restatements import collapse_restatements, fact_similarities, fact_similarity
from backend.memory.types import Emotion, HybridWeights, ScoreBreakdown

from .helpers import NOW, memory, unit


@pytest.mark.parametrize(
    ("word", "folded"),
    [
        ("memories", "memory"),
        ("called", "call"),
        ("call", "call"),
        ("invite", "invit"),
        ("invites", "invit"),
        ("invited", "invit"),
        ("inviting", "invit"),
        ("stopped", "stop"),
        ("dumplings", "dumpl"),
        ("dumpling", "dumpl"),
        ("needed", "need"),
        ("glass", "glass"),
        ("cat", "cat"),
        ("café", "café"),  # not ASCII: untouched
    ],
)
def test_fold(word: str, folded: str) -> None:
    assert fold(word) == folded


def test_lexical_tokens_fold_english_and_add_cjk_characters() -> None:
    tokens = lexical_tokens("The user's cat Dumplings", ("Pets",))
    assert {"user", "cat", "dumpl", "pet"} <= tokens
    assert "the" not in tokens  # stop words stay out, as in keywords.py
    chinese = lexical_tokens("我弟最近工作压力好大")
    assert {"工作", "压力", "弟", "工"} <= chinese  # bigrams and single characters
    assert "我" not in chinese  # a stop character alone is dropped
    assert {"弟"} <= lexical_tokens("用户的弟弟在深圳")  # 我弟 and 弟弟 now meet


def test_cjk_share_and_cosine_trust() -> None:
    assert cjk_share("hello world") == 0.0
    assert cjk_share("你好") == 1.0
    assert cjk_share("Priya的女儿") == pytest.approx(3 / 8)
    assert cjk_share("") == 0.0
    assert cosine_trust("你好", HybridWeights(cjk_cosine=0.0)) == 0.0
    assert cosine_trust("你好", HybridWeights(cjk_cosine=1.0)) == 1.0
    assert cosine_trust("hello", HybridWeights(cjk_cosine=0.0)) == 1.0


def test_bm25_prefers_rare_tokens_and_short_documents() -> None:
    docs = [frozenset({"cat", "user"}), frozenset({"dog", "user"}), frozenset({"user"})]
    stats = CorpusStats.from_token_sets(docs)
    assert stats.n_docs == 3 and stats.avg_len == pytest.approx(5 / 3)
    assert stats.idf("cat") > stats.idf("user") > 0
    assert stats.idf("unseen") == stats.max_idf
    assert bm25({"cat"}, docs[0], stats) > bm25({"user"}, docs[0], stats) > 0
    assert bm25({"zebra"}, docs[0], stats) == 0.0
    long_doc = frozenset({"cat", "a1", "a2", "a3", "a4", "a5"})
    assert bm25({"cat"}, docs[0], stats) > bm25({"cat"}, long_doc, stats)
    # The channel is BM25 / (scale * max idf), clipped to [0, 1].
    value = lexical_relevance({"cat"}, docs[0], stats, HybridWeights(relevance_scale=3.0))
    assert value == pytest.approx(bm25({"cat"}, docs[0], stats) / (3 * stats.max_idf))
    assert lexical_relevance({"cat"}, docs[0], stats, HybridWeights(relevance_scale=1e-6)) == 1


def test_cosine_decides_when_nothing_else_differs() -> None:
    query = unit(1, 0, 0)
    pool = [
        memory("far", "alpha", vector=unit(0, 1, 0)),
        memory("near", "bravo", vector=unit(1, 0.1, 0)),
    ]
    ranked = score_hybrid(pool, now=NOW, query_text="zzz", query_vector=query)
    assert [item.memory.id for item in ranked] == ["near", "far"]
    near = ranked[0].score
    w = HybridWeights()
    assert near.cosine == pytest.approx(float(unit(1, 0.1, 0) @ query))
    assert near.base == pytest.approx(w.importance * 0.5)
    assert near.final == pytest.approx(near.base + w.cosine * near.cosine)  # weights sum to 1


def test_a_rare_shared_word_outranks_a_slightly_better_cosine() -> None:
    query = unit(1, 0, 0)
    pool = [
        memory("named", "The user's cat is called Dumpling", vector=unit(1, 0.5, 0)),
        memory("vague", "The user likes animals in general", vector=unit(1, 0.4, 0)),
        *[memory(f"x{i}", f"The user filler sentence number {i}") for i in range(8)],
    ]
    ranked = score_hybrid(pool, now=NOW, query_text="how is Dumpling doing", query_vector=query)
    assert ranked[0].memory.id == "named"
    assert ranked[0].score.relevance > 0 and ranked[1].score.relevance == 0


def test_chinese_query_moves_the_cosine_weight_to_the_lexical_channel() -> None:
    # Under the local embedder two unrelated Chinese texts look alike; the match on 外公
    # must win over the higher cosine.
    query = unit(1, 0, 0)
    pool = [
        memory("match", "用户小时候是外公教她下象棋的", vector=unit(1, 0.6, 0)),
        memory("cosine", "用户喜欢喝奶茶", vector=unit(1, 0.05, 0)),
    ]
    ranked = score_hybrid(pool, now=NOW, query_text="我今天特别想外公", query_vector=query)
    assert [item.memory.id for item in ranked] == ["match", "cosine"]
    # With full trust in the cosine (a multilingual embedder) the cosine decides again.
    trusting = score_hybrid(
        pool, now=NOW, query_text="我今天特别想外公", query_vector=query,
        weights=HybridWeights(cjk_cosine=1.0, relevance=0.01),
    )  # fmt: skip
    assert trusting[0].memory.id == "cosine"


def test_missing_cosine_is_none_and_its_weight_goes_to_relevance() -> None:
    pool = [memory("novec", "The user's cat is Dumpling"), memory("other", "nothing")]
    ranked = score_hybrid(pool, now=NOW, query_text="Dumpling", query_vector=unit(1, 0))
    top = ranked[0]
    assert top.memory.id == "novec" and top.score.cosine is None
    w = HybridWeights()
    expected = ((w.relevance + w.cosine) * top.score.relevance + w.importance * 0.5) / 1.0
    assert top.score.final == pytest.approx(expected)


def test_scores_are_in_range_sorted_and_ties_go_by_id() -> None:
    pool = [memory(i, "same words here", vector=unit(1, 1)) for i in ("b", "a", "c")]
    ranked = score_hybrid(pool, now=NOW, query_text="words", query_vector=unit(1, 1))
    assert [item.memory.id for item in ranked] == ["a", "b", "c"]
    for item in ranked:
        s = item.score
        for value in (s.recency, s.importance, s.relevance, s.emotion, s.base, s.final):
            assert 0.0 <= value <= 1.0
    assert score_hybrid([], now=NOW, query_text="x") == []


def test_emotion_and_recency_channels_count_only_when_weighted() -> None:
    sad = memory("sad", "x", emotion=Emotion("sadness", 0.9), vector=unit(1, 0))
    plain = memory("plain", "x", vector=unit(1, 0))
    off = score_hybrid([sad, plain], now=NOW, query_text="q", query_vector=unit(1, 0))
    assert off[0].score.final == off[1].score.final  # emotion weight 0 by default
    on = score_hybrid(
        [sad, plain], now=NOW, query_text="q", query_vector=unit(1, 0),
        target_emotion="sadness", weights=HybridWeights(emotion=0.2),
    )  # fmt: skip
    assert on[0].memory.id == "sad" and on[0].score.emotion > 0
    old = memory("old", "x", days_ago=60, vector=unit(1, 0))
    new = memory("new", "x", days_ago=0, vector=unit(1, 0))
    ranked = score_hybrid(
        [old, new], now=NOW, query_text="q", query_vector=unit(1, 0),
        weights=HybridWeights(recency=0.2),
    )  # fmt: skip
    assert ranked[0].memory.id == "new" and ranked[0].score.recency == pytest.approx(1.0)


def test_relevance_evidence_mixes_cosine_and_lexical_only() -> None:
    w = HybridWeights()
    score = ScoreBreakdown(0.0, 1.0, 0.5, 1.0, 0.4, 0.0, 0.0)
    expected = (w.cosine * 0.4 + w.relevance * 0.5) / (w.cosine + w.relevance)
    assert relevance_evidence(score, 1.0, w) == pytest.approx(expected)
    assert relevance_evidence(score, 0.0, w) == pytest.approx(0.5)  # all weight on lexical
    missing = ScoreBreakdown(0.0, 1.0, 0.5, 1.0, None, 0.0, 0.0)
    assert relevance_evidence(missing, 1.0, w) == pytest.approx(0.5)


def test_fact_similarity_sees_paraphrases_by_vector_or_by_keywords() -> None:
    pool = [
        memory("a", "The user goes bouldering twice a week", vector=unit(1, 0.1, 0),
               keywords=("bouldering", "climbing")),
        memory("b", "Climbing at the gym is how the user unwinds", vector=unit(1, 0.2, 0)),
        memory("c", "The user loves that sport", vector=unit(0, 0, 1),
               keywords=("bouldering", "climbing")),
        memory("d", "The user's mother runs a tea shop", vector=unit(0, 1, 0)),
    ]  # fmt: skip
    sim = fact_similarity(pool)
    assert sim.shape == (4, 4) and np.allclose(np.diag(sim), 1.0)
    assert np.allclose(sim, sim.T)
    assert sim[0, 1] > 0.9  # near vectors
    assert sim[0, 2] > 0.6  # same stored keywords, unrelated vectors
    assert sim[0, 3] < 0.3 and sim[2, 3] < 0.3


def test_fact_similarity_ignores_the_cosine_of_two_cjk_texts_unless_trusted() -> None:
    pool = [
        memory("a", "用户喜欢喝奶茶", vector=unit(1, 0.1)),
        memory("b", "用户的弟弟在深圳", vector=unit(1, 0.12)),
    ]
    assert fact_similarity(pool)[0, 1] < 0.5
    assert fact_similarity(pool, weights=HybridWeights(cjk_cosine=1.0))[0, 1] > 0.9


def test_fact_similarity_survives_missing_and_bad_vectors() -> None:
    pool = [
        memory("a", "alpha words", vector=unit(1, 0)),
        memory("b", "beta words"),
        memory("c", "gamma words", vector=np.array([np.nan, 1.0], dtype=np.float32)),
        memory("d", "delta words", vector=unit(1, 0, 0)),  # another dimension
    ]
    sim = fact_similarity(pool)
    assert np.isfinite(sim).all() and sim.shape == (4, 4)
    assert fact_similarity([]).shape == (0, 0)


def test_neighbours_on_one_subject_are_not_one_fact_unless_their_words_say_so() -> None:
    """Two turns about one pottery class sit at a middling cosine; only the lexical
    channels, or a near-identical vector, make a restatement (LoCoMo: the collapse at
    cosine 0.6 dropped 333 evidence turns; docs/benchmarks.md)."""
    pool = [
        memory("signup", "Mel signed up for a pottery class", vector=unit(1, 0.9, 0)),
        memory("plate", "Mel made a plate in her pottery class", vector=unit(1, 0.3, 0.2)),
        memory("again", "Mel signed up for a pottery class", vector=unit(0.2, 1, 0)),
        memory("twin", "The class is on Tuesdays", vector=unit(1, 0.9, 0.01)),
    ]
    full, same = fact_similarities(pool, cosine_min=0.92)
    assert np.allclose(full, fact_similarity(pool))  # GIST keeps every channel
    assert 0.6 < full[0, 1] < 0.92 and same[0, 1] < 0.6  # neighbours: kept apart
    assert same[0, 2] > 0.9  # the same words: one fact, whatever the vectors
    assert same[0, 3] > 0.99  # a near-identical vector still is one
    assert collapse_restatements(same, 0.6) == [0, 1]
    assert np.allclose(fact_similarities(pool, cosine_min=0.0)[1], full)


def test_collapse_restatements_keeps_the_best_of_each_fact() -> None:
    sim = np.array(
        [
            [1.0, 0.8, 0.1, 0.7],
            [0.8, 1.0, 0.2, 0.1],
            [0.1, 0.2, 1.0, 0.1],
            [0.7, 0.1, 0.1, 1.0],
        ]
    )
    assert collapse_restatements(sim, 0.6) == [0, 2]
    assert collapse_restatements(sim, 0.75) == [0, 2, 3]
    assert collapse_restatements(sim, 1.5) == [0, 1, 2, 3]
    assert collapse_restatements(sim, 1.5, limit=2) == [0, 1]


def test_memory_tokens_are_cached_and_stable() -> None:
    m = memory("a", "The user's sister Mei lives in Osaka", keywords=("sister", "Osaka"))
    assert memory_tokens(m) == memory_tokens(m) == lexical_tokens(m.content, m.keywords)
    assert {"sister", "mei", "osaka", "liv"} <= memory_tokens(m)


def test_idf_is_never_negative() -> None:
    stats = CorpusStats(n_docs=2, avg_len=1.0, doc_freq={"x": 5})  # df above n is clamped
    assert stats.idf("x") >= 0 and math.isfinite(stats.idf("x"))


# --- explanation: each channel's weighted share -------------------------------------


def test_explain_hybrid_shares_sum_to_final_and_mark_unused_channels() -> None:
    from backend.memory.explain import explain_hybrid

    pool = [
        memory("a", "The user's dog Pepper likes the beach", importance=0.8, vector=unit(1, 1)),
        memory("b", "The user plays the cello", importance=0.6, vector=unit(1, 0), days_ago=3),
    ]
    ranked = score_hybrid(pool, now=NOW, query_text="dog Pepper beach", query_vector=unit(1, 1))
    w = HybridWeights()
    for item in ranked:
        s = item.score
        ex = explain_hybrid(s, cosine_trust("dog Pepper beach"), w)
        assert ex.mode == "hybrid" and ex.unused == ("recency", "emotion")
        shares = {c.channel: c.share for c in ex.channels}
        assert shares["recency"] is None and shares["emotion"] is None
        assert shares["cosine"] == pytest.approx(0.65 * max(0.0, s.cosine or 0.0))
        assert shares["relevance"] == pytest.approx(0.2 * s.relevance)
        assert shares["importance"] == pytest.approx(0.15 * s.importance)
        used = [v for v in shares.values() if v is not None]
        assert sum(used) + ex.remainder == pytest.approx(s.final)
        assert ex.remainder == pytest.approx(0.0, abs=1e-12)
    # The raw recency is still computed (shown, not weighted) and changes nothing.
    assert next(i for i in ranked if i.memory.id == "a").score.recency == pytest.approx(1.0)
    b = next(i for i in ranked if i.memory.id == "b")
    assert b.score.recency == pytest.approx(0.5 ** (3 / 7))


def test_explain_hybrid_missing_cosine_and_untrusted_cjk_cosine() -> None:
    from backend.memory.explain import explain_hybrid

    no_vector = memory("n", "我的狗叫胡椒", importance=0.5)
    with_vector = memory("v", "我的狗叫胡椒", importance=0.5, vector=unit(1, 0))
    ranked = score_hybrid(
        [no_vector, with_vector], now=NOW, query_text="我的狗", query_vector=unit(1, 0)
    )
    trust = cosine_trust("我的狗")
    assert trust == pytest.approx(0.0)
    for item in ranked:
        ex = explain_hybrid(item.score, trust)
        cos = next(c for c in ex.channels if c.channel == "cosine")
        rel = next(c for c in ex.channels if c.channel == "relevance")
        # All the cosine weight counts on the lexical channel (missing or untrusted).
        assert rel.weight == pytest.approx(0.85)
        if item.memory.id == "n":
            assert cos.missing and not cos.unused and cos.share is None
        else:
            assert cos.unused and cos.value == pytest.approx(1.0)
        used = [c.share for c in ex.channels if c.share is not None]
        assert sum(used) + ex.remainder == pytest.approx(item.score.final)


def test_explain_hybrid_weighs_recency_when_configured() -> None:
    from backend.memory.explain import explain_hybrid

    w = HybridWeights(recency=0.2)
    ranked = score_hybrid(
        [memory("a", "x", days_ago=7, vector=unit(1, 0))],
        now=NOW, query_text="q", query_vector=unit(1, 0), weights=w,
    )  # fmt: skip
    ex = explain_hybrid(ranked[0].score, 1.0, w)
    assert ex.unused == ("emotion",)
    assert ex.share("recency") == pytest.approx(0.2 / 1.2 * 0.5)
    used = [c.share for c in ex.channels if c.share is not None]
    assert sum(used) == pytest.approx(ranked[0].score.final)


def test_with_two_part_vectors_a_pair_across_scripts_moves_the_lexical_weight_to_cosine() -> None:
    from backend.memory.explain import explain_hybrid
    from backend.memory.vector_parts import VectorParts

    # Two-part vectors (split at 2): a Chinese message, an English note whose second
    # (multilingual) part agrees with it, and a Chinese note sharing a word but little else.
    def joined(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.concatenate([first, second]).astype(np.float32)

    query = joined(unit(1, 0), unit(1, 0))
    pool = [
        memory(
            "en", "Dumpling only eats kidney-care food.", vector=joined(unit(0, 1), unit(1, 0.4))
        ),
        memory("zh", "用户最近吃东西很少在意。", vector=joined(unit(1, 0), unit(0.2, 1))),
    ]
    text = "饺子最近不太爱吃东西"
    w = HybridWeights(cjk_cosine=1.0)
    parts = VectorParts(2)
    ranked = score_hybrid(pool, now=NOW, query_text=text, query_vector=query, weights=w,
                          parts=parts)  # fmt: skip
    by_id = {item.memory.id: item.score for item in ranked}
    en, zh = by_id["en"], by_id["zh"]
    assert en.crossed == pytest.approx(1.0) and zh.crossed == pytest.approx(0.0)
    assert en.cosine == pytest.approx(float(unit(1, 0.4) @ unit(1, 0)))  # the second part
    # The English note: its whole cosine + lexical weight on the cosine.
    assert en.final == pytest.approx((0.85 * en.cosine + 0.15 * en.importance) / 1.0)
    assert relevance_evidence(en, 1.0, w) == pytest.approx(en.cosine)
    assert ranked[0].memory.id == "en"
    for score in (en, zh):  # the explanation still adds up
        ex = explain_hybrid(score, 1.0, w)
        used = [c.share for c in ex.channels if c.share is not None]
        assert sum(used) + ex.remainder == pytest.approx(score.final)
    # Without two parts nothing crosses: an English model's cosine of such a pair is noise.
    plain = score_hybrid(pool, now=NOW, query_text=text, query_vector=query, weights=w)
    assert all(item.score.crossed == 0.0 for item in plain)


def test_fact_similarity_reads_two_part_vectors_by_script() -> None:
    from backend.memory.vector_parts import VectorParts

    def joined(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.concatenate([first, second]).astype(np.float32)

    notes = [
        memory(
            "en",
            "The user owns an orange tabby called Dumpling.",
            vector=joined(unit(1, 0), unit(1, 0)),
        ),
        memory("zh", "用户养了一只叫饺子的橘猫。", vector=joined(unit(0, 1), unit(1, 0.1))),
        memory("zh2", "用户喜欢喝奶茶。", vector=joined(unit(0, 1), unit(0, 1))),
    ]
    similarity, _ = fact_similarities(notes, parts=VectorParts(2))
    # One fact in two languages: the multilingual part's cosine, trusted for CJK text.
    assert similarity[0, 1] == pytest.approx(float(unit(1, 0.1) @ unit(1, 0)))
    # Two Chinese notes whose English-model parts agree are not alike by that part.
    assert similarity[1, 2] == pytest.approx(float(unit(1, 0.1) @ unit(0, 1)))
    plain, _ = fact_similarities(notes)
    assert plain[1, 2] < 0.5  # untrusted (cjk_cosine 0): only the shared 用户 characters
