"""The save gate's and the collapse's thresholds on each embedder's cosine scale (issue 27).

    python -m bench.embedder_thresholds [--only minilm e5 ...] [--corpus bench/data/eval]

``memory.gate.echo_cosine`` (0.9), ``duplicate_cosine`` (0.92, also where the vector cosine
starts to count in the "same fact" tests: ``same_fact_cosine``) and the gate's
``same_fact`` (0.8) were set on MiniLM's cosines. For each embedder (the candidates of
``bench.embedder_candidates``) this embeds, without any model but the embedder:

- **restatements**, pairs that state one fact: the shared corpus's ``paraphrase_of``
  pairs and every pair within a topic of ``bench.paraphrase_corpus`` (12 facts x 5);
- **updates**, an old fact and the one that supersedes it (the corpus's
  ``superseded_by``): the gate must not take the update for a duplicate (it would
  reinforce the old value instead of superseding it);
- **distinct**, pairs of memories on different topics (both corpora): a merge loses a fact.

and prints, per pair kind, the cosine's quantiles and how many pairs reach each
threshold, by the cosine alone and by the gate's "same fact" test
(``restatements.fact_similarities`` with the vector cosine counted from
``duplicate_cosine``, the way ``backend.memory.gate`` calls it). Restatements above a
threshold are merges the gate should make; updates and distinct pairs above it are the
ones it must not.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from backend.memory.restatements import fact_similarities
from backend.memory.types import GatePolicy, Memory
from bench.embedder_candidates import CANDIDATES, DEFAULT_CORPUS
from bench.paraphrase_corpus import TOPICS
from bench.retrieval_quality import load_memories

THRESHOLDS = (0.8, 0.85, 0.9, 0.92, 0.95)


def _pairs(corpus: Path) -> tuple[list[dict[str, Any]], dict[str, list[tuple[int, int]]]]:
    rows = [
        json.loads(line)
        for line in (corpus / "memories.jsonl").read_text(encoding="utf-8").splitlines()
        if line
    ]
    index = {row["id"]: i for i, row in enumerate(rows)}
    kinds: dict[str, list[tuple[int, int]]] = {"restatement": [], "update": [], "distinct": []}
    for i, row in enumerate(rows):
        if row.get("paraphrase_of") in index:
            kinds["restatement"].append((index[row["paraphrase_of"]], i))
        if row.get("superseded_by") in index:
            kinds["update"].append((i, index[row["superseded_by"]]))
    for i, j in itertools.combinations(range(len(rows)), 2):
        if rows[i]["topic"] != rows[j]["topic"]:
            kinds["distinct"].append((i, j))
    start = len(rows)
    for t, (topic, importance, texts) in enumerate(TOPICS):
        for k, text in enumerate(texts):
            rows.append({
                "id": f"p{t}-{k}", "content": text, "topic": f"paraphrase-{topic}",
                "importance": importance, "created_days_ago": 1, "last_access_days_ago": 1,
                "keywords": [],
            })  # fmt: skip
    offsets = [start + 5 * t for t in range(len(TOPICS))]
    for t, base in enumerate(offsets):
        kinds["restatement"] += list(itertools.combinations(range(base, base + 5), 2))
        for other in offsets[t + 1 :]:
            kinds["distinct"] += [(base + a, other + b) for a in range(5) for b in range(5)]
    return rows, kinds


def measure(name: str, corpus: Path, threads: int) -> list[str]:
    rows, kinds = _pairs(corpus)
    embedder = CANDIDATES[name][2](threads)
    memories: list[Memory] = load_memories(rows, embedder)
    memories = [replace(m, supersedes=None, superseded_by=None) for m in memories]
    unit = np.stack([np.asarray(m.embedding, dtype=np.float64) for m in memories])
    cos = unit @ unit.T
    gate = GatePolicy()
    _, same = fact_similarities(memories, cosine_min=gate.duplicate_cosine)
    lines = []
    for kind, pairs in kinds.items():
        i, j = np.array(pairs).T
        values, facts = cos[i, j], same[i, j]
        q = np.quantile(values, [0.0, 0.1, 0.5, 0.9, 0.999, 1.0])
        reach = " | ".join(f"{int((values >= t).sum())}" for t in THRESHOLDS)
        lines.append(
            f"| {name} | {kind} ({len(pairs)}) | " + " / ".join(f"{x:.2f}" for x in q)
            + f" | {reach} | {int((facts >= gate.same_fact).sum())} |"
        )  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--only", nargs="*", choices=sorted(CANDIDATES), default=["minilm", "e5"])
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    head = " | ".join(f"≥ {t}" for t in THRESHOLDS)
    print(f"corpus {args.corpus} + bench.paraphrase_corpus; pairs reaching each cosine, "
          "and the gate's same-fact test (≥ 0.8, vector cosine from 0.92)\n")  # fmt: skip
    print(f"| embedder | pairs | cosine min / p10 / p50 / p90 / p99.9 / max | {head} | same fact |")
    print("| --- | --- | --- |" + " ---: |" * (len(THRESHOLDS) + 1))
    for name in args.only:
        for line in measure(name, args.corpus, args.threads):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
