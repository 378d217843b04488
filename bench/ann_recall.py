"""ANN recall and latency of ChromaVectorStore against exact numpy search.

    python -m bench.ann_recall [--n 100000] [--ef-search 50,100,200,400]

Builds a persistent Chroma store in a temp dir with ``--n`` clustered unit vectors of
dim 384 (``--centroids`` gaussian clusters, fixed seed; 1% of the memories superseded,
as a live store has some), inserted through ``ChromaVectorStore.upsert`` in batches
(insert throughput is reported). Then, for each ``ef_search`` (changed in place with
``collection.modify``, the index is built once with ``--ef-construction`` and
``--max-neighbors``), runs ``--queries`` queries near existing points through
``query(n=50)`` (the default path: superseded filtered out) and compares with exact
search over the live vectors: recall@50, recall@10, latency p50/p95. One extra row
measures ``include_superseded=True``; a second table times salient/get/count/list on
the same 100k namespace. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np

from backend.memory.types import Memory, Namespace
from backend.stores import memory_codec as codec
from backend.stores.chroma_store import ChromaVectorStore
from backend.stores.memory_codec import HnswParams

NS = Namespace("bench-user", "bench-persona")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def clustered(
    n: int, dim: int, centroids: int, rng: np.random.Generator, noise: float = 0.8
) -> np.ndarray:
    """Unit vectors around ``centroids`` random directions (noise norm ~``noise`` x centre)."""
    centres = rng.standard_normal((centroids, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    points = centres[rng.integers(0, centroids, size=n)]
    points = points + rng.standard_normal((n, dim)).astype(np.float32) * (noise / np.sqrt(dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def memories(vectors: np.ndarray, superseded: np.ndarray, rng: np.random.Generator) -> list[Memory]:
    importance = rng.uniform(0.0, 1.0, size=len(vectors))
    return [
        Memory(
            id=f"m{i:07d}",
            content=f"memory number {i} about topic {i % 97}",
            category=("work", "preference", "personal_fact")[i % 3],
            importance=float(importance[i]),
            created_at=T0 + timedelta(seconds=i),
            last_accessed=T0 + timedelta(seconds=i),
            embedding=vectors[i],
            superseded_by="newer" if superseded[i] else None,
        )
        for i in range(len(vectors))
    ]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def run_queries(
    store: ChromaVectorStore, queries: np.ndarray, truth: list[np.ndarray], k: int, *, all_: bool
) -> tuple[float, float, float, float]:
    """recall@k, recall@10, p50 ms, p95 ms."""
    recalls, recalls10, latencies = [], [], []
    for query, exact in zip(queries, truth, strict=True):
        started = time.perf_counter()
        hits = store.query(NS, query, k, include_superseded=all_)
        latencies.append((time.perf_counter() - started) * 1000)
        got = [int(m.id[1:]) for m, _ in hits]
        recalls.append(len(set(got) & set(exact[:k].tolist())) / k)
        recalls10.append(len(set(got[:10]) & set(exact[:10].tolist())) / 10)
    return (
        float(np.mean(recalls)),
        float(np.mean(recalls10)),
        percentile(latencies, 50),
        percentile(latencies, 95),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--centroids", type=int, default=2000)
    parser.add_argument("--noise", type=float, default=0.8, help="spread of the clusters")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20260301)
    parser.add_argument("--ef-search", default="50,100,200,400")
    parser.add_argument("--ef-construction", type=int, default=HnswParams().ef_construction)
    parser.add_argument("--max-neighbors", type=int, default=HnswParams().max_neighbors)
    args = parser.parse_args()
    ef_values = [int(x) for x in args.ef_search.split(",")]

    rng = np.random.default_rng(args.seed)
    vectors = clustered(args.n, args.dim, args.centroids, rng, args.noise)
    superseded = rng.uniform(size=args.n) < 0.01
    batch = memories(vectors, superseded, rng)
    picks = rng.choice(np.flatnonzero(~superseded), size=args.queries, replace=False)
    queries = vectors[picks] + rng.standard_normal((args.queries, args.dim)).astype(np.float32) * (
        0.3 / np.sqrt(args.dim)
    )
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    sims = queries @ vectors.T  # exact search over live vectors (superseded excluded)
    sims_live = np.where(superseded[None, :], -np.inf, sims)
    truth_live = [np.argsort(-row, kind="stable")[: args.k] for row in sims_live]
    truth_all = [np.argsort(-row, kind="stable")[: args.k] for row in sims]

    params = HnswParams(args.ef_construction, ef_values[0], args.max_neighbors)
    with tempfile.TemporaryDirectory() as tmp:
        with ChromaVectorStore.persistent(tmp, hnsw=params) as store:
            started = time.perf_counter()
            for start in range(0, args.n, args.batch):
                store.upsert(NS, batch[start : start + args.batch])
            insert_s = time.perf_counter() - started

        print(
            f"\n## ANN recall, n={args.n}, dim={args.dim}, centroids={args.centroids}, "
            f"noise={args.noise}"
        )
        print(
            f"\nef_construction={args.ef_construction}, max_neighbors (M)={args.max_neighbors}, "
            f"{args.queries} queries, k={args.k}, cpus={os.cpu_count()}, "
            f"load average {os.getloadavg()[0]:.1f}; insert {args.n / insert_s:,.0f} "
            f"memories/s ({insert_s:.0f} s, batches of {args.batch})\n"
        )
        print("| ef_search | superseded | recall@50 | recall@10 | p50 ms | p95 ms |")
        print("| ---: | --- | ---: | ---: | ---: | ---: |")
        for ef in ef_values:
            set_ef_search(tmp, ef)
            with ChromaVectorStore.persistent(tmp) as store:  # reopened: ef applies
                run_queries(store, queries[:10], truth_live[:10], args.k, all_=False)  # warm-up
                r50, r10, p50, p95 = run_queries(store, queries, truth_live, args.k, all_=False)
                print(f"| {ef} | excluded | {r50:.4f} | {r10:.4f} | {p50:.1f} | {p95:.1f} |")
        with ChromaVectorStore.persistent(tmp) as store:
            r50, r10, p50, p95 = run_queries(store, queries, truth_all, args.k, all_=True)
            print(f"| {ef_values[-1]} | included | {r50:.4f} | {r10:.4f} | {p50:.1f} | {p95:.1f} |")
            other_operations(store, args.n)


def set_ef_search(path: str, ef: int) -> None:
    """Change ``ef_search`` of the bench collection (a client reads it when it opens)."""
    with ChromaVectorStore.persistent(path) as store:
        name = codec.collection_name(NS, codec.ROLE_VECTORS)
        collection = store._client.get_collection(name, embedding_function=None)
        with warnings.catch_warnings():  # modify() warns "legacy embedding function config"
            warnings.simplefilter("ignore", DeprecationWarning)
            collection.modify(configuration={"hnsw": {"ef_search": ef}})


def timed(call: Callable[[], object], repeat: int) -> tuple[object, float, float]:
    """The last result and p50/p95 ms of ``repeat`` calls."""
    latencies, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        latencies.append((time.perf_counter() - started) * 1000)
    return result, percentile(latencies, 50), percentile(latencies, 95)


def other_operations(store: ChromaVectorStore, n: int) -> None:
    since = T0 + timedelta(seconds=n * 0.9)  # the most recent 10%
    ids = [f"m{i:07d}" for i in range(0, n, max(1, n // 50))][:50]
    rows: list[tuple[str, Callable[[], object], int]] = [
        (
            "salient(n=5, last 10%, importance >= 0.7)",
            lambda: store.salient(NS, since=since, min_importance=0.7, n=5),
            20,
        ),
        ("get(50 ids)", lambda: store.get(NS, ids), 20),
        ("count()", lambda: store.count(NS), 20),
        ("count(category=work)", lambda: store.count(NS, category="work"), 3),
        ("list(text='topic 5 ', limit=50)", lambda: store.list(NS, text="topic 5 ", limit=50), 3),
        ("list(limit=50), all rows sorted", lambda: store.list(NS, limit=50), 1),
    ]
    print("\n| operation | p50 ms | p95 ms |")
    print("| --- | ---: | ---: |")
    for label, call, repeat in rows:
        _, p50, p95 = timed(call, repeat)
        print(f"| {label} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
