"""Value types of the pure memory engine.

Frozen dataclasses only: the engine never mutates a memory, it returns new ones
(``dataclasses.replace``). Pydantic lives at the boundaries (config, HTTP, LLM JSON),
not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import numpy as np

# The categories the spec names; any other string is scored/decayed as ``general``.
CATEGORIES: tuple[str, ...] = (
    "personal_fact",
    "preference",
    "relationship",
    "experience",
    "emotion",
    "interest",
    "work",
    "health",
    "general",
)

Subject = Literal["user", "persona"]


def normalise_category(category: str | None) -> str:
    """Known categories pass through (lower-cased); anything else is ``general``."""
    value = (category or "").strip().lower()
    return value if value in CATEGORIES else "general"


def normalise_subject(subject: str | None) -> Subject:
    """``persona`` for facts about the companion (``assistant`` is a synonym), else ``user``."""
    value = (subject or "").strip().lower()
    return "persona" if value in ("persona", "assistant") else "user"


def clamp01(x: float) -> float:
    """Clamp to [0, 1]; NaN becomes 0 (a bad number never raises a score)."""
    if x != x:  # NaN
        return 0.0
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else float(x)


@dataclass(frozen=True, slots=True)
class Namespace:
    """Who owns a memory: one (user, persona) pair. Retrieval never crosses namespaces."""

    user_id: str
    persona_id: str

    @property
    def key(self) -> str:
        return f"{self.user_id}::{self.persona_id}"


@dataclass(frozen=True, slots=True)
class Emotion:
    """An emotion label with an intensity in [0, 1]."""

    label: str
    intensity: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", self.label.strip().lower())
        object.__setattr__(self, "intensity", clamp01(self.intensity))


@dataclass(frozen=True, slots=True)
class About:
    """Someone (or a pet) of the user's life a memory is about: a name and its relation to
    the user ("Tudou", "hamster"), or a relation alone (None, "physio")."""

    name: str | None
    relation: str

    def to_list(self) -> list[str | None]:
        return [self.name, self.relation]

    @classmethod
    def from_value(cls, value: object) -> About | None:
        """One from its stored form ``[name, relation]``; None for anything else."""
        if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[1], str):
            name = value[0] if isinstance(value[0], str) and value[0].strip() else None
            return cls(name, value[1]) if value[1].strip() else None
        return None


def abouts(value: object) -> tuple[About, ...]:
    """The stored ``about`` list (``[[name, relation], …]``) read back; what is not one is
    skipped, so an old or damaged record reads as about the user."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(a for a in (About.from_value(v) for v in value) if a is not None)


@dataclass(frozen=True, slots=True)
class Memory:
    """One long-term memory: a standalone sentence plus metadata (docs/memory-model.md, "A memory").

    ``embedding`` is ``None`` when the memory has no vector yet; it is never a zero vector.
    Timestamps are timezone-aware UTC.
    """

    id: str
    content: str
    category: str
    importance: float
    created_at: datetime
    last_accessed: datetime
    confidence: float = 1.0
    emotion: Emotion | None = None
    keywords: tuple[str, ...] = ()
    subject: Subject = "user"
    access_count: int = 0
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)
    supersedes: str | None = None
    superseded_by: str | None = None
    pinned: bool = False
    source_session: str | None = None
    # Whom it is about, decided at write (``memory.subjects``); empty: the user, or a
    # memory written before this was stored (the entity table reads its words then).
    about: tuple[About, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "importance", clamp01(self.importance))
        object.__setattr__(self, "confidence", clamp01(self.confidence))
        object.__setattr__(self, "keywords", tuple(k.lower() for k in self.keywords))

    @property
    def is_superseded(self) -> bool:
        return self.superseded_by is not None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A long-term memory proposed by the hippocampus, before the save gate."""

    content: str
    category: str = "general"
    importance: float = 0.5
    confidence: float = 0.5
    subject: Subject = "user"
    keywords: tuple[str, ...] = ()
    emotion: Emotion | None = None
    # Text or id of the older fact this one updates, as the hippocampus wrote it.
    supersedes: str | None = None
    # Whom it is about (``memory.subjects``), set by the save gate's screening.
    about: tuple[About, ...] = ()
    # Whom the hippocampus said it is about (full contract's "about": a name or a
    # relation); None: the user. Checked against the user's words by the screening.
    named: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "category", normalise_category(self.category))
        object.__setattr__(self, "importance", clamp01(self.importance))
        object.__setattr__(self, "confidence", clamp01(self.confidence))
        object.__setattr__(self, "keywords", tuple(k.lower() for k in self.keywords))


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    """Channel weights of the score. Defaults are limbic's (golden-scoring.json, ``weights``)."""

    recency: float = 0.25
    importance: float = 0.35
    relevance: float = 0.25
    emotion: float = 0.15
    base: float = 0.70
    cosine: float = 0.30
    recency_half_life_days: float = 7.0


