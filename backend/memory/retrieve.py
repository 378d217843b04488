"""Activation over rows already read: score a pool → GIST → fill → score order.

docs/memory-model.md, "Retrieval (activation)", steps 2-5. The store is responsible for
step 1 (the candidate pool); this module never does I/O.

Two scoring modes (``RetrievalPolicy.mode``):

- ``limbic``: ``backend.memory.scoring`` (the golden fixture's rule), then GIST over
  cosine distances, exactly as the spec describes;
- ``hybrid`` (the app's default, docs/memory-model.md): ``backend.memory.hybrid`` scores
  cosine + BM25 + importance, memories whose relevance evidence is below
  ``min_relevance`` are dropped (but for a question about the user's best
  ``OWN_QUESTION_KEEP``: ``own_questions.asks_about_user``) unless ``held`` (pinned, or
  a health note within the salient rule: :func:`held_below_floor`), the top
  ``rerank_n`` are read again by the injected cross-encoder (``backend.memory.rerank``),
  restatements of a better-scored memory are collapsed (``same_fact``), and GIST runs
  over the survivors with the same "fact" distance, but for those the cross-encoder
  called relevant (``rerank_keep``): they are kept, and GIST fills the other slots
  (:func:`diversify_around`). A question about the user as a whole hands in ``fill``: the
  user's memories below the floor then take the slots left over, restatements aside.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import numpy as np

from backend.memory.explain import ScoreExplanation, explain_hybrid, explain_limbic
from backend.memory.gist import GistResult, distance_matrix, gist_select
from backend.memory.hybrid import CorpusStats, cosine_trust, relevance_evidence, score_hybrid
from backend.memory.own_questions import asks_about_user
from backend.memory.rerank import Reranker, rerank
from backend.memory.restatements import collapse_restatements, fact_similarities
from backend.memory.scoring import score_pool
from backend.memory.types import Memory, RetrievalPolicy, ScoredMemory
from backend.memory.vector_parts import VectorParts

# hybrid: only the DIVERSITY_WINDOW * k best-scored candidates enter the restatement
# collapse and GIST (measured: no recall change down to 3k on the eval corpus; it bounds
# the pairwise work whatever the pool size).
DIVERSITY_WINDOW = 4
# hybrid: a question about the user keeps this many best-scored candidates below the
# relevance floor, if the message gives them any evidence ("Which mistake do I keep
# making?" and "The user always mix up went and gone.": cosine 0.10, the best of the
# tutor demo's five notes; ``own_questions``).
OWN_QUESTION_KEEP = 3
# hybrid: at most this many notes a message keeps in mind whatever its words (``keep``:
# the user's dietary constraints for a message about food, ``backend.memory.dietary``),
# the best of each kind: a diet, an allergy, a food refused.
KEEP_IN_MIND = 3


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The activated memories in score order, plus how they were chosen.

    ``gist`` is the GIST result over the rows with vectors (``None`` when GIST did not
    run); ``degraded`` says why the result fell back to plain top-k, if it did. ``mode``
    is the scoring mode that ranked them and ``explanations`` (by memory id) each
    activated memory's channel shares of its final score under that mode (``retrieve``
    fills both; ``diversify`` alone leaves them empty).
    """

    items: tuple[ScoredMemory, ...]
    gist: GistResult | None = None
    degraded: str | None = None
    # hybrid: ids left out as restatements of a better-scored memory, how many
    # candidates fell below ``min_relevance``, and the ids of the activated ones that
    # are below it but held (``held_below_floor``): shown, but not what the message asked.
    collapsed: tuple[str, ...] = ()
    below_relevance: int = 0
    held: tuple[str, ...] = ()
    mode: str | None = None
    explanations: Mapping[str, ScoreExplanation] = field(default_factory=dict)
    # hybrid: the pairs the cross-encoder read, or why the reranking stage did not run
    # ("off" when the policy's ``rerank_n`` is 0).
    reranked: int = 0
    rerank_skipped: str | None = None


