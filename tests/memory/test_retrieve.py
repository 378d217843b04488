from __future__ import annotations

import dataclasses
import functools

import numpy as np

from backend.memory.dietary import dietary_kind
from backend.memory.hybrid import score_hybrid
from backend.memory.retrieve import (
    KEEP_IN_MIND,
    OWN_QUESTION_KEEP,
    Retrieval,
    diversify,
    held_below_floor,
    retrieve,
)
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


# --- hybrid mode ------------------------------------------------------------------------

HYBRID = RetrievalPolicy(k=4, mode="hybrid")


def test_hybrid_keeps_one_paraphrase_and_the_other_facts() -> None:
    result = retrieve(
        paraphrase_pool(), now=NOW, query_text="", query_vector=unit(*np.eye(16)[0]),
        target_emotion=None, policy=HYBRID,
    )  # fmt: skip
    ids = [item.memory.id for item in result.items]
    assert sum(i.startswith("p") for i in ids) == 1
    assert {"o0", "o1", "o2"} <= set(ids)
    assert len(result.collapsed) == 4 and all(i.startswith("p") for i in result.collapsed)
    finals = [item.score.final for item in result.items]
    assert finals == sorted(finals, reverse=True)


def test_hybrid_without_collapse_or_gist_is_plain_top_k() -> None:
    result = retrieve(
        paraphrase_pool(), now=NOW, query_text="", query_vector=unit(*np.eye(16)[0]),
        target_emotion=None, policy=RetrievalPolicy(k=4, mode="hybrid", same_fact=2.0, lam=0),
    )  # fmt: skip
    top = score_hybrid(paraphrase_pool(), now=NOW, query_text="", query_vector=np.eye(16)[0])
    assert [item.memory.id for item in result.items] == [i.memory.id for i in top[:4]]
    assert all(item.memory.id.startswith("p") for item in result.items)
    assert result.collapsed == ()


def test_hybrid_min_relevance_drops_what_the_message_does_not_speak_for() -> None:
    pool = [
        memory("hit", "The user's cat is called Dumpling", vector=unit(1, 0), importance=0.5),
        memory("vip", "The user has an important unrelated fact", vector=unit(0, 1),
               importance=1.0),
    ]  # fmt: skip
    policy = RetrievalPolicy(k=4, mode="hybrid", min_relevance=0.3)
    result = retrieve(
        pool, now=NOW, query_text="how is Dumpling", query_vector=unit(1, 0),
        target_emotion=None, policy=policy,
    )  # fmt: skip
    assert [item.memory.id for item in result.items] == ["hit"]
    assert result.below_relevance == 1
    nothing = retrieve(
        pool, now=NOW, query_text="zzz", query_vector=unit(-1, -1), target_emotion=None,
        policy=policy,
    )  # fmt: skip
    assert nothing.items == () and nothing.below_relevance == 2


def unit_towards(a: np.ndarray, b: np.ndarray, cosine: float) -> np.ndarray:
    """A unit vector at ``cosine`` to ``a`` (``a`` and ``b`` orthonormal)."""
    return cosine * a + np.sqrt(1 - cosine**2) * b


def test_a_question_about_the_user_keeps_its_best_notes_below_the_floor() -> None:
    # The tutor demo: "The user always mix up went and gone." at cosine 0.10 to the
    # question, the best of five notes, all under the floor.
    axes = np.eye(8)
    weak = [0.10, 0.08, 0.074, 0.06, -0.026]
    pool = [
        memory(f"m{i}", text, vector=unit_towards(axes[0], axes[i + 1], c), importance=0.7)
        for i, (text, c) in enumerate(zip(
            ["The user always mix up went and gone.", "The user moved his exam to April 28.",
             "The user wants to make a study plan.", "The user's English is around B1 level.",
             "The user's name is Marco."], weak, strict=True))
    ]  # fmt: skip
    policy = RetrievalPolicy(k=8, mode="hybrid", min_relevance=0.3)
    asked = retrieve(
        pool, now=NOW, query_text="Which mistake do I keep making that I should drill?",
        query_vector=axes[0], target_emotion=None, policy=policy,
    )  # fmt: skip
    ids = [item.memory.id for item in asked.items]
    assert "m0" in ids and len(ids) == OWN_QUESTION_KEEP and asked.below_relevance == 2
    # Venting is no question about the user: the floor drops them all.
    vented = retrieve(
        pool, now=NOW, query_text="ugh, drills and mistakes all day at work",
        query_vector=axes[0], target_emotion=None, policy=policy,
    )  # fmt: skip
    assert vented.items == () and vented.below_relevance == 5


