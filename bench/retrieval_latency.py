"""Activation latency at 1k / 10k / 100k memories in one namespace, and ANN recall.

    python -m bench.retrieval_latency [--sizes 1000,10000,100000] [--queries 200]
        [--anchors 3000] [--store chroma|memory] [--seed 20260601] [--embedder NAME]

Fills one namespace of a fresh store (Chroma persistent in a temp dir by default) with
synthetic memories: sentences from word lists and a fixed seed, with a long tail of rare
names as real memories have. Vectors: ``--anchors`` distinct sentences are embedded with
the app's default embedder (``--embedder``); every further memory takes an anchor's vector
plus small gaussian noise, renormalised (cosine to its anchor about 0.7, like a
paraphrase; each part of a two-part vector on its own), so 100k memories need no hour of
embedding. The store grows size by size (1k, then 10k, then 100k); at each size it times
``--queries`` messages:

- query embedding alone (the embedder, one short text per call);
- the app's default activation (``MemorySettings()``: hybrid mode, lexical index, the
  cross-encoder reranker when installed) with a precomputed query vector: candidate pool
  (ANN ∥ lexical index + one ``get``), then score + rerank + restatement collapse + GIST;
  p50 / p95 of the whole and of both parts, the cross-encoder's own time and the pairs
  it read (``rerank_n`` cut to ``rerank_budget_ms`` at its pace on this machine), the ANN
  query alone, and the process CPU time per activation (all threads; on a busy machine
  wall time includes waiting for a core, CPU time does not);
- with ``--rerank-n 10,20,30``: the app's activation p50 with each ``rerank_n`` (0: the
  stage off; no time budget, so every one of the n is read), and the cross-encoder's
  p50 / p95 at each;
- the ``limbic`` mode for comparison (ANN + the store's salient query, limbic scoring);
- ANN recall@50 of ``store.query`` against exact numpy search over the live vectors;
- the one-off load of the lexical index from the store (what a restart costs per
  namespace) and the process's resident memory growth during that load.

Prints markdown tables with the machine line. Nothing is cached in the repository.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from backend.clock import FixedClock
from backend.config import MemorySettings
from backend.embeddings.factory import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, build_embedder
from backend.embeddings.port import embed_queries, vector_split
from backend.longterm.memory import LongTermMemory
from backend.memory.retrieve import retrieve
from backend.memory.types import ActivationPolicy, Memory, Namespace
from backend.memory.vector_parts import VectorParts
from backend.stores.vector_port import VectorStore
from bench.retrieval_quality import app_reranker

NS = Namespace("bench-user", "bench-persona")
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# Per-coordinate noise added to an anchor's unit vector (384-d): cosine to the anchor
# about 0.7 and between two copies about 0.5, i.e. paraphrase-like, not duplicates.
NOISE = 0.05

SUBJECTS = (
    "sister", "brother", "mother", "father", "best friend", "colleague", "manager",
    "neighbour", "partner", "cousin", "grandmother", "flatmate", "dentist", "coach",
)  # fmt: skip
PLACES = (
    "Osaka", "Berlin", "Lisbon", "Toronto", "Nairobi", "Lyon", "Seoul", "Austin", "Porto",
    "Melbourne", "Edinburgh", "Taipei", "Quito", "Oslo", "Kunming", "Hangzhou", "Dublin",
)  # fmt: skip
ACTIVITIES = (
    "oolong tea", "long bike rides", "jazz records", "board games", "spicy ramen",
    "watercolour painting", "trail running", "detective novels", "baking sourdough",
    "chess puzzles", "night swimming", "growing tomatoes", "learning Japanese", "pottery",
    "film photography", "bouldering", "birdwatching", "knitting", "salsa dancing", "yoga",
)  # fmt: skip
JOBS = (
    "nurse", "software engineer", "teacher", "architect", "baker", "data analyst",
    "librarian", "physiotherapist", "translator", "electrician", "journalist", "pharmacist",
)  # fmt: skip
EVENTS = (
    "a job interview", "a driving test", "a dentist appointment", "a piano recital",
    "a half marathon", "a wedding", "a thesis defence", "a house move", "a knee surgery",
    "a first date", "a performance review", "a family reunion", "a visa appointment",
)  # fmt: skip
WHEN = (
    "next Monday", "on Friday", "in two weeks", "at the end of the month", "tomorrow",
    "this weekend", "in March", "after the holidays", "next spring", "in December",
)  # fmt: skip
FEELINGS = (
    "anxious", "excited", "tired", "calm", "sad", "hopeful", "frustrated", "proud",
    "lonely", "relieved", "nervous", "content", "grateful", "homesick",
)  # fmt: skip
PETS = ("cat", "dog", "rabbit", "hamster", "parrot", "tortoise")
FOODS = ("peanuts", "shellfish", "gluten", "dairy", "coriander", "mushrooms", "eggs")
CATEGORIES = ("relationship", "preference", "work", "experience", "emotion", "interest",
              "health", "personal_fact")  # fmt: skip
ZH_QUERIES = (
    "我最近工作压力好大，天天加班。", "周末想去爬山，你有什么建议？", "我妈妈下个月要来看我。",
    "今天好累，想吃一碗米线。", "我的猫最近不太爱吃东西。", "下周要考驾照，有点紧张。",
)  # fmt: skip
_SYLLABLES = ("ka", "ro", "mi", "len", "da", "vo", "shi", "ta", "nor", "el", "bri", "zu")


class Maker:
    """Reproducible synthetic memories and messages; rare names follow a Zipf tail."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.names = sorted(
            {
                "".join(
                    self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(2, 3))
                ).capitalize()
                for _ in range(4000)
            }
        )

    def name(self) -> str:  # Zipf-like: a few names are common, most are rare
        rank = min(len(self.names) - 1, int(self.rng.paretovariate(1.1)) - 1)
        return self.names[rank * 7919 % len(self.names)]

    def pick(self, words: tuple[str, ...]) -> str:
        return self.rng.choice(words)

    def memory_text(self) -> tuple[str, str, tuple[str, ...]]:
        """(content, category, keywords)."""
        r = self.rng.randrange(9)
        name, place = self.name(), self.pick(PLACES)
        if r == 0:
            rel = self.pick(SUBJECTS)
            return f"The user's {rel} {name} lives in {place}.", "relationship", (rel, name.lower())
        if r == 1:
            act = self.pick(ACTIVITIES)
            return (f"The user loves {act}, especially {self.pick(WHEN)}.", "preference",
                    tuple(act.split()[-1:]))  # fmt: skip
        if r == 2:
            job = self.pick(JOBS)
            return f"The user works as a {job} in {place}.", "work", (job.split()[-1], "job")
        if r == 3:
            event = self.pick(EVENTS)
            return (f"The user has {event} {self.pick(WHEN)} with {name}.", "experience",
                    (event.split()[-1],))  # fmt: skip
        if r == 4:
            feeling = self.pick(FEELINGS)
            return (f"The user often feels {feeling} after talking to {name}.", "emotion",
                    (feeling,))  # fmt: skip
        if r == 5:
            pet = self.pick(PETS)
            return f"The user has a {pet} called {name}.", "personal_fact", (pet, name.lower())
        if r == 6:
            food = self.pick(FOODS)
            return f"The user cannot eat {food} and checks every menu.", "health", (food,)
        if r == 7:
            act = self.pick(ACTIVITIES)
            return (f"The user started {act} with {name} in {place}.", "interest",
                    tuple(act.split()[-1:]))  # fmt: skip
        return (f"The user visited {place} with {name} {self.pick(WHEN)}.", "experience",
                (place.lower(),))  # fmt: skip

    def message(self) -> str:
        r = self.rng.random()
        if r < 0.1:
            return self.pick(ZH_QUERIES)
        if r < 0.4:
            return f"Do you remember what I told you about {self.name()}? {self.pick(WHEN)} again."
        if r < 0.6:
            return f"I feel {self.pick(FEELINGS)} about {self.pick(EVENTS)} {self.pick(WHEN)}."
        if r < 0.8:
            return f"Any ideas for {self.pick(ACTIVITIES)} in {self.pick(PLACES)}?"
        return f"My {self.pick(SUBJECTS)} wants to get a {self.pick(PETS)}. Thoughts?"


