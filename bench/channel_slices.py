"""What the recency and emotion channels do, per query slice, in the app's hybrid ranking.

    python -m bench.channel_slices [--corpus bench/data/eval] [--k 8] [--weights 0.05 0.1 0.2]

The hybrid default weighs recency and emotion 0 (docs/memory-model.md). This runs the
app's default pipeline on the eval corpus (``bench.retrieval_quality``'s loading and
``Rig``, in-memory store, local MiniLM) with each channel at each weight in turn, and
prints recall@k overall and on the slices where each channel should matter: ``emotional``
(emotion), ``history`` and ``updated_fact`` (recency), plus stale and redundancy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from backend.config import MemorySettings
from backend.embeddings.local_minilm import LocalMiniLMEmbedder
from bench.retrieval_quality import NS, Rig, Scores, _jsonl, evaluate, load_memories, make_store

DEFAULT_CORPUS = Path(__file__).resolve().parent / "data" / "eval"  # bench/data/eval/PROVENANCE.md
SLICES = ("emotional", "history", "updated_fact")


def slice_recall(queries: list[dict[str, Any]], scores: Scores, tag: str) -> str:
    values = [
        scores.per_query[q["id"]]
        for q in queries
        if tag in (q.get("tags") or []) and q["id"] in scores.per_query
    ]
    return f"{sum(values) / len(values):.3f}" if values else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--weights", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    args = parser.parse_args(argv)
    rows = _jsonl(args.corpus / "memories.jsonl")
    queries = _jsonl(args.corpus / "queries.jsonl")
    topic = {row["id"]: row["topic"] for row in rows}
    embedder = LocalMiniLMEmbedder()
    memories = load_memories(rows, embedder)
    variants: list[tuple[str, MemorySettings]] = [
        ("default (recency 0, emotion 0)", MemorySettings())
    ]
    for channel in ("recency", "emotion"):
        for weight in args.weights:
            settings = MemorySettings.model_validate({"hybrid": {channel: weight}})
            variants.append((f"{channel} {weight:g}", settings))
    print(f"corpus: {args.corpus}, k={args.k}, store=memory, embedder={embedder.model}\n")
    header = " | ".join(f"{tag} recall" for tag in SLICES)
    print(f"| hybrid weights | recall@{args.k} | {header} | stale | redundancy |")
    print("| --- | ---: | " + " | ".join("---:" for _ in SLICES) + " | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store("memory", Path(tmp))
        store.upsert(NS, memories)
        for name, settings in variants:
            rig = Rig(store, embedder, args.k, settings=settings)
            s = evaluate(queries, topic, rig.app_default())
            cells = " | ".join(slice_recall(queries, s, tag) for tag in SLICES)
            print(f"| {name} | {s.recall:.3f} | {cells} | {s.stale:.3f} | {s.redundancy:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
