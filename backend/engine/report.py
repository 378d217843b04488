"""The per-turn memory report: plain JSON data for the UI and the API, never reply text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backend.longterm.memory import Activation, WriteOutcome
from backend.memory.explain import RERANK, ScoreExplanation
from backend.memory.types import Emotion, Memory, ScoredMemory


def memory_summary(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "content": memory.content,
        "category": memory.category,
        "importance": round(memory.importance, 3),
        "subject": memory.subject,
        "about": [{"name": a.name, "relation": a.relation} for a in memory.about],
        "created_at": memory.created_at.isoformat(),
        "pinned": memory.pinned,
    }


def scored_item(item: ScoredMemory, explanation: ScoreExplanation | None = None) -> dict[str, Any]:
    """An activated memory: its summary, the raw ``score`` channels and, with an
    ``explanation``, each channel's weighted share of the final score (docs/api.md)."""
    s = item.score
    scored = {
        **memory_summary(item.memory),
        "score": {
            "recency": round(s.recency, 4),
            "importance": round(s.importance, 4),
            "relevance": round(s.relevance, 4),
            "emotion": round(s.emotion, 4),
            "cosine": None if s.cosine is None else round(s.cosine, 4),
            "base": round(s.base, 4),
            "final": round(s.final, 4),
        },
    }
    listed = explanation is not None and any(c.channel == RERANK for c in explanation.channels)
    if s.rerank is not None or listed:
        # The cross-encoder's relevance, when the reranking stage ran (None: not read).
        scored["score"]["rerank"] = None if s.rerank is None else round(s.rerank, 4)
    if explanation is not None:
        scored.update(explanation_part(explanation, scored["score"]["final"]))
    return scored


def explanation_part(explanation: ScoreExplanation, final: float) -> dict[str, Any]:
    """``mode``; ``contributions`` (channel → share of the final score, ``None`` when the
    channel is unused or missing); ``weights`` (channel → the factor applied to its raw
    value); ``unused`` (the channels the mode gives no weight); ``remainder`` (``final``
    less the rounded shares: the clamp to [0, 1] and rounding, normally 0)."""
    contributions = {
        c.channel: None if c.share is None else round(c.share, 4) for c in explanation.channels
    }
    total = sum(share for share in contributions.values() if share is not None)
    return {
        "mode": explanation.mode,
        "contributions": contributions,
        "weights": {c.channel: round(c.weight, 4) for c in explanation.channels},
        "unused": list(explanation.unused),
        "remainder": round(final - total, 4),
    }


def activation_part(activation: Activation | None) -> dict[str, Any]:
    if activation is None:
        return {"activated": [], "activation": {"status": "skipped"}}
    retrieval = activation.retrieval
    gist = retrieval.gist
    return {
        "activated": [
            scored_item(item, retrieval.explanations.get(item.memory.id))
            for item in retrieval.items
        ],
        "activation": {
            "mode": retrieval.mode,
            "embed_ms": round(activation.embed_ms, 2),
            "search_ms": round(activation.search_ms, 2),
            "pool": activation.pool_size,
            "degraded": activation.degraded or activation.retrieval.degraded,
            "gist_stage": None if gist is None else gist.stage,
            # The reranking stage: the pairs the cross-encoder read and its time, or why
            # it did not run ("off", "no reranker", "non-English message", ...).
            "reranked": retrieval.reranked,
            "rerank_ms": round(activation.rerank_ms, 2),
            "rerank_skipped": retrieval.rerank_skipped,
        },
    }


def outcomes_part(outcomes: Sequence[WriteOutcome]) -> dict[str, list[dict[str, Any]]]:
    part: dict[str, list[dict[str, Any]]] = {
        "written": [],
        "reinforced": [],
        "superseded": [],
        "rejected": [],
        "queued": [],  # the store was down: waiting in the outbox, gated when replayed
    }
    for o in outcomes:
        if o.action == "write":
            part["written"].append(
                {"id": o.memory_id, "content": o.content, "vector": o.has_vector}
            )
        elif o.action == "reinforce":
            part["reinforced"].append({"id": o.memory_id, "content": o.content, "reason": o.reason})
        elif o.action == "supersede":
            part["written"].append(
                {"id": o.memory_id, "content": o.content, "vector": o.has_vector}
            )
            part["superseded"].append({"id": o.target_id, "by": o.memory_id, "reason": o.reason})
        elif o.action == "queue":
            part["queued"].append({"content": o.content, "reason": o.reason})
        else:
            part["rejected"].append({"content": o.content, "reason": o.reason})
    return part


def emotion_part(emotion: Emotion | None) -> dict[str, Any] | None:
    return None if emotion is None else {"label": emotion.label, "intensity": emotion.intensity}
