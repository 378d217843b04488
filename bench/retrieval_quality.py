"""Retrieval quality on an eval corpus (the format of bench/data/eval/README.md).

    python -m bench.retrieval_quality [--corpus bench/data/eval] [--k 8] [--store chroma|memory]
        [--embedder e5-small-v2|all-minilm-l6-v2]
        [--no-memory-queries bench/data/no_memory_queries.jsonl]

Loads ``memories.jsonl`` into a fresh store as it is (no gate, no dedupe; timestamps from
``created_days_ago``/``last_access_days_ago`` relative to one fixed ``now``;
``superseded_by`` links honoured) with the real local embedder, runs every query of
``queries.jsonl`` (its ``target_emotion`` as the target emotion) and prints one row per
strategy: topic recall@k, redundancy, stale rate, junk rate and mean latency (query
embedding included). Then, for the app's default, recall, redundancy and stale rate per
query tag, recall on the odd and on the even query ids (an overfitting check: nothing was
tuned on one half only), and how many memories the no-memory queries got. The
``irrelevant`` column is the share of the returned memories that the query does not
need (neither listed as relevant nor of a needed topic, or stale), over the corpus's
queries and the bench's own no-memory queries (``--no-memory-queries``: small talk and
topics the corpus never mentions, ``bench/data/README.md``); the row "app default,
relevance floor off" is the same pipeline with ``min_relevance`` 0, and "app default,
reranker off" the same with ``rerank_n`` 0 (the app's default runs the cross-encoder when
it is installed, as the app does; the header says whether it ran). The last line is the
app's default pipeline: ``recall@8=<x> redundancy=<y> stale=<z> junk=<j>``.

``Rig`` builds the strategies over one loaded store; ``bench.locomo_retrieval`` reuses it
with ``load_memories``, ``evaluate`` and ``breakdown``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend.clock import FixedClock
from backend.config import MemorySettings
from backend.embeddings.factory import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, build_embedder
from backend.embeddings.port import Embedder, embed_queries
from backend.longterm.memory import LongTermMemory
from backend.memory.rerank import Reranker
from backend.memory.types import (
    ActivationPolicy,
    Emotion,
    Memory,
    Namespace,
    RetrievalPolicy,
    ScoreWeights,
)
from backend.stores.vector_port import VectorStore

DEFAULT_CORPUS = Path(__file__).resolve().parent / "data" / "eval"  # bench/data/eval/PROVENANCE.md
# The bench's own queries with nothing to recall (not part of the shared corpus).
NO_MEMORY_QUERIES = Path(__file__).resolve().parent / "data" / "no_memory_queries.jsonl"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NS = Namespace("eval-user", "eval")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def load_memories(rows: list[dict[str, Any]], embedder: Embedder) -> list[Memory]:
    vectors = embedder.embed([row["content"] for row in rows])
    supersedes = {row["superseded_by"]: row["id"] for row in rows if row.get("superseded_by")}
    memories = []
    for row, vector in zip(rows, vectors, strict=True):
        emotion = row.get("emotion")
        memories.append(
            Memory(
                id=row["id"],
                content=row["content"],
                category=row.get("category") or "general",
                importance=float(row["importance"]),
                confidence=float(row.get("confidence", 1.0)),
                emotion=Emotion(emotion["label"], emotion["intensity"]) if emotion else None,
                keywords=tuple(row.get("keywords") or ()),
                subject="persona" if row.get("subject") in ("assistant", "persona") else "user",
                created_at=NOW - timedelta(days=row["created_days_ago"]),
                last_accessed=NOW - timedelta(days=row["last_access_days_ago"]),
                access_count=int(row.get("access_count", 0)),
                embedding=vector,
                supersedes=supersedes.get(row["id"]),
                superseded_by=row.get("superseded_by"),
            )
        )
    return memories


def make_store(kind: str, workdir: Path) -> VectorStore:
    if kind == "memory":
        from backend.stores.in_memory import InMemoryVectorStore

        return InMemoryVectorStore()
    from backend.stores.chroma_store import ChromaVectorStore

    return ChromaVectorStore.persistent(workdir / "chroma")


@dataclass
class Scores:
    recall: float
    redundancy: float
    stale: float
    junk: float
    latency_ms: float
    per_query: dict[str, float] = field(default_factory=dict)  # recall of each query id
    no_memory_returned: list[int] = field(default_factory=list)  # sizes for no-fact queries
    # redundancy of each query id that got two or more memories; whether each query id
    # with superseded memories got one of them
    per_query_redundancy: dict[str, float] = field(default_factory=dict)
    per_query_stale: dict[str, bool] = field(default_factory=dict)
    # share of the returned memories the query does not need (``irrelevant``)
    irrelevant: float = 0.0


def evaluate(
    queries: list[dict[str, Any]], topic: dict[str, str], run: Callable[[dict[str, Any]], list[str]]
) -> Scores:
    """The metrics of bench/data/eval/README.md ("Scoring") over one strategy."""
    recall, redundancy, stale_hits, junk, latency = [], [], [], [], []
    per_query: dict[str, float] = {}
    per_redundancy: dict[str, float] = {}
    per_stale: dict[str, bool] = {}
    no_memory: list[int] = []
    returned = unneeded = 0
    for query in queries:
        started = time.perf_counter()
        got = run(query)
        latency.append((time.perf_counter() - started) * 1e3)
        stale = set(query["stale"])
        if query["needed_topics"]:
            hit = {topic[i] for i in got if i not in stale}
            value = len(hit & set(query["needed_topics"])) / len(query["needed_topics"])
            recall.append(value)
            per_query[query["id"]] = value
        else:
            no_memory.append(len(got))
        pairs = list(itertools.combinations(got, 2))
        if pairs:
            redundancy.append(sum(topic[a] == topic[b] for a, b in pairs) / len(pairs))
            per_redundancy[query["id"]] = redundancy[-1]
        if stale:
            stale_hits.append(any(i in stale for i in got))
            per_stale[query["id"]] = stale_hits[-1]
        junk += [topic[i].startswith("junk_") for i in got]
        returned += len(got)
        unneeded += irrelevant(query, topic, got)

    return Scores(
        _mean(recall), _mean(redundancy), _mean(stale_hits), _mean(junk), _mean(latency),
        per_query, no_memory, per_redundancy, per_stale,
        unneeded / returned if returned else 0.0,
    )  # fmt: skip


def irrelevant(query: dict[str, Any], topic: dict[str, str], got: list[str]) -> int:
    """How many of ``got`` the query does not need: stale, or neither listed as relevant
    nor of a needed topic (every one, for a no-memory query)."""
    relevant = set(query.get("relevant") or ())
    needed = set(query["needed_topics"])
    stale = set(query["stale"])
    return sum(i in stale or (i not in relevant and topic[i] not in needed) for i in got)


def _mean(xs: list[float] | list[bool]) -> float:
    return statistics.fmean(xs) if xs else 0.0


def _query_number(query_id: str) -> int | None:
    digits = "".join(ch for ch in query_id if ch.isdigit())
    return int(digits) if digits else None


def tag_table(queries: list[dict[str, Any]], scores: Scores) -> list[str]:
    """Recall, redundancy and stale rate per query tag, as markdown table lines.

    Each metric is the mean over the tag's queries where it is defined (recall: queries
    with needed topics; redundancy: two or more memories returned; stale: queries with
    superseded memories); ``-`` where none is.
    """
    by_tag: dict[str, list[str]] = {}
    for query in queries:
        for tag in query.get("tags") or ():
            by_tag.setdefault(tag, []).append(query["id"])

    def cell(values: dict[str, float] | dict[str, bool], ids: list[str]) -> str:
        found = [float(values[i]) for i in ids if i in values]
        return f"{_mean(found):.3f}" if found else "-"

    lines = [
        "| tag | queries | recall | redundancy | stale |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for tag, ids in sorted(by_tag.items()):
        lines.append(
            f"| {tag} | {len(ids)} | {cell(scores.per_query, ids)} | "
            f"{cell(scores.per_query_redundancy, ids)} | {cell(scores.per_query_stale, ids)} |"
        )
    return lines


def breakdown(queries: list[dict[str, Any]], scores: Scores) -> list[str]:
    """Metrics per tag and recall on the odd / even query ids (an overfitting check)."""
    halves: dict[str, list[float]] = {"odd": [], "even": []}
    for query in queries:
        value = scores.per_query.get(query["id"])
        number = _query_number(query["id"])
        if value is not None and number is not None:
            halves["odd" if number % 2 else "even"].append(value)
    lines = tag_table(queries, scores)
    lines.append("")
    lines.append(
        f"odd query ids: recall {_mean(halves['odd']):.3f} ({len(halves['odd'])} queries); "
        f"even query ids: recall {_mean(halves['even']):.3f} ({len(halves['even'])} queries)"
    )
    if scores.no_memory_returned:
        lines.append(
            "no-memory queries: memories returned " + ", ".join(map(str, scores.no_memory_returned))
        )
    return lines


Runner = Callable[[dict[str, Any]], list[str]]


@dataclass
class Rig:
    """The retrieval strategies over one loaded store (``NS``), each a ``Runner``: a query
    row (``text``, ``target_emotion``) in, the ids of the memories returned out."""

    store: VectorStore
    embedder: Embedder
    k: int = 8
    clock: FixedClock = field(default_factory=lambda: FixedClock(NOW))
    settings: MemorySettings = field(default_factory=MemorySettings)
    # The app's cross-encoder (``app_reranker``); None: the reranking stage is skipped.
    reranker: Reranker | None = None

    def app_policy(self) -> ActivationPolicy:
        """The app's activation policy (config defaults) with ``k``, and no time budget for
        the cross-encoder: recall is measured at ``rerank_n`` whatever this machine's pace
        (``bench.retrieval_latency`` times the app with the budget)."""
        default = self.settings
        return replace(
            default.activation_policy(),
            retrieval=replace(default.retrieval_policy(), k=self.k),
            rerank_budget_ms=None,
        )

    def ltm(self, policy: ActivationPolicy) -> LongTermMemory:
        return LongTermMemory(
            self.store, self.embedder, self.clock, activation=policy, reranker=self.reranker
        )

    def without(self, **retrieval: Any) -> ActivationPolicy:
        """The app's policy with the retrieval settings ``retrieval`` replaced (a stage
        off: ``rerank_n=0``, ``lam=0``, ``same_fact=2``, ``min_relevance=0``)."""
        base = self.app_policy()
        return replace(base, retrieval=replace(base.retrieval, **retrieval))

    def without_rerank(self) -> Runner:
        return self.activator(self.ltm(self.without(rerank_n=0)))

    def hybrid_policy(
        self, *, lam: float | None = None, same_fact: float | None = None
    ) -> ActivationPolicy:
        """The app's policy with GIST's ``lam`` and the collapse's ``same_fact`` replaced
        (``lam=0``: no GIST; ``same_fact=2``: no restatement collapse)."""
        base = self.app_policy()
        retrieval = base.retrieval
        retrieval = replace(
            retrieval,
            lam=retrieval.lam if lam is None else lam,
            same_fact=retrieval.same_fact if same_fact is None else same_fact,
        )
        return replace(base, retrieval=retrieval)

    @staticmethod
    def activator(ltm: LongTermMemory) -> Runner:
        def run(query: dict[str, Any]) -> list[str]:
            result = ltm.activate(NS, query["text"], target_emotion=query.get("target_emotion"))
            return [m.id for m in result.memories]

        return run

    def app_default(self) -> Runner:
        return self.activator(self.ltm(self.app_policy()))

    def hybrid(self, *, lam: float | None = None, same_fact: float | None = None) -> Runner:
        return self.activator(self.ltm(self.hybrid_policy(lam=lam, same_fact=same_fact)))

    def without_floor(self) -> Runner:
        # The app's default with the relevance floor off (``min_relevance`` 0).
        base = self.app_policy()
        retrieval = replace(base.retrieval, min_relevance=0.0)
        return self.activator(self.ltm(replace(base, retrieval=retrieval)))

    def hybrid_without_diversity(self) -> Runner:
        # The app's hybrid ranking and candidates, but no restatement collapse, no GIST.
        return self.hybrid(lam=0.0, same_fact=2.0)

    def limbic(self, lam: float, *, weights: ScoreWeights = ScoreWeights()) -> Runner:
        policy = ActivationPolicy(
            retrieval=RetrievalPolicy(k=self.k, lam=lam, weights=weights), min_importance=0.0
        )
        return self.activator(self.ltm(policy))

    def naive(self) -> Runner:
        def run(query: dict[str, Any]) -> list[str]:
            vector = embed_queries(self.embedder, [query["text"]])[0]
            hits = self.store.query(NS, vector, self.k, include_superseded=True)
            return [m.id for m, _ in hits]

        return run


def app_reranker() -> tuple[Reranker | None, str]:
    """The app's cross-encoder as ``build_services`` builds it for the default settings,
    or ``None`` when it is not installed; and a line that says which."""
    from backend.config import Settings
    from backend.engine.services import build_reranker

    reranker, off = build_reranker(Settings())
    return reranker, f"reranker={reranker.model}" if reranker else f"reranker off ({off})"


RERANK_SWEEP_N = (10, 20, 30)
RERANK_SWEEP_WEIGHTS = (0.0, 0.2, 0.3, 0.5, 0.7)


def rerank_sweep(
    memories: list[Memory],
    queries: list[dict[str, Any]],
    topic: dict[str, str],
    embedder: Embedder,
    reranker: Reranker,
    k: int,
) -> int:
    """``--rerank-sweep``: recall, redundancy and the multi-topic recall of the app default
    for each ``rerank_n`` x ``rerank_weight`` (each pair read by the model once)."""
    from backend.stores.in_memory import InMemoryVectorStore
    from bench.locomo_retrieval import PairCachedReranker

    store = InMemoryVectorStore()
    store.upsert(NS, memories)
    model = PairCachedReranker(reranker)
    rig = Rig(store, embedder, k, reranker=model)
    multi = [q["id"] for q in queries if "multi_topic" in (q.get("tags") or ())]
    print(f"rerank_n x rerank_weight on {len(queries)} queries, embedder={embedder.model}\n")
    print("| rerank_n | weight | recall@8 | multi_topic | redundancy | irrelevant |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in sorted(RERANK_SWEEP_N, reverse=True):
        for w in RERANK_SWEEP_WEIGHTS:
            if w == 0.0 and n != max(RERANK_SWEEP_N):
                continue
            run = rig.activator(rig.ltm(rig.without(rerank_n=n, rerank_weight=w)))
            s = evaluate(queries, topic, run)
            m = _mean([s.per_query[q] for q in multi if q in s.per_query])
            print(f"| {n if w else 0} | {w} | {s.recall:.3f} | {m:.3f} | {s.redundancy:.3f} | "
                  f"{s.irrelevant:.3f} |")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="folder with the jsonl files"
    )
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--store", choices=["chroma", "memory"], default="chroma")
    parser.add_argument("--embedder", choices=LOCAL_MODELS, default=DEFAULT_LOCAL_MODEL,
                        help="the offline embedder; default: the app's")  # fmt: skip
    parser.add_argument(
        "--queries", type=Path, default=None,
        help="the queries (jsonl, the corpus's query format); default: the corpus's own",
    )  # fmt: skip
    parser.add_argument(
        "--no-memory-queries", type=Path, default=NO_MEMORY_QUERIES,
        help="extra queries with nothing to recall (jsonl, the corpus's query format)",
    )  # fmt: skip
    parser.add_argument(
        "--rerank-sweep", action="store_true",
        help="the app default over a grid of rerank_n x rerank_weight instead",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        rows = _jsonl(args.corpus / "memories.jsonl")
        queries = _jsonl(args.queries or args.corpus / "queries.jsonl")
        if args.no_memory_queries.is_file():
            queries += _jsonl(args.no_memory_queries)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"retrieval_quality: cannot read the corpus: {exc}", file=sys.stderr)
        return 2
    topic = {row["id"]: row["topic"] for row in rows}
    embedder = build_embedder("local", model=args.embedder)
    memories = load_memories(rows, embedder)
    reranker, note = app_reranker()
    if args.rerank_sweep:
        if reranker is None:
            print(f"retrieval_quality: {note}", file=sys.stderr)
            return 2
        return rerank_sweep(memories, queries, topic, embedder, reranker, args.k)

    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(args.store, Path(tmp))
        store.upsert(NS, memories)
        # The cross-encoder's answer per (query, passages) is kept: the floor-off row
        # hands it mostly the same top n as the default, which runs first (its latency
        # is the model's; the floor-off row's is not).
        from bench.locomo_retrieval import CachedReranker  # it imports this module

        cached = None if reranker is None else CachedReranker(reranker)
        rig = Rig(store, embedder, args.k, reranker=cached)
        app_default = rig.app_default()
        app_default({"text": "warm-up", "target_emotion": None})  # loads the lexical index
        floorless = rig.without_floor()

        strategies = [
            ("naive cosine top-k (seed app)", rig.naive()),
            ("limbic scoring, no diversity", rig.limbic(0.0)),
            ("limbic scoring + GIST lambda=0.5", rig.limbic(0.5)),
            ("limbic scoring + GIST lambda=1.0", rig.limbic(1.0)),
            ("hybrid scoring, no collapse, no GIST", rig.hybrid_without_diversity()),
            ("app default, reranker off", rig.without_rerank()),
            (f"app default (config defaults: {rig.settings.mode})", app_default),
            ("app default, relevance floor off", floorless),
        ]
        print(f"corpus: {args.corpus} ({len(rows)} memories, {len(queries)} queries), "
              f"k={args.k}, store={args.store}, embedder={embedder.model}, {note}\n")  # fmt: skip
        print(f"| strategy | recall@{args.k} | redundancy | stale | junk | irrelevant | "
              "mean latency ms |")  # fmt: skip
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        final = floor_off = None
        for name, run in strategies:
            s = evaluate(queries, topic, run)
            if run is floorless:
                floor_off = s
            print(f"| {name} | {s.recall:.3f} | {s.redundancy:.3f} | {s.stale:.3f} | "
                  f"{s.junk:.3f} | {s.irrelevant:.3f} | {s.latency_ms:.1f} |")  # fmt: skip
            if run is app_default:
                final = s
    assert final is not None and floor_off is not None
    print("\n(the floor-off row reuses the cross-encoder's answers of the default row where "
          "they hand it the same memories: its latency leaves that time out)")  # fmt: skip
    print("\napp default, per tag:\n")
    print("\n".join(breakdown(queries, final)))
    if final.no_memory_returned:
        print(f"no-memory queries, mean memories returned: {_mean(final.no_memory_returned):.2f} "
              f"(relevance floor off: {_mean(floor_off.no_memory_returned):.2f}); share of "
              f"irrelevant memories returned: {final.irrelevant:.3f} "
              f"(floor off: {floor_off.irrelevant:.3f})")  # fmt: skip
    print(f"\nrecall@{args.k}={final.recall:.3f} redundancy={final.redundancy:.3f} "
          f"stale={final.stale:.3f} junk={final.junk:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
