"""Redundancy benchmark: 12 facts x 5 paraphrases, k = 8, top-k versus GIST.

    python bench/gist_redundancy.py [--embedder local|synthetic] [--k 8]

Prints, per strategy: redundancy (share of returned pairs that restate one fact),
clusters hit (distinct facts returned, of 12) and coverage (distinct facts / slots
returned: 1.0 means no slot was spent on a restatement).
"""

from __future__ import annotations

import argparse
import itertools
from datetime import UTC, datetime

import numpy as np

from backend.memory.retrieve import diversify
from backend.memory.scoring import score_pool
from backend.memory.types import Memory
from bench.paraphrase_corpus import TOPICS

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _embed(texts: list[str], kind: str) -> np.ndarray:
    if kind == "local":
        from backend.embeddings.local_minilm import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder().embed(texts)
    # Synthetic: one random direction per topic, paraphrases within ~0.05 of it.
    rng = np.random.default_rng(12)
    centres = rng.normal(size=(len(TOPICS), 384))
    rows = [centres[i // 5] + 0.15 * rng.normal(size=384) for i in range(len(texts))]
    matrix = np.asarray(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def build(kind: str) -> tuple[list[Memory], dict[str, str]]:
    texts, topic_of, importances = [], {}, []
    for topic, importance, sentences in TOPICS:
        for j, sentence in enumerate(sentences):
            texts.append(sentence)
            importances.append(importance - 0.01 * j)
            topic_of[f"{topic}-{j}"] = topic
    vectors = _embed(texts, kind)
    memories = [
        Memory(
            id=mid,
            content=text,
            category="general",
            importance=imp,
            created_at=NOW,
            last_accessed=NOW,
            embedding=vec,
        )
        for mid, text, imp, vec in zip(topic_of, texts, importances, vectors, strict=True)
    ]
    return memories, topic_of


def metrics(ids: list[str], topic_of: dict[str, str], k: int) -> tuple[float, int, float]:
    topics = [topic_of[i] for i in ids]
    pairs = list(itertools.combinations(topics, 2))
    redundancy = sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0
    hit = len(set(topics))
    return redundancy, hit, hit / len(ids) if ids else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=["local", "synthetic"], default="local")
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()

    memories, topic_of = build(args.embedder)
    ranked = score_pool(memories, now=NOW, query_text="", query_vector=None, target_emotion=None)
    rows = [("top-k", [r.memory.id for r in ranked[: args.k]])]
    for lam in (0.0, 0.5, 1.0, 2.0):
        result = diversify(ranked, k=args.k, lam=lam)
        rows.append((f"GIST lambda={lam:g}", [r.memory.id for r in result.items]))

    print(f"corpus: {len(TOPICS)} facts x 5 paraphrases, k={args.k}, embedder={args.embedder}\n")
    print("| strategy | returned | redundancy | clusters hit | coverage |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, ids in rows:
        redundancy, hit, coverage = metrics(ids, topic_of, args.k)
        print(f"| {name} | {len(ids)} | {redundancy:.3f} | {hit}/{len(TOPICS)} | {coverage:.2f} |")


if __name__ == "__main__":
    main()