def paraphrase(
    base: np.ndarray, rng: np.random.Generator, split: int | None, noise: float = NOISE
) -> np.ndarray:
    """``base`` plus gaussian noise: each part (the whole vector, or the two parts of a
    two-part one) renormalised to its own length; at ``NOISE`` its cosine to the base is
    about 0.7. ``noise`` is per coordinate at 384-d (scaled to each part's size)."""
    cuts = [0, base.shape[0]] if split is None else [0, split, base.shape[0]]
    out = np.empty_like(base)
    for lo, hi in itertools.pairwise(cuts):
        part = base[lo:hi]
        length = float(np.linalg.norm(part))
        sigma = noise * np.sqrt(384 / (hi - lo))
        noisy = part / length + rng.standard_normal(hi - lo).astype(np.float32) * sigma
        out[lo:hi] = noisy / np.linalg.norm(noisy) * length
    return out


def make_memories(
    maker: Maker,
    start: int,
    count: int,
    anchors: np.ndarray,
    rng: np.random.Generator,
    split: int | None = None,
) -> list[Memory]:
    out = []
    for i in range(start, start + count):
        content, category, keywords = maker.memory_text()
        if i < len(anchors):
            vector = anchors[i]
        else:
            vector = paraphrase(anchors[int(rng.integers(len(anchors)))], rng, split)
        created = NOW - timedelta(days=float(rng.uniform(0, 730)))
        accessed = created + (NOW - created) * float(rng.uniform(0, 1) ** 3)
        out.append(
            Memory(
                id=f"m{i:07d}",
                content=content,
                category=category,
                importance=float(rng.uniform(0.3, 1.0)),
                confidence=0.9,
                keywords=keywords,
                created_at=created,
                last_accessed=accessed,
                access_count=int(rng.poisson(2)),
                embedding=vector.astype(np.float32),
                superseded_by="newer" if rng.uniform() < 0.01 else None,
            )
        )
    return out


