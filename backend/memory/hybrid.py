"""Hybrid scoring: cosine + BM25 lexical relevance + importance.

The ``limbic`` rule (``backend.memory.scoring``) is pinned by a golden fixture and stays as
it is. This module is the app's default ranking (``RetrievalPolicy.mode == "hybrid"``);
docs/memory-model.md explains every choice and the measured numbers. In short:

```
trust     = 1 - cjk_share(query) * (1 - w.cjk_cosine)   # 0 when the memory has no cosine
crossed   = |cjk_share(query) - cjk_share(memory)|       # two-part vectors only, else 0
relevance = min(1, BM25(query, memory) / (w.relevance_scale * ln(1 + (N + 0.5) / 0.5)))
lexical   = w.relevance + (1 - trust) * w.cosine          # untrusted cosine weight moves here
w_rel     = (1 - crossed) * lexical
w_cos     = trust * w.cosine + crossed * lexical          # and blind lexical weight here
total     = w.cosine + w.relevance + w.importance + w.recency + w.emotion
base      = (w_rel*relevance + w.importance*importance + w.recency*recency
             + w.emotion*emotion) / total
final     = clamp01(base + w_cos * max(0, cosine) / total)
```

- **Tokens** (:func:`lexical_tokens`): the keywords of ``keywords.py`` (limbic's English
  rule, Unicode words, CJK bigrams), the stored keywords, a light English suffix folding
  (plural / -ed / -ing / final e: "called" and "call" meet), and CJK single characters
  besides the bigrams ("我弟" and "弟弟" share 弟), so Chinese matches survive word
  boundaries the bigrams cut wrongly. IDF weighs every token, so the frequent characters
  (用, 户 of 用户) count for little on their own.
- **BM25** with binary term frequency (a memory is one sentence) over corpus statistics
  (:class:`CorpusStats`): those of the whole namespace when the lexical index supplies
  them, else those of the candidate pool.
- **Cosine trust**: an embedder whose vocabulary lacks CJK (the local MiniLM) gives
  Chinese text near-random cosines; the share of CJK letters in the query moves that much
  of the cosine weight to the lexical channel (``cjk_cosine`` = 0). With a multilingual
  embedder set ``cjk_cosine`` = 1 and nothing moves.
- **Crossed scripts**: the lexical channel cannot match a Chinese message with an English
  note; with two-part vectors (``vector_parts``: a multilingual part reads such pairs)
  the share of the pair that crosses scripts moves the lexical weight to the cosine, so
  that an English note competes with Chinese ones on what it says, not on shared
  characters it cannot have. Without them the cosine of such a pair is noise and
  nothing moves.
- **Restatements** (``backend.memory.restatements``): two memories
  state one fact when their cosine (ignored for two CJK texts under the same trust rule)
  or their IDF-weighted token cosine reaches ``same_fact``. Walking the ranking, a memory
  that restates a better-scored one is dropped before GIST runs, so GIST spends its
  budget on distinct facts.

The breakdown keeps the UI's channels: ``relevance`` is the lexical (BM25) channel,
``cosine`` the raw cosine (``None`` when MISSING), ``recency`` and ``emotion`` their raw
values even at weight 0 (shown, not weighted), ``base`` the score without the cosine
term, ``final`` the whole score. ``backend.memory.explain`` splits ``final`` into each
channel's weighted share (a channel of weight 0 is "unused").

Pure: no I/O, no clock, no randomness; never raises for data (a bad vector is MISSING).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

import numpy as np

from backend.memory.keywords import (
    STOP_WORDS_JA,
    STOP_WORDS_ZH,
    is_cjk,
    keyword_set,
    stored_keyword_tokens,
)
from backend.memory.scoring import emotion_score, pool_cosines, recency
from backend.memory.types import (
    HybridWeights,
    Memory,
    ScoreBreakdown,
    ScoredMemory,
    clamp01,
)
from backend.memory.vector_parts import VectorParts

__all__ = [
    "DEFAULT_HYBRID",
    "CorpusStats",
    "bm25",
    "channel_weights",
    "cjk_share",
    "cosine_trust",
    "fold",
    "lexical_relevance",
    "lexical_tokens",
    "memory_tokens",
    "relevance_evidence",
    "score_hybrid",
    "weight_total",
]

DEFAULT_HYBRID = HybridWeights()
_STOP_CJK_CHARS = frozenset(w for w in STOP_WORDS_ZH | STOP_WORDS_JA if len(w) == 1)
_VOWELS = frozenset("aeiouy")


# --- tokens -------------------------------------------------------------------------


def fold(word: str) -> str:
    """A light English suffix folding (not a full stemmer): plural, -ed, -ing, final e.

    Only ASCII words of 4 letters or more change; everything else passes through.
    "memories"→"memory", "called"→"call", "invite"/"invites"/"invited"/"inviting"→"invit",
    "stopped"/"stopping"→"stop". Deliberately conservative: a wrong merge costs more than
    a missed one.
    """
    if len(word) < 4 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix, shortest in (("ing", 6), ("ed", 5)):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(word) >= shortest and _VOWELS & set(stem):
            if (
                len(stem) >= 3
                and stem[-1] == stem[-2]
                and stem[-1] not in _VOWELS | {"l", "s", "z"}
            ):
                stem = stem[:-1]  # stopped → stopp → stop
            return stem
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _expand(tokens: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for token in tokens:
        if is_cjk(token):
            out.add(token)
            if len(token) > 1:
                out.update(ch for ch in token if ch not in _STOP_CJK_CHARS and is_cjk(ch))
        else:
            out.add(fold(token))
    return out


@lru_cache(maxsize=65_536)
def _tokens_cached(text: str, keywords: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_expand(keyword_set(text) | stored_keyword_tokens(keywords)))


def lexical_tokens(text: str, keywords: Iterable[str] = ()) -> frozenset[str]:
    """The lexical channel's tokens of a text (plus stored keywords); see the module doc."""
    return _tokens_cached(text or "", tuple(keywords))


