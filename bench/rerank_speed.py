"""How long the cross-encoder takes to read the top n of an activation: by n, batch size,
threads, and against the shipped tokenizer's padding to 512 tokens.

    python -m bench.rerank_speed [--corpus bench/data/eval] [--queries 40] [--repeat 3]
        [--ns 10,20,30,50] [--batches 1,4,8,16,32] [--threads 1,2]

The pairs are the eval corpus's own: each of ``--queries`` English queries with the ``n``
memories that follow its first relevant one in the corpus (short memories, as the app
stores them: 10-20 words). Each setting scores every query's pairs ``--repeat`` times
(the first pass is a warm-up and is not timed); p50 and p95 are over the timed calls.
Reads the files install.sh installs; nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from backend.reranking import cross_encoder
from backend.reranking.cross_encoder import MAX_TOKENS, CrossEncoderReranker

DEFAULT_CORPUS = Path(__file__).resolve().parent / "data" / "eval"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def workload(corpus: Path, queries: int, n: int) -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in (corpus / "memories.jsonl").read_text().splitlines()]
    asked = [json.loads(line) for line in (corpus / "queries.jsonl").read_text().splitlines()]
    position = {row["id"]: i for i, row in enumerate(rows)}
    texts = [row["content"] for row in rows]
    out = []
    for query in asked:
        if query.get("lang", "en") != "en" or not query.get("relevant"):
            continue
        start = position[query["relevant"][0]]
        passages = [texts[(start + i) % len(texts)] for i in range(n)]
        out.append((query["text"], passages))
        if len(out) == queries:
            break
    return out


def timed(
    model: CrossEncoderReranker, work: list[tuple[str, list[str]]], repeat: int
) -> list[float]:
    for query, passages in work:  # warm-up
        model.score(query, passages)
    ms = []
    for _ in range(max(1, repeat - 1)):
        for query, passages in work:
            started = time.perf_counter()
            model.score(query, passages)
            ms.append((time.perf_counter() - started) * 1e3)
    return ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ns", default="10,20,30,50")
    parser.add_argument("--batches", default="1,4,8,16,32")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--no-padded", action="store_true", help="skip the 512-padding row")
    args = parser.parse_args(argv)
    missing = cross_encoder.installed()
    if missing is not None:
        print(f"rerank_speed: {missing}", file=sys.stderr)
        return 2
    ns = [int(x) for x in args.ns.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    threads = [int(x) for x in args.threads.split(",")]
    print(f"machine: {platform.machine()}, nproc {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f}; {args.queries} queries of {args.corpus}, "
          f"{args.repeat - 1} timed passes\n")  # fmt: skip
    print("| n | threads | batch | p50 ms | p95 ms | mean ms a pair |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in ns:
        work = workload(args.corpus, args.queries, n)
        lengths = [len(ids) for q, ps in work for ids in CrossEncoderReranker().encode(q, ps)]
        for thread_count in threads:
            for batch in batches:
                model = CrossEncoderReranker(intra_op_threads=thread_count, batch_size=batch)
                ms = timed(model, work, args.repeat)
                print(f"| {n} | {thread_count} | {batch} | {statistics.median(ms):.1f} | "
                      f"{_pct(ms, 95):.1f} | {statistics.fmean(ms) / n:.2f} |")  # fmt: skip
        if not args.no_padded:
            model = CrossEncoderReranker(batch_size=max(batches))
            # What the shipped tokenizer.json does: every pair padded to 512 tokens.
            model._tokenizer.enable_padding(length=MAX_TOKENS)
            ms = timed(model, work, 2)
            print(f"| {n} | {model.intra_op_threads} | {max(batches)}, padded to 512 | "
                  f"{statistics.median(ms):.1f} | {_pct(ms, 95):.1f} | "
                  f"{statistics.fmean(ms) / n:.2f} |")  # fmt: skip
        print(f"| {n} | pair length (tokens) | p50 {statistics.median(lengths):.0f}, "
              f"max {max(lengths)} | | | |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