def test_below_the_floor_only_pinned_and_salient_health_notes_are_held() -> None:
    axes = np.eye(8)  # one direction each: no two of them state one fact
    pool = [
        memory("hit", "The user's cat is called Dumpling", vector=axes[0], importance=0.5),
        dataclasses.replace(memory("pin", "The user is a grumpy old pug", vector=axes[1]),
                            pinned=True),
        memory("allergy", "The user is allergic to peanuts", category="health",
               importance=0.9, vector=axes[2], days_ago=3),
        memory("old-injury", "The user sprained an ankle", category="health",
               importance=0.9, vector=axes[3], days_ago=90),
        memory("minor", "The user had a cold", category="health", importance=0.5,
               vector=axes[4]),
        memory("vip", "The user's important unrelated fact", importance=1.0, vector=axes[5]),
    ]  # fmt: skip
    held = functools.partial(held_below_floor, now=NOW, salient_days=30,
                             salient_min_importance=0.7)  # fmt: skip
    result = retrieve(
        pool, now=NOW, query_text="how is Dumpling", query_vector=axes[0],
        target_emotion=None, policy=RetrievalPolicy(k=8, mode="hybrid", min_relevance=0.3),
        held=held,
    )  # fmt: skip
    assert {item.memory.id for item in result.items} == {"hit", "pin", "allergy"}
    assert set(result.held) == {"pin", "allergy"}
    assert result.below_relevance == 3
    # Floor off: nothing is below it, so nothing is held either.
    off = retrieve(
        pool, now=NOW, query_text="how is Dumpling", query_vector=axes[0],
        target_emotion=None, policy=RetrievalPolicy(k=8, mode="hybrid"), held=held,
    )  # fmt: skip
    assert off.held == () and len(off.items) > 3


def test_hybrid_never_activates_superseded_memories() -> None:
    pool = [
        memory("new", "The user lives in Hangzhou", vector=unit(1, 0)),
        memory("old", "The user lives in Guangzhou", vector=unit(1, 0.01), importance=1.0,
               superseded_by="new"),
    ]  # fmt: skip
    result = retrieve(
        pool, now=NOW, query_text="where do I live", query_vector=unit(1, 0),
        target_emotion=None, policy=HYBRID,
    )  # fmt: skip
    assert [item.memory.id for item in result.items] == ["new"]


def test_hybrid_works_without_vectors() -> None:
    pool = [memory("a", "The user's cat is Dumpling"), memory("b", "The user likes tea")]
    result = retrieve(
        pool, now=NOW, query_text="Dumpling", query_vector=None, target_emotion=None,
        policy=HYBRID,
    )  # fmt: skip
    assert result.items[0].memory.id == "a"
    assert result.degraded == "fewer than 2 vectors"


def test_diversify_accepts_a_distance_matrix() -> None:
    ranked = score_pool(paraphrase_pool(), now=NOW)
    # A matrix that calls everything identical: GIST at lambda 1 keeps just one row.
    same = np.zeros((len(ranked), len(ranked)), dtype=np.float32)
    result = diversify(ranked, k=4, lam=1.0, distances=same)
    assert len(result.items) >= 1 and result.gist is not None
    apart = np.ones((len(ranked), len(ranked)), dtype=np.float32) - np.eye(len(ranked))
    spread = diversify(ranked, k=4, lam=1.0, distances=apart)
    assert len(spread.items) == 4


def _shares_sum(explanation) -> float:  # a ScoreExplanation
    return sum(c.share for c in explanation.channels if c.share is not None)


def test_retrieve_explains_every_activated_memory_under_its_mode() -> None:
    pool = [
        memory("a", "The user's dog Pepper likes the beach", importance=0.8, vector=unit(1, 1)),
        memory("b", "The user plays the cello", importance=0.6, vector=unit(1, 0)),
        memory("c", "The user lives in Lyon", importance=0.9),  # no vector: cosine missing
    ]
    for mode in ("hybrid", "limbic"):
        result = retrieve(
            pool,
            now=NOW,
            query_text="my dog Pepper",
            query_vector=unit(1, 1),
            target_emotion=None,
            policy=RetrievalPolicy(k=3, mode=mode),
        )
        assert result.mode == mode
        assert set(result.explanations) == {item.memory.id for item in result.items}
        for item in result.items:
            ex = result.explanations[item.memory.id]
            assert ex.mode == mode
            assert abs(_shares_sum(ex) + ex.remainder - item.score.final) < 1e-12
            assert abs(ex.remainder) < 1e-9
            cosine = next(c for c in ex.channels if c.channel == "cosine")
            assert cosine.missing == (item.score.cosine is None)
        c = result.explanations["c"]
        if mode == "hybrid":
            assert c.unused == ("recency", "emotion")
        else:
            # limbic: every channel weighs; without a cosine final = base, in full.
            assert c.unused == ()
            assert next(x for x in c.channels if x.channel == "importance").weight == 0.35
            a = result.explanations["a"]
            assert (
                abs(next(x for x in a.channels if x.channel == "importance").weight - 0.245) < 1e-12
            )


