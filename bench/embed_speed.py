"""Speed of the local embedder (all-MiniLM-L6-v2 int8 on onnxruntime).

    python -m bench.embed_speed [--threads N] [--batch-size N] [--queries 200] [--rounds 5]

Prints a markdown table: model load time, single short query latency (p50/p95 over
``--queries`` distinct queries, after a warm-up), and a batch of 64 memory-sized
sentences in one ``embed`` call (p50 over ``--rounds`` rounds, and texts per second). The load
average is printed too: on a busy 2-core machine it moves every number.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from backend.embeddings.local_minilm import DEFAULT_BATCH_SIZE, LocalMiniLMEmbedder
from backend.embeddings.onnx_encoder import DEFAULT_INTRA_OP_THREADS

SUBJECTS = ["my cat", "my sister", "the trip to Kyoto", "my new job", "the piano", "tea"]
QUESTIONS = ["what did I say about {}?", "do you remember {}?", "tell me about {} again"]


def short_queries(count: int) -> list[str]:
    """Distinct 5-9 word queries, like the ones the engine embeds per turn."""
    out = []
    for i in range(count):
        template = QUESTIONS[i % len(QUESTIONS)]
        out.append(template.format(SUBJECTS[i % len(SUBJECTS)]) + f" ({i})")
    return out


def memory_sentences(count: int) -> list[str]:
    """Memory-sized sentences of varied length (8-40 words)."""
    words = ["the", "user", "said", "they", "like", "to", "walk", "by", "the", "river"]
    return [" ".join(words[j % len(words)] for j in range(8 + (i * 7) % 33)) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=DEFAULT_INTRA_OP_THREADS)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    started = time.perf_counter()
    embedder = LocalMiniLMEmbedder(intra_op_threads=args.threads, batch_size=args.batch_size)
    load_ms = (time.perf_counter() - started) * 1000

    queries = short_queries(args.queries)
    for query in queries[:20]:  # warm-up: first runs allocate and tune kernels
        embedder.embed([query])
    latencies = []
    for query in queries:
        t0 = time.perf_counter()
        embedder.embed([query])
        latencies.append((time.perf_counter() - t0) * 1000)

    batch = memory_sentences(64)
    embedder.embed(batch)
    batch_s = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        embedder.embed(batch)
        batch_s.append(time.perf_counter() - t0)
    batch_p50 = float(np.percentile(batch_s, 50))

    load1, _, _ = os.getloadavg()
    print(
        f"model: {embedder.model}, intra_op_threads={args.threads}, "
        f"batch_size={args.batch_size}, "
        f"cores={os.cpu_count()}, load average {load1:.2f}\n"
    )
    print("| measure | value |")
    print("| --- | ---: |")
    print(f"| model load (read + sha256 + session) | {load_ms:.0f} ms |")
    p50, p95 = np.percentile(latencies, [50, 95])
    print(f"| single short query p50 ({len(latencies)} queries) | {p50:.2f} ms |")
    print(f"| single short query p95 | {p95:.2f} ms |")
    print(f"| batch of 64 sentences, p50 of {args.rounds} | {batch_p50 * 1000:.0f} ms |")
    print(f"| batch of 64 throughput | {64 / batch_p50:.0f} texts/s |")


if __name__ == "__main__":
    main()
