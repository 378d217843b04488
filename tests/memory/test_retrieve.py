from __future__ import annotations

import numpy as np

from backend.memory.retrieve import diversify, retrieve
from backend.memory.scoring import score_pool
from backend.memory.types import RetrievalPolicy

from .helpers import NOW, memory, unit


def paraphrase_pool() -> list:
    """Five near-paraphrases of one important fact, plus three distinct (orthogonal) facts."""
    rng = np.random.default_rng(7)
    axes = np.eye(16)
    pool = []
    for i in range(5):
        v = axes[0] + 0.02 * rng.normal(size=16)
        pool.append(memory(f"p{i}", f"paraphrase {i}", importance=0.9, vector=unit(*v)))
    for i in range(3):
        v = axes[i + 1] + 0.02 * rng.normal(size=16)
        pool.append(memory(f"o{i}", f"other {i}", importance=0.5, vector=unit(*v)))
    return pool


def test_gist_keeps_one_paraphrase_and_the_other_facts() -> None:
    result = retrieve(
        paraphrase_pool(),
        now=NOW,
        query_text="",
        query_vector=None,
        target_emotion=None,
        policy=RetrievalPolicy(k=4, lam=1.0),
    )
    ids = [item.memory.id for item in result.items]
    assert sum(i.startswith("p") for i in ids) == 1
    assert {"o0", "o1", "o2"} <= set(ids)
    assert result.gist is not None and result.degraded is None


def test_result_is_in_score_order() -> None:
    result = retrieve(
        paraphrase_pool(),
        now=NOW,
        query_text="",
        query_vector=None,
        target_emotion=None,
        policy=RetrievalPolicy(k=4, lam=1.0),
    )
    finals = [item.score.final for item in result.items]
    assert finals == sorted(finals, reverse=True)


def test_lambda_zero_is_plain_top_k() -> None:
    pool = paraphrase_pool()
    result = retrieve(
        pool,
        now=NOW,
        query_text="",
        query_vector=None,
        target_emotion=None,
        policy=RetrievalPolicy(k=4, lam=0.0),
    )
    assert [item.memory.id for item in result.items] == ["p0", "p1", "p2", "p3"]


def test_superseded_memories_are_never_activated() -> None:
    pool = [
        *paraphrase_pool(),
        memory("old", importance=1.0, vector=unit(1, *[0] * 15), superseded_by="o0"),
    ]
    result = retrieve(pool, now=NOW, query_text="", query_vector=None, target_emotion=None)
    assert "old" not in {item.memory.id for item in result.items}


def test_rows_without_vectors_are_admitted_by_the_fill() -> None:
    pool = [*paraphrase_pool(), memory("novec", importance=0.6)]
    result = retrieve(
        pool,
        now=NOW,
        query_text="",
        query_vector=None,
        target_emotion=None,
        policy=RetrievalPolicy(k=6, lam=2.0),
    )
    ids = [item.memory.id for item in result.items]
    assert "novec" in ids
    assert len(ids) == 5  # paraphrases are refused by the fill: fewer than k is a signal


def test_degrades_to_top_k_with_fewer_than_two_vectors() -> None:
    pool = [
        memory("a", importance=0.9, vector=unit(1, 0)),
        memory("b", importance=0.5),
        memory("c"),
    ]
    ranked = score_pool(pool, now=NOW, query_text="", query_vector=None, target_emotion=None)
    result = diversify(ranked, k=2, lam=0.5)
    assert result.degraded == "fewer than 2 vectors"
    assert [item.memory.id for item in result.items] == ["a", "b"]


def test_degrades_on_ragged_dimensions() -> None:
    pool = [memory("a", vector=unit(1, 0)), memory("b", vector=unit(1, 0, 0))]
    ranked = score_pool(pool, now=NOW, query_text="", query_vector=None, target_emotion=None)
    assert diversify(ranked, k=2, lam=0.5).degraded == "ragged vector dimensions"


def test_empty_pool_and_k_zero() -> None:
    assert retrieve([], now=NOW, query_text="x", query_vector=None, target_emotion=None).items == ()
    ranked = score_pool(
        paraphrase_pool(), now=NOW, query_text="", query_vector=None, target_emotion=None
    )
    assert diversify(ranked, k=0, lam=0.5).items == ()
