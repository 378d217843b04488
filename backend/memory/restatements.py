"""Restatements: when two memories state one fact, and the collapse that keeps the best
of each before GIST (docs/memory-model.md, "Retrieval", step 4).

Two memories state one fact when their IDF-weighted token cosine or keyword cosine
reaches ``same_fact``, or their vector cosine reaches ``same_fact_cosine`` (conversation
turns on one subject sit at MiniLM cosine 0.6-0.85 without restating anything). The
cosine of two CJK texts counts only as far as the embedder is trusted with CJK
(``hybrid.cosine_trust``). The save gate's "same fact" test uses the same function.
Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from backend.memory.hybrid import DEFAULT_HYBRID, CorpusStats, lexical_tokens, memory_tokens
from backend.memory.keywords import is_cjk
from backend.memory.types import HybridWeights, Memory, clamp01
from backend.memory.vector_parts import VectorParts


def _unit_rows(memories: Sequence[Memory]) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors of the memories (zero rows where MISSING or of another dimension)."""
    dims = Counter(
        np.shape(m.embedding)[0]
        for m in memories
        if m.embedding is not None and np.ndim(m.embedding) == 1
    )
    ok = np.zeros(len(memories), dtype=bool)
    if not dims:
        return np.zeros((len(memories), 1)), ok
    dim = dims.most_common(1)[0][0]
    rows = np.zeros((len(memories), dim))
    for i, memory in enumerate(memories):
        vector = memory.embedding
        if vector is not None and np.ndim(vector) == 1 and np.shape(vector)[0] == dim:
            try:
                rows[i] = np.asarray(vector, dtype=np.float64)
            except (TypeError, ValueError):
                continue
            ok[i] = True
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(rows, axis=1)
    ok &= np.isfinite(norms) & (norms > 0)
    rows[~ok] = 0.0
    rows[ok] /= norms[ok, None]
    return rows, ok


def _token_cosines(
    doc_sets: Sequence[Sequence[frozenset[str]]], corpus: CorpusStats
) -> list[np.ndarray]:
    """For each list of token sets: the pairwise cosine of IDF-weighted binary vectors."""
    vocab: dict[str, int] = {}
    for docs in doc_sets:
        for tokens in docs:
            for token in tokens:
                if token not in vocab:
                    vocab[token] = len(vocab)
    idf = np.array([corpus.idf(token) for token in vocab], dtype=np.float32)
    out = []
    for docs in doc_sets:
        # float32: small float64 products hit OpenBLAS's threading overhead (10-50x
        # slower on a busy 2-core machine); a similarity needs no more precision.
        matrix = np.zeros((len(docs), max(1, len(vocab))), dtype=np.float32)
        rows = [i for i, tokens in enumerate(docs) for _ in tokens]
        cols = [vocab[token] for tokens in docs for token in tokens]
        if cols:
            matrix[rows, cols] = idf[cols]
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
        out.append((matrix @ matrix.T).astype(np.float64))
    return out


def fact_similarity(
    memories: Sequence[Memory],
    stats: CorpusStats | None = None,
    weights: HybridWeights = DEFAULT_HYBRID,
) -> np.ndarray:
    """Pairwise "same fact" similarity in [0, 1], diagonal 1: the largest of

    - the vector cosine (of two CJK memories only ``cjk_cosine`` of it, see
      :func:`cosine_trust`; nothing when a vector is missing);
    - the cosine of their IDF-weighted token sets (:func:`memory_tokens`);
    - the same over their stored keywords alone: the extractor labels restatements of
      one fact with much the same keywords, whatever the wording.
    """
    return fact_similarities(memories, stats, weights)[0]


def _vector_cosines(
    memories: Sequence[Memory], weights: HybridWeights
) -> tuple[np.ndarray, np.ndarray]:
    """The memories' pairwise vector cosines in one space (of two CJK memories only
    ``cjk_cosine`` of it; 0 in the rows and columns of a MISSING vector), and which
    memories have a usable vector."""
    rows, ok = _unit_rows(memories)
    unit = rows.astype(np.float32)
    cos = (unit @ unit.T).astype(np.float64)
    cjk = np.array([is_cjk(m.content) for m in memories])
    cos = np.where(np.outer(cjk, cjk), cos * clamp01(weights.cjk_cosine), cos)
    cos[~ok, :] = 0.0
    cos[:, ~ok] = 0.0
    return cos, ok


def fact_similarities(
    memories: Sequence[Memory],
    stats: CorpusStats | None = None,
    weights: HybridWeights = DEFAULT_HYBRID,
    *,
    cosine_min: float = 0.0,
    parts: VectorParts | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fact_similarity`, and the same with the vector cosine counted only where it
    reaches ``cosine_min`` (the restatement test of retrieval: in conversation, turns on
    one subject sit at MiniLM cosine 0.6-0.85 without restating one fact, while the
    lexical channels tell restatements apart; docs/benchmarks.md, "LoCoMo"). ``parts``:
    the vectors hold two parts, each pair read by the one that knows its script
    (``vector_parts``; trusted for CJK pairs too)."""
    n = len(memories)
    if n == 0:
        return np.zeros((0, 0)), np.zeros((0, 0))
    docs = [memory_tokens(m) for m in memories]
    keyword_docs = [lexical_tokens("", m.keywords) for m in memories]
    corpus = stats if stats is not None else CorpusStats.from_token_sets(docs)
    by_tokens, by_keywords = _token_cosines([docs, keyword_docs], corpus)
    lexical = np.maximum(by_tokens, by_keywords)
    similarity, same = lexical, lexical
    if parts is not None:
        cos, ok = parts.pair_cosines(memories)
    else:
        cos, ok = _vector_cosines(memories, weights)
    if ok.sum() >= 2:
        similarity = np.maximum(lexical, cos)
        same = np.maximum(lexical, np.where(cos >= cosine_min, cos, 0.0))
    similarity = np.clip(similarity, 0.0, 1.0)
    same = np.clip(same, 0.0, 1.0)
    np.fill_diagonal(similarity, 1.0)
    np.fill_diagonal(same, 1.0)
    return similarity, same


def collapse_restatements(
    similarity: np.ndarray, threshold: float, limit: int | None = None
) -> list[int]:
    """Indices (in rank order) of the rows that restate no better-ranked kept row.

    Rows are assumed sorted best first. A row whose similarity to a kept row is
    ``>= threshold`` is dropped; ``threshold > 1`` keeps everything. Stops after
    ``limit`` kept rows when given.
    """
    kept: list[int] = []
    n = len(similarity)
    for i in range(n):
        if kept and float(np.max(similarity[i, kept])) >= threshold:
            continue
        kept.append(i)
        if limit is not None and len(kept) >= limit:
            break
    return kept