@dataclass(frozen=True, slots=True)
class HybridWeights:
    """Channel weights of the ``hybrid`` score (``backend.memory.hybrid``; docs/memory-model.md).

    ``final = (cosine*c + relevance*r + importance*i + recency*t + emotion*e) / sum(weights)``
    where ``r`` is the lexical (BM25) channel. ``cjk_cosine`` is how far the cosine of CJK
    query text is trusted: the untrusted share of the cosine weight moves to the lexical
    channel (0 suits the local MiniLM embedder, whose vocabulary has almost no CJK; use 1
    with a multilingual embedder). ``relevance_scale``: BM25 is divided by
    ``relevance_scale * ln(1 + (N + 0.5) / 0.5)``, the IDF of a token no memory has (N =
    documents in the namespace), and clipped to 1.
    """

    cosine: float = 0.65
    relevance: float = 0.2
    importance: float = 0.15
    recency: float = 0.0
    emotion: float = 0.0
    recency_half_life_days: float = 7.0
    cjk_cosine: float = 0.0
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    relevance_scale: float = 2.0  # docs/memory-model.md, "Defaults and why"


@dataclass(frozen=True, slots=True)
class ScoreBreakdown:
    """Every channel of one memory's score; ``cosine`` is ``None`` when MISSING, never 0.

    ``rerank``: the cross-encoder's relevance in [0, 1] (``backend.memory.rerank``), ``None``
    where it did not read the memory; ``final`` then includes its share."""

    recency: float
    importance: float
    relevance: float
    emotion: float
    cosine: float | None
    base: float
    final: float
    rerank: float | None = None
    # hybrid: the share of the lexical weight moved to the cosine because the message and
    # the memory are in different scripts (``backend.memory.hybrid``, "Crossed scripts").
    crossed: float = 0.0


@dataclass(frozen=True, slots=True)
class ScoredMemory:
    memory: Memory
    score: ScoreBreakdown


@dataclass(frozen=True, slots=True)
class RetrievalPolicy:
    """How activation picks memories; ``lam``/``eps`` are GIST's (docs/memory-model.md)."""

    k: int = 8
    lam: float = 0.5
    eps: float = 0.1
    weights: ScoreWeights = ScoreWeights()
    # ``limbic`` scores with ``weights`` (the golden fixture's rule); ``hybrid`` with
    # ``hybrid`` (cosine + BM25 lexical + importance) and collapses restatements first.
    mode: Literal["limbic", "hybrid"] = "limbic"
    hybrid: HybridWeights = HybridWeights()
    # hybrid: two memories at least this similar (``restatements.fact_similarity``) state one
    # fact; only the better-scored one stays a candidate for GIST.
    same_fact: float = 0.6
    # ... where the vector cosine counts only from this value (the save gate's
    # ``duplicate_cosine``): below it, two memories on one subject are neighbours, not one
    # fact (LoCoMo evidence recall@8: 0.429 with it at 0.6, 0.539 at 0.92).
    same_fact_cosine: float = 0.92
    # hybrid: memories whose relevance evidence (cosine and lexical, in [0, 1]) is below
    # this are not activated at all (an off-topic message recalls little or nothing).
    min_relevance: float = 0.0
    # hybrid: the top ``rerank_n`` (after the floor) are read again by the cross-encoder
    # (``backend.memory.rerank``), its relevance blended in at ``rerank_weight``; 0: off.
    rerank_n: int = 0
    rerank_weight: float = 0.3
    # ... and a memory it calls this relevant or more is kept through GIST: diversity
    # chooses among the others (above 1: none is kept; LoCoMo: diversity cost 0.004
    # recall at 30 pairs without it, nothing with it).
    rerank_keep: float = 0.2


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """Save-gate thresholds (docs/memory-model.md, "The save gate")."""

    min_importance: float = 0.4  # limbic's gate
    min_confidence: float = 0.6  # limbic's gate
    echo_cosine: float = 0.9  # re-extraction of a fact recalled this turn
    duplicate_cosine: float = 0.92  # near-duplicate of a stored memory (configurable)
    # The "same fact" test (``restatements.fact_similarity``) for the echo guard and within-turn
    # deduplication: stricter than retrieval's collapse, since a wrong merge on write
    # loses a fact for good where one on read only hides it for a turn.
    same_fact: float = 0.8
    # Share of a candidate's content the user's words must hold (``memory.screening``).
    min_support: float = 0.6


@dataclass(frozen=True, slots=True)
class ActivationPolicy:
    """How the candidate pool is gathered before scoring (docs/memory-model.md, step 1)."""

    retrieval: RetrievalPolicy = RetrievalPolicy()
    pool: int = 50  # ANN neighbours of the query (the spec's "about 50")
    salient_n: int = 5  # recent high-importance memories that may surface without a match
    salient_min_importance: float = 0.7
    salient_days: float = 30.0
    keyword_n: int = 10  # lexical candidates per query keyword (helps when cosine is weak)
    # Candidates from the lexical index (``backend.stores.lexical_index``), best BM25
    # first; 0: no lexical index is kept or consulted.
    lexical_pool: int = 0
    # Memories below the save gate's importance bar would never have been written by this
    # app (imports and legacy data can hold them); activation leaves them out.
    min_importance: float = 0.4
    gate_neighbours: int = 8  # stored neighbours the gate compares a candidate with
    # The cross-encoder's time a turn, in ms: the top ``retrieval.rerank_n`` are cut to the
    # pairs that fit at its recent pace (``backend.longterm.rerank_pace``); None: no cut.
    rerank_budget_ms: float | None = None