def make_store(kind: str, workdir: Path) -> VectorStore:
    if kind == "memory":
        from backend.stores.in_memory import InMemoryVectorStore

        return InMemoryVectorStore()
    from backend.stores.chroma_store import ChromaVectorStore

    return ChromaVectorStore.persistent(workdir / "chroma")


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def rss_mib() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--anchors", type=int, default=3000)
    parser.add_argument("--store", choices=["chroma", "memory"], default="chroma")
    parser.add_argument("--seed", type=int, default=20260601)
    parser.add_argument("--rerank-n", default="", help="e.g. 0,10,20,30: activation by rerank_n")
    parser.add_argument("--embedder", choices=LOCAL_MODELS, default=DEFAULT_LOCAL_MODEL,
                        help="the offline embedder; default: the app's")  # fmt: skip
    args = parser.parse_args(argv)
    sizes = sorted(int(x) for x in args.sizes.split(","))
    rerank_ns = [int(x) for x in args.rerank_n.split(",") if x.strip()]

    maker = Maker(args.seed)
    rng = np.random.default_rng(args.seed)
    embedder = build_embedder("local", model=args.embedder)
    split = vector_split(embedder)
    anchor_texts = [maker.memory_text()[0] for _ in range(args.anchors)]
    started = time.perf_counter()
    anchors = embedder.embed(anchor_texts)
    anchor_s = time.perf_counter() - started
    maker = Maker(args.seed)  # replay: the first memories are the anchors' own sentences

    talker = Maker(args.seed + 1)
    messages = [talker.message() for _ in range(args.queries)]
    embed_ms, query_vectors = [], []
    embedder.embed(["warm-up"])
    for text in messages:
        t0 = time.perf_counter()
        query_vectors.append(embed_queries(embedder, [text])[0])
        embed_ms.append((time.perf_counter() - t0) * 1e3)

    settings = MemorySettings()
    app_policy = settings.activation_policy()
    reranker, rerank_note = app_reranker()
    limbic_policy = ActivationPolicy(retrieval=replace(app_policy.retrieval, mode="limbic"))
    clock = FixedClock(NOW)
    print(f"machine: {platform.machine()}, nproc {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f}, Python {platform.python_version()}; store {args.store}; "
          f"{args.anchors} anchor sentences embedded in {anchor_s:.1f} s; "
          f"{args.queries} queries ({sum(is_zh(m) for m in messages)} Chinese); "
          f"{rerank_note}, rerank_n {app_policy.retrieval.rerank_n}, rerank_budget_ms "
          f"{app_policy.rerank_budget_ms}\n")  # fmt: skip

    rows, index_rows, by_n = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(args.store, Path(tmp))
        vectors: list[np.ndarray] = []
        live: list[bool] = []
        ids: list[str] = []
        filled = 0
        for size in sizes:
            t0 = time.perf_counter()
            while filled < size:
                batch = make_memories(maker, filled, min(1000, size - filled), anchors, rng, split)
                store.upsert(NS, batch)
                vectors += [m.embedding for m in batch]  # type: ignore[misc]
                live += [not m.is_superseded for m in batch]
                ids += [m.id for m in batch]
                filled += len(batch)
            insert_s = time.perf_counter() - t0

            # Cold start: the lexical index loads the namespace from the store once.
            rss0 = rss_mib()
            app = LongTermMemory(store, embedder, clock, activation=app_policy, reranker=reranker)
            t0 = time.perf_counter()
            app.activate(NS, messages[0], query_vector=query_vectors[0])
            load_s = time.perf_counter() - t0
            index_rows.append((size, insert_s, load_s, rss_mib() - rss0))

            limbic = LongTermMemory(store, embedder, clock, activation=limbic_policy)
            app_ms, cpu_ms, ann_ms, pool_ms, rank_ms, limbic_ms = [], [], [], [], [], []
            rerank_ms: list[float] = []
            pairs: list[int] = []
            for text, vector in zip(messages, query_vectors, strict=True):
                c0, t0 = time.process_time(), time.perf_counter()
                activation = app.activate(NS, text, query_vector=vector)
                app_ms.append((time.perf_counter() - t0) * 1e3)
                rerank_ms.append(activation.rerank_ms)
                pairs.append(activation.retrieval.reranked)
                cpu_ms.append((time.process_time() - c0) * 1e3)
                t0 = time.perf_counter()
                app.neighbours(NS, text, vector)  # one ANN query, or two with two parts
                ann_ms.append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                pool = app.candidate_pool(NS, text, vector)
                t1 = time.perf_counter()
                retrieve(pool, now=NOW, query_text=text, query_vector=vector,
                         target_emotion=None, policy=app_policy.retrieval,
                         stats=app.corpus_stats(NS, text, pool), reranker=reranker,
                         parts=None if split is None else VectorParts(split))  # fmt: skip
                t2 = time.perf_counter()
                pool_ms.append((t1 - t0) * 1e3)
                rank_ms.append((t2 - t1) * 1e3)
                t0 = time.perf_counter()
                limbic.activate(NS, text, query_vector=vector)
                limbic_ms.append((time.perf_counter() - t0) * 1e3)

            matrix = np.stack(vectors)
            live_mask = np.asarray(live)
            recalls = []
            for vector in query_vectors:
                sims = np.where(live_mask, matrix @ vector, -np.inf)
                exact = {ids[i] for i in np.argsort(-sims, kind="stable")[:50]}
                got = {m.id for m, _ in store.query(NS, vector, 50)}
                recalls.append(len(got & exact) / 50)
            rows.append(
                (size, app_ms, cpu_ms, ann_ms, pool_ms, rank_ms, limbic_ms,
                 statistics.fmean(recalls), rerank_ms, pairs)
            )  # fmt: skip
            for n in rerank_ns:
                # n pairs whatever the pace: no time budget
                policy = replace(
                    app_policy, retrieval=replace(app_policy.retrieval, rerank_n=n),
                    rerank_budget_ms=None,
                )  # fmt: skip
                variant = LongTermMemory(
                    store, embedder, clock, activation=policy, reranker=reranker
                )
                n_ms, n_rerank = [], []
                for text, vector in zip(messages, query_vectors, strict=True):
                    t0 = time.perf_counter()
                    activation = variant.activate(NS, text, query_vector=vector)
                    n_ms.append((time.perf_counter() - t0) * 1e3)
                    n_rerank.append(activation.rerank_ms)
                by_n.append((size, n, n_ms, n_rerank))
            del app, limbic, matrix

    print(f"query embedding ({embedder.model}, one short text): p50 {pct(embed_ms, 50):.1f} ms, "
          f"p95 {pct(embed_ms, 95):.1f} ms\n")  # fmt: skip
    header = (
        "| memories | activate p50 ms | activate p95 ms | CPU p50 ms | ANN query p50 ms | "
        "pool p50 ms | score+rerank+collapse+GIST p50 ms | rerank p50 ms | pairs read p50 | "
        "limbic mode p50 ms | ANN recall@50 |"
    )
    print(header)
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, app_ms, cpu_ms, ann_ms, pool_ms, rank_ms, limbic_ms, recall, rr_ms, read in rows:
        print(f"| {size:,} | {pct(app_ms, 50):.1f} | {pct(app_ms, 95):.1f} | "
              f"{pct(cpu_ms, 50):.1f} | {pct(ann_ms, 50):.1f} | {pct(pool_ms, 50):.1f} | "
              f"{pct(rank_ms, 50):.1f} | {pct(rr_ms, 50):.1f} | {statistics.median(read):.0f} | "
              f"{pct(limbic_ms, 50):.1f} | {recall:.3f} |")  # fmt: skip
    if by_n:
        print("\n| memories | rerank_n | activate p50 ms | activate p95 ms | rerank p50 ms | "
              "rerank p95 ms |")  # fmt: skip
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for size, n, n_ms, n_rerank in by_n:
            print(f"| {size:,} | {n} | {pct(n_ms, 50):.1f} | {pct(n_ms, 95):.1f} | "
                  f"{pct(n_rerank, 50):.1f} | {pct(n_rerank, 95):.1f} |")  # fmt: skip
    print("\n| memories | insert s (this step) | lexical index load s | RSS growth MiB |")
    print("| ---: | ---: | ---: | ---: |")
    for size, insert_s, load_s, rss in index_rows:
        print(f"| {size:,} | {insert_s:.1f} | {load_s:.2f} | {rss:.0f} |")
    return 0


def is_zh(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


if __name__ == "__main__":
    sys.exit(main())