def memory_tokens(memory: Memory) -> frozenset[str]:
    """:func:`lexical_tokens` of a memory's content and stored keywords."""
    return _tokens_cached(memory.content, memory.keywords)


@lru_cache(maxsize=65_536)
def cjk_share(text: str) -> float:
    """The share of CJK characters among the letters of ``text`` (0 when it has none).
    Cached: every activation asks it of each candidate (crossed scripts, the reranker)."""
    letters = cjk = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            if is_cjk(ch):
                cjk += 1
    return cjk / letters if letters else 0.0


def cosine_trust(query_text: str, weights: HybridWeights = DEFAULT_HYBRID) -> float:
    """How far this query's cosine is trusted: ``1 - cjk_share * (1 - w.cjk_cosine)``."""
    return 1.0 - cjk_share(query_text) * (1.0 - clamp01(weights.cjk_cosine))


# --- BM25 ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CorpusStats:
    """Document frequencies for BM25: ``n_docs`` documents of ``avg_len`` tokens on average.

    ``doc_freq`` needs to hold only the tokens that will be looked up (a missing token
    has frequency 0).
    """

    n_docs: int
    avg_len: float
    doc_freq: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_token_sets(cls, docs: Iterable[Collection[str]]) -> CorpusStats:
        """Statistics of these documents (e.g. the candidate pool)."""
        df: Counter[str] = Counter()
        n = total = 0
        for tokens in docs:
            n += 1
            total += len(tokens)
            df.update(tokens)
        return cls(n_docs=n, avg_len=(total / n) if n else 0.0, doc_freq=dict(df))

    def idf(self, token: str) -> float:
        """BM25's ``ln(1 + (N - df + 0.5) / (df + 0.5))``, never negative."""
        df = min(self.doc_freq.get(token, 0), self.n_docs)
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    @property
    def max_idf(self) -> float:
        """The IDF of a token no document has: the scale of :func:`lexical_relevance`."""
        return math.log(1.0 + (self.n_docs + 0.5) / 0.5)


