"""The cross-encoder reranking stage of hybrid activation (docs/memory-model.md,
"Retrieval", step 3, "Rerank"): the top ``n`` of the hybrid ranking after the relevance
floor, read again by a model that sees the message and the memory together, before the
restatement collapse and GIST.

The model is injected (a :class:`Reranker`: ``backend.reranking`` holds the adapter);
this module only blends what it says into the ranking:

    w_q    = weight * (1 - cjk_share(query))
    w_i    = w_q * (1 - cjk_share(memory_i))
    final' = (1 - w_q) * final + w_i * p_i          for the top n
    final' = (1 - w_q) * final                      below them

``p_i`` is the model's relevance in [0, 1]. The model reads English: a Chinese,
Japanese or Korean message or memory weighs it that much less (a wholly CJK message
skips the stage, a wholly CJK memory is not sent to the model). The share of ``w_q``
a memory's CJK hides from the model counts as no vouching (``p`` 0), as for the memories
below the top n: a Chinese note the model could not read neither passes English ones it
read for nothing (with two-part vectors, ``backend.memory.vector_parts``, Chinese notes
do reach English messages) nor falls behind the memories it was not asked about. Below
the top n nothing is read, and the scaling keeps every memory there behind the ones
that were read: the stage reorders the top n, it never lets an unread memory pass one
that was. ``ScoreBreakdown.rerank`` keeps ``p_i`` (``None`` where the
model did not read the memory) and :class:`Reranked.weights` each memory's ``w_i`` for
the explanation (``backend.memory.explain``).

Failure policy: a reranker that is down answers ``None`` (the longterm adapter turns its
errors into that); the stage is then skipped and says why. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from backend.memory.hybrid import cjk_share
from backend.memory.types import ScoredMemory

#: A pair weight below this is not worth a model run (the memory is almost all CJK).
MIN_PAIR_WEIGHT = 0.05


class Reranker(Protocol):
    """A cross-encoder: how relevant each passage is to the query."""

    @property
    def model(self) -> str: ...

    def score(self, query: str, passages: Sequence[str]) -> Sequence[float] | None:
        """One relevance in [0, 1] per passage, in order; ``None`` when it is down."""
        ...


@dataclass(frozen=True, slots=True)
class Reranked:
    """The ranking after the stage, best first, and what the stage did.

    ``weights``: each memory's blend weight ``w_i`` by id (0 for one the model did not
    read within the top n); absent ids were not reranked at all. ``scored``: the pairs
    the model read. ``skipped``: why the stage did not run, if it did not.
    """

    ranked: tuple[ScoredMemory, ...]
    weights: Mapping[str, float] = field(default_factory=dict)
    scored: int = 0
    skipped: str | None = None
    # ``w_q``: every blended memory keeps ``1 - w_q`` of its hybrid score.
    query_weight: float = 0.0


def rerank(
    ranked: Sequence[ScoredMemory],
    query_text: str,
    reranker: Reranker | None,
    *,
    n: int,
    weight: float,
) -> Reranked:
    """The top ``n`` of ``ranked`` blended with ``reranker``'s relevance (module doc),
    every memory re-sorted by its new final score (ties keep their order)."""
    if n <= 0 or weight <= 0.0:
        return Reranked(tuple(ranked), skipped="off")
    if reranker is None:
        return Reranked(tuple(ranked), skipped="no reranker")
    if not ranked:
        return Reranked((), skipped="nothing to rerank")
    query_weight = weight * (1.0 - cjk_share(query_text))
    if query_weight < MIN_PAIR_WEIGHT:
        return Reranked(tuple(ranked), skipped="non-English message")
    head = list(ranked[:n])
    pair_weights = [query_weight * (1.0 - cjk_share(item.memory.content)) for item in head]
    read = [i for i, w in enumerate(pair_weights) if w >= MIN_PAIR_WEIGHT]
    if not read:
        return Reranked(tuple(ranked), skipped="no English memory in the top n")
    relevance = reranker.score(query_text, [head[i].memory.content for i in read])
    if relevance is None:
        return Reranked(tuple(ranked), skipped="reranker unavailable")
    if len(relevance) != len(read):
        return Reranked(tuple(ranked), skipped="reranker answered a wrong count")
    found = dict(zip(read, relevance, strict=True))
    weights: dict[str, float] = {}
    blended: list[ScoredMemory] = []
    for i, item in enumerate(head):
        # The share of the query's weight the model could not read (the memory's CJK) is
        # no vouching, as for a memory below the top n: the model's silence must not
        # lift a Chinese note over English ones it read and found wanting.
        score = item.score
        w = pair_weights[i] if i in found else 0.0
        kept = (1.0 - query_weight) * score.final
        if i in found:
            p = min(1.0, max(0.0, float(found[i])))
            score = replace(score, rerank=p, final=kept + w * p)
        else:
            score = replace(score, final=kept)
        weights[item.memory.id] = w
        blended.append(ScoredMemory(item.memory, score))
    for item in ranked[n:]:
        weights[item.memory.id] = query_weight
        scaled = replace(item.score, final=(1.0 - query_weight) * item.score.final)
        blended.append(ScoredMemory(item.memory, scaled))
    order = sorted(range(len(blended)), key=lambda j: -blended[j].score.final)
    return Reranked(tuple(blended[j] for j in order), weights, len(read), None, query_weight)