def held_below_floor(
    memory: Memory, *, now: datetime, salient_days: float, salient_min_importance: float
) -> bool:
    """A memory that stays a candidate below the relevance floor: one the user pinned, or
    a health note within the salient rule (important and used lately), so that an
    allergy or an injury still reaches a message that does not name it ("let's cook
    Thai tonight" and a peanut allergy)."""
    if memory.pinned:
        return True
    if memory.category != "health" or memory.importance < salient_min_importance:
        return False
    return memory.last_accessed >= now - timedelta(days=salient_days)


# ``retrieve``'s ``keep``: a note's kind to keep in mind, as (weight, key): the kinds of
# the least weight first (``backend.memory.dietary.dietary_kind``), or None.
KeepInMind = Callable[[Memory], tuple[int, str] | None]


def _key(keep: KeepInMind | None, memory: Memory) -> str | None:
    kind = keep(memory) if keep is not None else None
    return None if kind is None else kind[1]


def _in_mind(ranked: Sequence[ScoredMemory], keep: KeepInMind | None) -> set[str]:
    """The ids of the best-scored note of each kind ``keep`` names, the kinds of least
    weight first (a kind weighs what its weightiest note does), up to ``KEEP_IN_MIND``."""
    if keep is None:
        return set()
    best: dict[str, tuple[int, int, str]] = {}  # key -> (weight, first rank, id)
    for rank, item in enumerate(ranked):
        kind = keep(item.memory)
        if kind is None:
            continue
        weight, key = kind
        seen = best.get(key)
        if seen is None:
            best[key] = (weight, rank, item.memory.id)
        elif weight < seen[0]:
            best[key] = (weight, seen[1], seen[2])
    chosen = sorted(best.values())[:KEEP_IN_MIND]
    return {memory_id for _, _, memory_id in chosen}


def _kept_in_mind(
    chosen: Sequence[ScoredMemory],
    minded: Sequence[ScoredMemory],
    keep: KeepInMind | None,
    k: int,
    evidence: Mapping[str, float],
    position: Mapping[str, int],
    protected: Collection[str],
) -> tuple[ScoredMemory, ...]:
    """``chosen`` with each of ``minded`` (best first) whose kind none of them states yet:
    in a free place, or in the place of the chosen note the message speaks for least
    (``evidence``), never one of ``minded`` nor of ``protected``. Score order kept."""
    items = list(chosen)
    kinds = {kind for item in items if (kind := _key(keep, item.memory))}
    for note in minded:
        kind = _key(keep, note.memory)
        if kind is None or kind in kinds or any(i.memory.id == note.memory.id for i in items):
            continue
        if len(items) >= k:
            others = [
                i for i in items if i.memory.id not in protected and _key(keep, i.memory) is None
            ]
            if not others:
                break
            items.remove(min(others, key=lambda i: evidence.get(i.memory.id, 0.0)))
        items.append(note)
        kinds.add(kind)
    return tuple(sorted(items, key=lambda i: position.get(i.memory.id, len(position))))


def _filled(
    chosen: Sequence[ScoredMemory],
    fillers: Sequence[ScoredMemory],
    policy: RetrievalPolicy,
    stats: CorpusStats | None,
    parts: VectorParts | None,
) -> tuple[ScoredMemory, ...]:
    """``chosen``, then ``fillers`` in their order up to ``policy.k``, each left out that
    restates one before it (the restatement collapse's test)."""
    rows = [*chosen, *fillers[: DIVERSITY_WINDOW * policy.k]]
    _, same = fact_similarities(
        [item.memory for item in rows],
        stats,
        policy.hybrid,
        cosine_min=policy.same_fact_cosine,
        parts=parts,
    )
    taken = list(range(len(chosen)))
    for i in range(len(chosen), len(rows)):
        if len(taken) >= policy.k:
            break
        if all(same[i, j] < policy.same_fact for j in taken):
            taken.append(i)
    return tuple(rows[i] for i in taken)


def _usable_vector(memory: Memory) -> np.ndarray | None:
    vector = memory.embedding
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float32)
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        return None
    return array if float(np.dot(array, array)) > 0.0 else None