def bm25(
    query_tokens: Collection[str],
    doc_tokens: Collection[str],
    stats: CorpusStats,
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> float:
    """BM25 with binary term frequency (each shared token counts once)."""
    shared = [t for t in query_tokens if t in doc_tokens] if query_tokens else []
    if not shared:
        return 0.0
    avg = stats.avg_len if stats.avg_len > 0 else float(len(doc_tokens) or 1)
    norm = (k1 + 1.0) / (1.0 + k1 * (1.0 - b + b * len(doc_tokens) / avg))
    return norm * sum(stats.idf(t) for t in shared)


def lexical_relevance(
    query_tokens: Collection[str],
    doc_tokens: Collection[str],
    stats: CorpusStats,
    weights: HybridWeights = DEFAULT_HYBRID,
) -> float:
    """The ``relevance`` channel: BM25 over ``relevance_scale * max_idf``, clipped to [0, 1]."""
    score = bm25(query_tokens, doc_tokens, stats, k1=weights.bm25_k1, b=weights.bm25_b)
    if score <= 0.0:
        return 0.0
    scale = max(weights.relevance_scale, 1e-9) * max(stats.max_idf, 1e-9)
    return clamp01(score / scale)


# --- scoring ------------------------------------------------------------------------


def weight_total(w: HybridWeights) -> float:
    total = w.cosine + w.relevance + w.importance + w.recency + w.emotion
    return total if total > 0 else 1.0


def score_hybrid(
    memories: Iterable[Memory],
    *,
    now: datetime,
    query_text: str,
    query_vector: np.ndarray | None = None,
    target_emotion: str | None = None,
    weights: HybridWeights = DEFAULT_HYBRID,
    stats: CorpusStats | None = None,
    parts: VectorParts | None = None,
) -> list[ScoredMemory]:
    """Score every memory (module doc); sorted by final desc, ties by id ascending.

    ``stats``: corpus statistics for BM25 (the namespace's, from the lexical index);
    ``None`` computes them over ``memories`` themselves. ``parts``: the vectors hold two
    parts, each pair read by the one that knows its script (``vector_parts``).
    """
    pool = list(memories)
    if not pool:
        return []
    w = weights
    q_tokens = lexical_tokens(query_text)
    docs = [memory_tokens(m) for m in pool]
    corpus = stats if stats is not None else CorpusStats.from_token_sets(docs)
    if parts is None:
        cosines = pool_cosines(query_vector, pool)
    else:
        cosines = parts.query_cosines(query_vector, query_text, pool)
    trust = cosine_trust(query_text, w)
    query_cjk = cjk_share(query_text)
    total = weight_total(w)
    scored = []
    for memory, tokens, cos in zip(pool, docs, cosines, strict=True):
        t = trust if cos is not None else 0.0
        crossed = 0.0
        if parts is not None and cos is not None:
            crossed = abs(query_cjk - cjk_share(memory.content))
        w_cos, w_rel = channel_weights(t, crossed, w)
        rel = lexical_relevance(q_tokens, tokens, corpus, w)
        rec = recency(memory.last_accessed, now, w.recency_half_life_days)
        emo = emotion_score(memory, target_emotion)
        imp = memory.importance
        base = (w_rel * rel + w.importance * imp + w.recency * rec + w.emotion * emo) / total
        final = base if cos is None else base + w_cos * max(0.0, cos) / total
        scored.append(
            ScoredMemory(
                memory=memory,
                score=ScoreBreakdown(
                    recency=rec,
                    importance=imp,
                    relevance=rel,
                    emotion=emo,
                    cosine=cos,
                    base=clamp01(base),
                    final=clamp01(final),
                    crossed=crossed,
                ),
            )
        )
    scored.sort(key=lambda item: (-item.score.final, item.memory.id))
    return scored


def channel_weights(trust: float, crossed: float, weights: HybridWeights) -> tuple[float, float]:
    """One pair's (cosine, lexical) weights (module doc): the untrusted share of the cosine
    weight moves to the lexical channel, the share of the lexical weight blind to the
    pair's crossed scripts to the cosine; the two always sum to ``w.cosine + w.relevance``."""
    w = weights
    lexical = w.relevance + (1.0 - trust) * w.cosine
    return trust * w.cosine + crossed * lexical, (1.0 - crossed) * lexical


def relevance_evidence(
    score: ScoreBreakdown, trust: float, weights: HybridWeights = DEFAULT_HYBRID
) -> float:
    """How much the query itself speaks for a memory, in [0, 1]: the trust-weighted mix of
    its cosine and lexical channels (importance, recency and emotion left out)."""
    w = weights
    t = trust if score.cosine is not None else 0.0
    cos = max(0.0, score.cosine) if score.cosine is not None else 0.0
    denominator = w.cosine + w.relevance
    if denominator <= 0:
        return 0.0
    w_cos, w_rel = channel_weights(t, score.crossed, w)
    return clamp01((w_cos * cos + w_rel * score.relevance) / denominator)
