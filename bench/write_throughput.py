"""Write throughput: candidates per second through gate + embed + store.

    python -m bench.write_throughput [--candidates 400] [--prefill 1000]
        [--store chroma|memory] [--seed 20260601]

For each batch size (1: one candidate per turn, 8: a busy turn), a fresh namespace of one
store (Chroma persistent in a temp dir by default) is prefilled with ``--prefill``
memories (embedded with the local MiniLM, upserted directly), then ``--candidates``
realistic hippocampus candidates (synthetic facts from word lists and a fixed seed,
importance and confidence spread around the gate's bars, so some are rejected, and a
limited vocabulary, so some are near-duplicates that reinforce instead) go through
``LongTermMemory.write`` with the app's default gate. Prints candidates/s, p50/p95 ms
per ``write`` call, the share of that time spent embedding, and the gate's outcomes.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from backend.clock import FixedClock
from backend.config import MemorySettings
from backend.embeddings.local_minilm import LocalMiniLMEmbedder
from backend.memory.types import Candidate, Memory, Namespace
from bench.retrieval_latency import Maker, make_store, pct

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class TimedEmbedder:
    """The local embedder, adding up the time spent in ``embed``."""

    def __init__(self, inner: LocalMiniLMEmbedder) -> None:
        self.inner = inner
        self.seconds = 0.0

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started


def candidates(maker: Maker, rng: random.Random, n: int) -> list[Candidate]:
    out = []
    for _ in range(n):
        content, category, keywords = maker.memory_text()
        out.append(
            Candidate(
                content=content,
                category=category,
                keywords=keywords,
                importance=round(rng.uniform(0.3, 0.95), 2),
                confidence=round(rng.uniform(0.5, 0.98), 2),
            )
        )
    return out


def prefill(maker: Maker, embedder: LocalMiniLMEmbedder, n: int) -> list[Memory]:
    texts = [maker.memory_text() for _ in range(n)]
    vectors = embedder.embed([t[0] for t in texts]) if texts else []
    return [
        Memory(
            id=f"p{i:06d}",
            content=content,
            category=category,
            keywords=keywords,
            importance=0.6,
            created_at=NOW - timedelta(days=30),
            last_accessed=NOW,
            embedding=vectors[i],
        )
        for i, (content, category, keywords) in enumerate(texts)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=400)
    parser.add_argument("--prefill", type=int, default=1000)
    parser.add_argument("--store", choices=["chroma", "memory"], default="chroma")
    parser.add_argument("--seed", type=int, default=20260601)
    args = parser.parse_args(argv)

    from backend.longterm.memory import LongTermMemory

    settings = MemorySettings()
    local = LocalMiniLMEmbedder()
    existing = prefill(Maker(args.seed), local, args.prefill)
    work = candidates(Maker(args.seed + 1), random.Random(args.seed), args.candidates)
    print(f"machine: {platform.machine()}, nproc {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f}, Python {platform.python_version()}; store {args.store}; "
          f"prefill {args.prefill}, {args.candidates} candidates\n")  # fmt: skip
    print("| batch | candidates/s | p50 ms / call | p95 ms / call | embedding share | "
          "written | reinforced | superseded | rejected |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(args.store, Path(tmp))
        for batch in (1, 8):
            ns = Namespace("bench-writer", f"batch{batch}")
            for start in range(0, len(existing), 500):
                store.upsert(ns, existing[start : start + 500])
            embedder = TimedEmbedder(local)
            ltm = LongTermMemory(
                store, embedder, FixedClock(NOW), gate_policy=settings.gate_policy(),
                activation=settings.activation_policy(),
            )  # fmt: skip
            ltm.write(ns, [Candidate("warm-up fact about nothing", importance=0.1)])
            embedder.seconds = 0.0
            outcomes: Counter[str] = Counter()
            calls = []
            started = time.perf_counter()
            for start in range(0, len(work), batch):
                t0 = time.perf_counter()
                result = ltm.write(ns, work[start : start + batch])
                calls.append((time.perf_counter() - t0) * 1e3)
                outcomes.update(o.action for o in result)
            total = time.perf_counter() - started
            print(f"| {batch} | {len(work) / total:.1f} | {pct(calls, 50):.1f} | "
                  f"{pct(calls, 95):.1f} | {embedder.seconds / total:.0%} | "
                  f"{outcomes['write']} | {outcomes['reinforce']} | {outcomes['supersede']} | "
                  f"{outcomes['reject']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