def diversify(
    ranked: Sequence[ScoredMemory],
    *,
    k: int,
    lam: float,
    eps: float = 0.1,
    distances: np.ndarray | None = None,
) -> Retrieval:
    """GIST over the ranked rows that have vectors, then fill up to ``k`` preserving spread.

    Diversity changes membership, never order: the result keeps ``ranked``'s order. A row
    without a vector is always admitted by the fill. The result may hold fewer than ``k``
    rows. ``distances`` (``len(ranked)`` square) replaces the cosine distance between
    rows. Failure policy: ragged dimensions, fewer than two vectors or any GIST error
    degrade to plain top-k (``degraded`` says why); this function never raises for data.
    """
    if k <= 0 or not ranked:
        return Retrieval(items=())
    vectors = [_usable_vector(item.memory) for item in ranked]
    with_vector = [i for i, v in enumerate(vectors) if v is not None]
    if len(with_vector) < 2:
        return Retrieval(items=tuple(ranked[:k]), degraded="fewer than 2 vectors")
    if len({vectors[i].shape[0] for i in with_vector}) != 1:  # type: ignore[union-attr]
        return Retrieval(items=tuple(ranked[:k]), degraded="ragged vector dimensions")

    matrix = np.stack([vectors[i] for i in with_vector])  # type: ignore[misc]
    weights = np.array([max(0.0, ranked[i].score.final) for i in with_vector], dtype=np.float64)
    try:
        if distances is None:
            distances = distance_matrix(matrix, "cosine")
        else:
            rows = np.asarray(with_vector)
            distances = np.ascontiguousarray(
                np.asarray(distances, dtype=np.float32)[np.ix_(rows, rows)]
            )
        result = gist_select(
            matrix, weights, k=k, lam=lam, eps=eps, metric="cosine", distances=distances
        )
    except (ValueError, FloatingPointError) as exc:
        return Retrieval(items=tuple(ranked[:k]), degraded=f"gist failed: {exc}")

    # Row position in ``ranked`` → row position in ``matrix``.
    matrix_row = {pool_index: row for row, pool_index in enumerate(with_vector)}
    chosen_rows = [with_vector[r] for r in result.selected]
    chosen = set(chosen_rows)
    chosen_matrix_rows = list(result.selected)
    for index in range(len(ranked)):
        if len(chosen) >= k:
            break
        if index in chosen:
            continue
        row = matrix_row.get(index)
        if row is not None:
            if np.any(distances[row, chosen_matrix_rows] < np.float32(result.div)):
                continue
            chosen_matrix_rows.append(row)
        chosen.add(index)
    return Retrieval(items=tuple(ranked[i] for i in sorted(chosen)), gist=result)


def diversify_around(
    ranked: Sequence[ScoredMemory],
    kept: Sequence[int],
    *,
    k: int,
    lam: float,
    eps: float = 0.1,
    distances: np.ndarray,
) -> Retrieval:
    """:func:`diversify` with the rows at positions ``kept`` (the best ``k`` of them)
    always chosen: GIST picks the other ``k - len(kept)`` among the rest. The result keeps
    ``ranked``'s order.

    Why: GIST trades a memory's score for the spread of the set, and reads two turns of one
    conversation as near each other; when the cross-encoder has read a memory with the
    message and called it relevant, that trade loses what was asked for (LoCoMo: 17
    questions lost an evidence turn to GIST at 30 pairs, 11 gained one).
    """
    chosen = sorted(kept)[:k]
    if not chosen:
        return diversify(ranked, k=k, lam=lam, eps=eps, distances=distances)
    slots = k - len(chosen)
    taken = set(chosen)
    rest = [i for i in range(len(ranked)) if i not in taken]
    if slots <= 0 or len(rest) < 2:
        chosen += rest[: max(0, slots)]
        return Retrieval(items=tuple(ranked[i] for i in sorted(chosen)))
    others = diversify(
        [ranked[i] for i in rest], k=slots, lam=lam, eps=eps,
        distances=np.asarray(distances)[np.ix_(rest, rest)],
    )  # fmt: skip
    picked = {item.memory.id for item in others.items}
    chosen += [i for i in rest if ranked[i].memory.id in picked]
    return Retrieval(
        items=tuple(ranked[i] for i in sorted(chosen)), gist=others.gist, degraded=others.degraded
    )