def test_diversify_alone_explains_nothing() -> None:
    result = diversify([], k=3, lam=0.5)
    assert result.mode is None and dict(result.explanations) == {}


def test_what_the_message_names_through_a_relation_clears_the_floor() -> None:
    # "how is my sister doing?" and "Xiaoyu moved the wedding": no channel sees the sister.
    axes = np.eye(4)
    pool = [
        memory("wedding", "Xiaoyu moved the wedding to December", vector=axes[1]),
        memory("walks", "The user likes morning walks", vector=axes[2]),
    ]
    policy = RetrievalPolicy(k=8, mode="hybrid", min_relevance=0.3)

    def recall(text: str, spoken_for: set[str]) -> Retrieval:
        return retrieve(pool, now=NOW, query_text=text, query_vector=axes[0],
                        target_emotion=None, policy=policy, spoken_for=spoken_for)  # fmt: skip

    assert recall("how is my sister doing?", set()).items == ()
    named = recall("how is my sister doing? (Xiaoyu)", {"wedding"})
    # One memory left: returned as it is, not "degraded" for want of a second vector.
    assert [item.memory.id for item in named.items] == ["wedding"]
    assert named.degraded is None and named.held == ()


def test_a_message_about_food_keeps_the_best_note_of_each_dietary_constraint() -> None:
    # "I'm having friends over for dinner, what should I cook?": eight notes about the
    # friends and the dinner speak for themselves; the diet and the peanut allergy share
    # no word with it and sit below the floor, each stated twice.
    axes = np.eye(16)
    query = axes[0]
    friends = ["Ana paints", "Ben cycles", "Cleo sings", "Dev surfs", "Eli knits",
               "Fay rows", "Gus skates", "Hana bakes"]  # fmt: skip
    talk = [
        memory(f"t{i}", f"The user's friend {text}",
               vector=unit_towards(query, axes[i + 1], 0.6 - 0.02 * i))
        for i, text in enumerate(friends)
    ]  # fmt: skip
    weakest = talk[-1].id
    diet = [
        memory("veg", "The user is vegetarian.", vector=unit_towards(query, axes[10], 0.12),
               importance=0.7),
        memory("veg2", "The user doesn't eat meat or fish.",
               vector=unit_towards(query, axes[11], 0.10), importance=0.6),
        memory("nut", "The user is allergic to peanuts.",
               vector=unit_towards(query, axes[12], 0.05), importance=0.9),
        memory("nut2", "The user always checks menus for peanuts because of her allergy.",
               vector=unit_towards(query, axes[13], 0.02), importance=0.9),
        memory("cats", "The user is allergic to cats.",
               vector=unit_towards(query, axes[14], 0.11), importance=0.9),
        # Two foods refused, each better-scored than the diet: only the best of them
        # takes the third place, after the diet and the allergy.
        memory("wine", "The user avoids red wine.", vector=unit_towards(query, axes[15], 0.25),
               importance=0.8),
        memory("cil", "The user hates cilantro.", vector=unit_towards(query, axes[9], 0.2),
               importance=0.8),
    ]  # fmt: skip
    policy = RetrievalPolicy(k=8, mode="hybrid", min_relevance=0.3)

    def recall(keep: object) -> list[str]:
        result = retrieve(
            [*talk, *diet], now=NOW, query_text="what should I cook for my friends?",
            query_vector=query, target_emotion=None, policy=policy, keep=keep,  # type: ignore[arg-type]
        )  # fmt: skip
        return [item.memory.id for item in result.items]

    assert recall(None) == [t.id for t in talk]
    kept = recall(dietary_kind)
    # One note of each constraint, in the places of the notes the message speaks for
    # least; the cat allergy is no dietary note.
    assert KEEP_IN_MIND == 3
    assert {"veg", "nut", "wine"} <= set(kept)
    assert not {"veg2", "nut2", "cats", "cil"} & set(kept)
    assert len(kept) == 8 and weakest not in kept and talk[0].id in kept
