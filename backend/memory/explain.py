"""Why a memory scored what it did: each channel's weighted share of its final score,
under the mode that scored it (the memory panel and the activation report show these).

A channel the mode gives no weight (recency and emotion in ``hybrid`` by default) is
*unused*, not a 0.00 share; a MISSING cosine is *missing*. ``sum(shares) + remainder ==
final``, the remainder being what clamping to [0, 1] took off. Pure, like the rest of
``backend.memory``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from backend.memory.hybrid import DEFAULT_HYBRID, channel_weights, weight_total
from backend.memory.scoring import DEFAULT_WEIGHTS
from backend.memory.types import HybridWeights, ScoreBreakdown, ScoreWeights

CHANNELS = ("recency", "importance", "relevance", "emotion", "cosine")
#: The cross-encoder's channel (``backend.memory.rerank``): listed after ``CHANNELS`` only
#: in a retrieval where the reranking stage ran.
RERANK = "rerank"


@dataclass(frozen=True, slots=True)
class Contribution:
    """One channel's part in a memory's final score, under the mode that scored it.

    ``value`` is the raw channel value (the breakdown's; ``None``: a MISSING cosine),
    ``weight`` the factor the mode applied to it for this memory (normalisation and, in
    the limbic mode, the base's 0.7 included), ``share = weight * value`` (the cosine:
    ``weight * max(0, value)``), or ``None`` when the channel is missing or unused.
    """

    channel: str
    value: float | None
    weight: float
    share: float | None

    @property
    def missing(self) -> bool:
        return self.value is None

    @property
    def unused(self) -> bool:
        """The mode gives this channel no weight here (e.g. recency in ``hybrid``)."""
        return self.value is not None and self.weight == 0.0


@dataclass(frozen=True, slots=True)
class ScoreExplanation:
    """Why a memory scored what it did: ``sum(shares) + remainder == final``.

    ``remainder`` is what clamping the score to [0, 1] took off (0 unless the weights
    add up to more than 1).
    """

    mode: str
    channels: tuple[Contribution, ...]
    final: float
    remainder: float

    def share(self, channel: str) -> float | None:
        return next(c.share for c in self.channels if c.channel == channel)

    @property
    def unused(self) -> tuple[str, ...]:
        return tuple(c.channel for c in self.channels if c.unused)


def explain(
    mode: str,
    score: ScoreBreakdown,
    weights: Mapping[str, float],
    channels_shown: tuple[str, ...] = CHANNELS,
) -> ScoreExplanation:
    """A :class:`ScoreExplanation` of ``score`` from each channel's effective weight."""
    channels = []
    for channel in channels_shown:
        value = getattr(score, channel)
        weight = float(weights.get(channel, 0.0)) if value is not None else 0.0
        if value is None or weight == 0.0:
            share = None
        else:
            share = weight * (max(0.0, value) if channel == "cosine" else value)
        channels.append(Contribution(channel, value, weight, share))
    total = sum(c.share for c in channels if c.share is not None)
    return ScoreExplanation(mode, tuple(channels), score.final, score.final - total)


def explain_limbic(
    score: ScoreBreakdown, weights: ScoreWeights = DEFAULT_WEIGHTS
) -> ScoreExplanation:
    """The limbic mode's shares: ``w.base * w.channel * channel`` for the four base
    channels and ``w.cosine * max(0, cosine)``; with a MISSING cosine ``final = base``,
    so the base channels count in full."""
    w = weights
    scale = 1.0 if score.cosine is None else w.base
    return explain(
        "limbic",
        score,
        {
            "recency": scale * w.recency,
            "importance": scale * w.importance,
            "relevance": scale * w.relevance,
            "emotion": scale * w.emotion,
            "cosine": w.cosine,
        },
    )


def explain_hybrid(
    score: ScoreBreakdown,
    trust: float,
    weights: HybridWeights = DEFAULT_HYBRID,
    rerank_weight: float | None = None,
    hybrid_share: float | None = None,
) -> ScoreExplanation:
    """Each channel's share of a hybrid ``final`` (module doc): ``w_cos * max(0, cosine)``,
    ``w_rel * relevance`` and ``w.channel * channel``, all over the sum of the weights.

    ``trust`` is the query's :func:`cosine_trust` (the memory's own is 0 when its cosine is
    MISSING: the whole cosine weight then counts on the lexical channel). A channel of
    weight 0 (recency and emotion by default) is unused.

    ``rerank_weight``: the memory's blend weight ``w`` in the reranking stage
    (``backend.memory.rerank``; ``None``: the stage did not run, and no rerank channel is
    listed). The hybrid channels then count ``hybrid_share`` of their weights (``1 - w``
    when not given; the stage's ``1 - w_q``) and the rerank channel ``w * rerank``; a
    memory the model did not read shows it missing.
    """
    w = weights
    t = trust if score.cosine is not None else 0.0
    total = weight_total(w)
    r = 0.0 if rerank_weight is None else rerank_weight
    scale = ((1.0 - r) if hybrid_share is None else hybrid_share) / total
    w_cos, w_rel = channel_weights(t, score.crossed, w)
    effective = {
        "cosine": w_cos * scale,
        "relevance": w_rel * scale,
        "importance": w.importance * scale,
        "recency": w.recency * scale,
        "emotion": w.emotion * scale,
    }
    if rerank_weight is None:
        return explain("hybrid", score, effective)
    return explain("hybrid", score, {**effective, RERANK: r}, (*CHANNELS, RERANK))