def retrieve(
    pool: Sequence[Memory],
    *,
    now: datetime,
    query_text: str,
    query_vector: np.ndarray | None,
    target_emotion: str | None,
    policy: RetrievalPolicy = RetrievalPolicy(),
    stats: CorpusStats | None = None,
    held: Callable[[Memory], bool] | None = None,
    spoken_for: Collection[str] = (),
    reranker: Reranker | None = None,
    parts: VectorParts | None = None,
    fill: Callable[[Memory], bool] | None = None,
    keep: KeepInMind | None = None,
) -> Retrieval:
    """Score ``pool`` (superseded memories dropped), diversify with GIST, return score order.

    ``stats``: the namespace's corpus statistics for the hybrid BM25 channel (``None``:
    computed over the pool); the limbic mode ignores them. ``held``: the memories kept
    below the hybrid relevance floor (e.g. a partial of :func:`held_below_floor`);
    ``None``: none. ``spoken_for``: ids the message asks for in a way the channels do not
    see (a relation whose person the memory names only by name): they clear the floor.
    ``reranker``: the hybrid mode's cross-encoder (``None``: the stage is skipped).
    ``parts``: the vectors hold two parts, each pair of texts read by the one that knows
    its script (``backend.memory.vector_parts``; the hybrid mode only). ``fill``: the
    memories below the hybrid relevance floor that may take the slots the message's own
    notes leave (a question about the user as a whole: every note of theirs,
    ``own_questions.asks_for_profile``), best first, restatements left out; held, like
    ``held``'s. ``None``: none. ``keep``: the kind of note the message keeps in mind
    whatever its words (a dietary constraint for a message about food), or ``None``;
    the best-scored note of each kind, up to ``KEEP_IN_MIND``, clears the floor and takes
    a place in the result (the hybrid mode only). ``None``: none.
    """
    live = [memory for memory in pool if not memory.is_superseded]
    if policy.mode == "hybrid":
        return _retrieve_hybrid(
            live,
            now=now,
            query_text=query_text,
            query_vector=query_vector,
            target_emotion=target_emotion,
            policy=policy,
            stats=stats,
            held=held,
            spoken_for=spoken_for,
            reranker=reranker,
            parts=parts,
            fill=fill,
            keep=keep,
        )
    ranked = score_pool(
        live,
        now=now,
        query_text=query_text,
        query_vector=query_vector,
        target_emotion=target_emotion,
        weights=policy.weights,
    )
    result = diversify(ranked, k=policy.k, lam=policy.lam, eps=policy.eps)
    return replace(
        result,
        mode="limbic",
        explanations={
            item.memory.id: explain_limbic(item.score, policy.weights) for item in result.items
        },
    )


def _retrieve_hybrid(
    live: Sequence[Memory],
    *,
    now: datetime,
    query_text: str,
    query_vector: np.ndarray | None,
    target_emotion: str | None,
    policy: RetrievalPolicy,
    stats: CorpusStats | None,
    held: Callable[[Memory], bool] | None,
    spoken_for: Collection[str],
    reranker: Reranker | None,
    parts: VectorParts | None,
    fill: Callable[[Memory], bool] | None = None,
    keep: KeepInMind | None = None,
) -> Retrieval:
    weights = policy.hybrid
    ranked = score_hybrid(
        live,
        now=now,
        query_text=query_text,
        query_vector=query_vector,
        target_emotion=target_emotion,
        weights=weights,
        stats=stats,
        parts=parts,
    )
    below = 0
    held_ids: set[str] = set()
    fillers: list[ScoredMemory] = []
    trust = cosine_trust(query_text, weights)
    # A question about the user asks for what is known of them: its best few candidates
    # pass the floor on any evidence at all (``own_questions``).
    keep_best = OWN_QUESTION_KEEP if asks_about_user(query_text) else 0
    in_mind = _in_mind(ranked, keep)
    if policy.min_relevance > 0:
        kept_ranked = []
        for rank, item in enumerate(ranked):
            said = relevance_evidence(item.score, trust, weights)
            best = rank < keep_best and said > 0  # some evidence, if little
            cleared = item.memory.id in spoken_for or item.memory.id in in_mind
            if said >= policy.min_relevance or cleared or best:
                kept_ranked.append(item)
            elif held is not None and held(item.memory):
                kept_ranked.append(item)
                held_ids.add(item.memory.id)
            else:
                below += 1
                if fill is not None and fill(item.memory):
                    fillers.append(item)
        ranked = kept_ranked
    if policy.k <= 0 or not (ranked or fillers):
        return Retrieval(items=(), below_relevance=below, mode="hybrid")
    if not ranked:  # nothing the message speaks for: the fillers are the recall
        items = _filled((), fillers, policy, stats, parts)
        return Retrieval(
            items=items, below_relevance=below, held=tuple(i.memory.id for i in items),
            mode="hybrid",
            explanations={i.memory.id: explain_hybrid(i.score, trust, weights) for i in items},
        )  # fmt: skip
    reranked = rerank(ranked, query_text, reranker, n=policy.rerank_n, weight=policy.rerank_weight)
    ranked = list(reranked.ranked)
    blend = reranked.weights if reranked.skipped is None else {}
    window = ranked[: DIVERSITY_WINDOW * policy.k]
    similarity, same = fact_similarities(
        [item.memory for item in window],
        stats,
        weights,
        cosine_min=policy.same_fact_cosine,
        parts=parts,
    )
    kept = collapse_restatements(same, policy.same_fact)
    kept_set = set(kept)
    collapsed = tuple(item.memory.id for i, item in enumerate(window) if i not in kept_set)
    survivors = [window[i] for i in kept]
    distances = 1.0 - similarity[np.ix_(kept, kept)]
    if len(survivors) < 2:
        # One memory cleared the floor: nothing to diversify, and nothing degraded.
        result = Retrieval(items=tuple(survivors))
    else:
        vouched = [
            i
            for i, item in enumerate(survivors)
            if item.score.rerank is not None and item.score.rerank >= policy.rerank_keep
        ]
        result = diversify_around(
            survivors, vouched, k=policy.k, lam=policy.lam, eps=policy.eps, distances=distances
        )
    if in_mind:
        evidence = {
            item.memory.id: relevance_evidence(item.score, trust, weights) for item in ranked
        }
        minded = [item for item in ranked if item.memory.id in in_mind]
        position = {item.memory.id: i for i, item in enumerate(ranked)}
        # Never in the place of a note the cross-encoder vouched for, one the message
        # names through a relation, or a held one (a pinned note, a health note).
        protected = {*spoken_for, *held_ids}
        protected.update(
            item.memory.id
            for item in result.items
            if item.score.rerank is not None and item.score.rerank >= policy.rerank_keep
        )
        items = _kept_in_mind(result.items, minded, keep, policy.k, evidence, position, protected)
        result = replace(result, items=items)
    if fillers and len(result.items) < policy.k:
        items = _filled(result.items, fillers, policy, stats, parts)
        held_ids.update(item.memory.id for item in items[len(result.items) :])
        result = replace(result, items=items)
    return Retrieval(
        items=result.items,
        gist=result.gist,
        degraded=result.degraded,
        collapsed=collapsed,
        below_relevance=below,
        held=tuple(item.memory.id for item in result.items if item.memory.id in held_ids),
        mode="hybrid",
        explanations={
            item.memory.id: explain_hybrid(
                item.score,
                trust,
                weights,
                blend.get(item.memory.id) if blend else None,
                1.0 - reranked.query_weight if blend else None,
            )
            for item in result.items
        },
        reranked=reranked.scored,
        rerank_skipped=reranked.skipped,
    )
