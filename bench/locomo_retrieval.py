"""LoCoMo evidence recall@k of the retrieval strategies (retrieval only, no LLM).

    python -m bench.locomo_retrieval [--data ../shared/eval/locomo/locomo10.json] [--k 8]
                                     [--conversations N] [--embedder NAME] [--sweep]

LoCoMo (Maharana et al., ACL 2024; snap-research/LoCoMo ``data/locomo10.json``,
CC BY-NC 4.0: read from its path, never copied into this repository) holds long
two-person conversations and questions about them, each with the dialog turns that
support its answer (its evidence). This bench converts it in memory, one conversation
at a time:

- every dialog turn is a memory ``"Speaker: text"`` (plus ``[shares a photo: caption]``
  where the turn has an image caption) of its own topic, created on its session's date;
- every question of categories 1-4 (labelled as LoCoMo's own code does: 1 multi-hop,
  2 temporal, 3 open-domain, 4 single-hop) with evidence is a query whose needed topics
  are its evidence turns. Evidence entries that name no turn of the conversation (a few
  are malformed) are ignored; category 5 (adversarial: the answer is not in the
  conversation) is left out.

Each conversation is loaded into a fresh in-memory store with the real local MiniLM
embedder (each distinct text embedded once per run) and every strategy is scored with
``bench.retrieval_quality``'s machinery: topic recall@k here is LoCoMo's evidence
recall@k, the share of a question's evidence turns among the k memories returned.
Strategies: naive cosine top-k, the hybrid score alone (no floor, no reranker, no
collapse, no GIST), the app default (the configuration's defaults: relevance floor,
cross-encoder reranker when installed, restatement collapse, GIST), and the app default
with each stage off in turn (the reranker, GIST, the collapse, both diversity stages, the
floor). The cross-encoder's answers are kept per (question, passages) so that strategies
that hand it the same top n do not pay for it twice; the app default runs first and pays.
The cost table gives each strategy's activation time without the cross-encoder (p50,
mean) and the cross-encoder's own time where it ran the model.

``--sweep``: instead, the app default with ``rerank_n`` x ``rerank_weight`` over a grid
(the cross-encoder's answers kept per pair, each pair read once): how N and the weight
were chosen (docs/benchmarks.md, "Reranking").

The same returns are also scored as LoCoMo's own evaluation scores retrieval
(``task_eval/evaluation.py`` of snap-research/LoCoMo, ``eval_question_answering``): every
question of categories 1-4 (1,540, where ours keeps the 1,531 whose evidence names a
turn), the share of its evidence entries *as written* among the returned turn ids
(a duplicate counts twice, an entry that names no turn is a miss), and 1 for a question
without evidence. See :func:`locomo_recall`.

Prints the recall per strategy and category (ours, then LoCoMo's), per conversation, how
many evidence turns each diversity stage drops from the top k of hybrid-without-diversity
(and how many the freed slots bring in), the run time, the app default's
``locomo_recall@<k>=<x>`` (LoCoMo's definition), and as its last line the app default's
``evidence_recall@<k>=<x>`` (ours). A missing data file is reported and skipped (exit 0).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np

from backend.embeddings.factory import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, build_embedder
from backend.embeddings.port import Embedder, embed_queries, vector_split
from backend.longterm.memory import LongTermMemory
from backend.memory.rerank import Reranker
from backend.memory.types import ActivationPolicy
from backend.stores.in_memory import InMemoryVectorStore
from bench.retrieval_quality import NS, Rig, Runner, app_reranker, evaluate, load_memories

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "eval" / "locomo" / "locomo10.json"

# LoCoMo's own code fixes the labels (task_eval/evaluation.py: category 1 is scored as
# multi-hop with a multi-answer F1, 5 as adversarial, 3's answers cut at ';'; gpt_utils.py
# asks category 2 for a date; evaluation_stats.py prints 4, 1, 2, 3, 5 in the paper's column
# order single-hop, multi-hop, temporal, open-domain, adversarial). Tables name each with its
# number, since published tables disagree on the mapping.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

NAIVE = "naive cosine top-k"
HYBRID_ONLY = "hybrid score only (no floor, reranker, collapse, GIST)"
APP_DEFAULT = "app default (floor + reranker + collapse + GIST)"
NO_RERANK = "app default, reranker off"
COLLAPSE_ONLY = "app default, GIST off (collapse only)"
GIST_ONLY = "app default, collapse off (GIST only)"
NO_DIVERSITY = "app default, collapse and GIST off"
NO_FLOOR = "app default, relevance floor off"
# --sweep: the grid of rerank_n x rerank_weight
SWEEP_N = (10, 15, 20, 30, 40, 50)
SWEEP_WEIGHTS = (0.5, 0.7, 0.85, 1.0)

_SESSION = re.compile(r"session_(\d+)")


# ---- conversion ------------------------------------------------------------------------


def category_label(category: int) -> str:
    return f"{category} {CATEGORIES[category]}"


@dataclass(frozen=True)
class Asked:
    """A question of categories 1-4 as LoCoMo's own evaluation counts it."""

    query_id: str | None  # our query; None when no evidence entry names a turn
    category: int
    evidence: tuple[str, ...]  # as written in the file: duplicates and malformed entries kept


@dataclass
class Conversation:
    """One LoCoMo conversation as rows of ``memories.jsonl`` and ``queries.jsonl``, and
    every question of categories 1-4 as LoCoMo's evaluation counts them (``asked``)."""

    name: str
    rows: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    asked: list[Asked] = field(default_factory=list)


def locomo_recall(evidence: Sequence[str], returned: Collection[str]) -> float:
    """LoCoMo's own retrieval recall of one question (task_eval/evaluation.py,
    ``eval_question_answering``): the share of its evidence entries, as written, that are
    among the returned turn ids; 1 for a question without evidence. Ours
    (``evaluate``'s topic recall) is over the distinct entries that name a turn, and leaves
    out a question that has none."""
    if not evidence:
        return 1.0
    return sum(entry in returned for entry in evidence) / len(evidence)


def session_date(text: str) -> datetime | None:
    """A LoCoMo session timestamp such as ``"1:56 pm on 8 May, 2023"``; ``None`` if odd."""
    cleaned = " ".join(str(text).split())
    for pattern in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(cleaned, pattern)
        except ValueError:
            continue
    return None


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn.get('speaker', '?')}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def convert(sample: dict[str, Any], index: int = 0) -> Conversation:
    """One LoCoMo sample (``conversation`` + ``qa``) as eval-corpus rows."""
    dialog = sample.get("conversation") or {}
    numbers = sorted(
        int(m.group(1)) for key in dialog if (m := _SESSION.fullmatch(key)) is not None
    )
    dates: dict[int, datetime | None] = {
        n: session_date(dialog.get(f"session_{n}_date_time", "")) for n in numbers
    }
    known = [d for d in dates.values() if d is not None]
    last = max(known) if known else None
    rows: list[dict[str, Any]] = []
    days_ago = 0
    for n in numbers:
        date = dates[n]
        if date is not None and last is not None:
            days_ago = max(0, (last - date).days)
        # (a session without a readable date keeps the previous session's age)
        for turn in dialog[f"session_{n}"] or ():
            turn_id = str(turn.get("dia_id", "")).strip()
            if not turn_id:
                continue
            rows.append(
                {
                    "id": turn_id,
                    "content": turn_text(turn),
                    "category": "general",
                    "importance": 0.5,
                    "confidence": 1.0,
                    "emotion": None,
                    "keywords": [],
                    "subject": "user",
                    "created_days_ago": days_ago,
                    "last_access_days_ago": days_ago,
                    "access_count": 0,
                    "topic": turn_id,
                    "superseded_by": None,
                }
            )
    turn_ids = {row["id"] for row in rows}
    queries: list[dict[str, Any]] = []
    asked: list[Asked] = []
    for number, qa in enumerate(sample.get("qa") or ()):
        category = qa.get("category")
        if category not in CATEGORIES:
            continue
        written = tuple(str(e) for e in qa.get("evidence") or ())
        evidence = sorted({e.strip() for e in written} & turn_ids)
        asked.append(Asked(f"q{number:04d}" if evidence else None, category, written))
        if not evidence:
            continue
        queries.append(
            {
                "id": f"q{number:04d}",
                "text": str(qa.get("question", "")),
                "needed_topics": evidence,
                "relevant": evidence,
                "stale": [],
                "target_emotion": None,
                "category": category,
                "tags": [f"cat{category}", "multi_topic" if len(evidence) > 1 else "single_topic"],
            }
        )
    return Conversation(str(sample.get("sample_id") or f"conv-{index}"), rows, queries, asked)


# ---- embeddings ------------------------------------------------------------------------


class CachedEmbedder:
    """Wraps an embedder so that each distinct text is embedded once per run."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}
        self.query_cache: dict[str, np.ndarray] = {}  # a query's vector may differ (e5)
        self.embedded = 0  # texts actually sent to ``inner``

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def split_at(self) -> int | None:
        """The inner embedder's two-part layout (``port.vector_split``), read through."""
        return vector_split(self.inner)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._cached(texts, self.cache, self.inner.embed)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._cached(texts, self.query_cache, partial(embed_queries, self.inner))

    def _cached(
        self,
        texts: Sequence[str],
        cache: dict[str, np.ndarray],
        embed: Callable[[Sequence[str]], np.ndarray],
    ) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in cache))
        if missing:
            vectors = embed(missing)
            self.embedded += len(missing)
            for text, vector in zip(missing, vectors, strict=True):
                cache[text] = np.asarray(vector, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([cache[t] for t in texts])


# ---- the cross-encoder, read once --------------------------------------------------------


class CachedReranker:
    """Keeps the reranker's answer per (query, passages): strategies that hand it the same
    top n get the same answer without running the model again. ``model_ms``: the time of
    each call that ran it."""

    def __init__(self, inner: Reranker) -> None:
        self.inner = inner
        self.cache: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        self.model_ms: list[float] = []
        self.pairs = 0  # pairs the model read

    @property
    def model(self) -> str:
        return self.inner.model

    def score(self, query: str, passages: Sequence[str]) -> Sequence[float] | None:
        key = (query, tuple(passages))
        if key not in self.cache:
            started = time.perf_counter()
            answer = self.inner.score(query, passages)
            if answer is None:
                return None
            self.model_ms.append((time.perf_counter() - started) * 1e3)
            self.pairs += len(passages)
            self.cache[key] = list(answer)
        return self.cache[key]


class PairCachedReranker(CachedReranker):
    """``--sweep``: keeps the answer per (query, passage), so that each pair is read once
    whatever top n asks for it (a pair's score then comes from the batch that first read
    it: the int8 model's scores move by little with the batch)."""

    def __init__(self, inner: Reranker) -> None:
        super().__init__(inner)
        self.pair_cache: dict[tuple[str, str], float] = {}

    def score(self, query: str, passages: Sequence[str]) -> Sequence[float] | None:
        missing = list(dict.fromkeys(p for p in passages if (query, p) not in self.pair_cache))
        if missing:
            answer = super().score(query, missing)
            if answer is None:
                return None
            for passage, value in zip(missing, answer, strict=True):
                self.pair_cache[(query, passage)] = value
        return [self.pair_cache[(query, p)] for p in passages]


# ---- strategies ------------------------------------------------------------------------


@dataclass
class Traced:
    """A hybrid strategy that keeps, per query id, what it returned and collapsed, and the
    time of each activation without the cross-encoder's."""

    ltm: LongTermMemory
    returned: dict[str, list[str]] = field(default_factory=dict)
    collapsed: dict[str, set[str]] = field(default_factory=dict)
    ms: list[float] = field(default_factory=list)  # activation less the cross-encoder
    reranked: list[int] = field(default_factory=list)  # pairs handed to the cross-encoder

    def __call__(self, query: dict[str, Any]) -> list[str]:
        result = self.ltm.activate(NS, query["text"], target_emotion=query.get("target_emotion"))
        ids = [m.id for m in result.memories]
        self.returned[query["id"]] = ids
        self.collapsed[query["id"]] = set(result.retrieval.collapsed)
        self.ms.append(result.embed_ms + result.search_ms - result.rerank_ms)
        self.reranked.append(result.retrieval.reranked)
        return ids


def strategies(rig: Rig) -> list[tuple[str, Runner]]:
    """The app default first: it runs the cross-encoder, the others reuse its answers."""

    def traced(policy: ActivationPolicy) -> Traced:
        return Traced(rig.ltm(policy))

    return [
        (APP_DEFAULT, traced(rig.app_policy())),
        (NAIVE, rig.naive()),
        (HYBRID_ONLY, traced(rig.without(rerank_n=0, lam=0.0, same_fact=2.0, min_relevance=0.0))),
        (NO_RERANK, traced(rig.without(rerank_n=0))),
        (COLLAPSE_ONLY, traced(rig.without(lam=0.0))),
        (GIST_ONLY, traced(rig.without(same_fact=2.0))),
        (NO_DIVERSITY, traced(rig.without(lam=0.0, same_fact=2.0))),
        (NO_FLOOR, traced(rig.without(min_relevance=0.0))),
    ]


@dataclass
class Drops:
    """Evidence turns in the baseline's top k that a diversity strategy does not return."""

    by_collapse: int = 0
    by_gist: int = 0
    gained: int = 0  # evidence it returns that the baseline did not
    questions_hurt: int = 0
    questions_helped: int = 0

    def add(self, baseline: set[str], got: set[str], collapsed: set[str], gist: bool) -> None:
        dropped = baseline - got
        collapsed_here = dropped & collapsed
        self.by_collapse += len(collapsed_here)
        self.by_gist += len(dropped - collapsed_here) if gist else 0
        gained = got - baseline
        self.gained += len(gained)
        self.questions_hurt += len(dropped) > len(gained)
        self.questions_helped += len(gained) > len(dropped)


@dataclass
class Recorded:
    """A runner that keeps what it returned for each query id."""

    run: Runner
    returned: dict[str, list[str]] = field(default_factory=dict)

    def __call__(self, query: dict[str, Any]) -> list[str]:
        ids = self.run(query)
        self.returned[query["id"]] = ids
        return ids


@dataclass(frozen=True)
class Recall:
    """The app default's recall@k both ways, over all questions."""

    ours: float  # distinct evidence turns; questions whose evidence names a turn
    locomo: float  # LoCoMo's definition (``locomo_recall``); every question of categories 1-4


# ---- the run ---------------------------------------------------------------------------


def _fmt(values: list[float]) -> str:
    return f"{sum(values) / len(values):.3f}" if values else "-"


def _category_table(
    results: dict[str, list[tuple[str, int, float]]], k: int, title: str
) -> list[str]:
    cats = sorted({c for rows in results.values() for _, c, _ in rows})
    counts = {c: sum(1 for _, x, _ in next(iter(results.values())) if x == c) for c in cats}
    header = " | ".join(f"{category_label(c)} ({counts[c]})" for c in cats)
    lines = [f"| strategy | {title}@{k} | {header} |", "| --- | ---: |" + " ---: |" * len(cats)]
    for name, rows in results.items():
        per_cat = " | ".join(_fmt([r for _, c, r in rows if c == cat]) for cat in cats)
        lines.append(f"| {name} | {_fmt([r for _, _, r in rows])} | {per_cat} |")
    return lines


def _locomo_scores(
    conv: Conversation, returned: dict[str, list[str]]
) -> list[tuple[str, int, float]]:
    """LoCoMo's recall of each question of categories 1-4 of ``conv``."""
    scores = []
    for asked in conv.asked:
        # A question none of whose entries names a turn was not run: no turn id matches them.
        got = returned.get(asked.query_id, []) if asked.query_id else []
        scores.append((conv.name, asked.category, locomo_recall(asked.evidence, got)))
    return scores


def run_bench(
    conversations: list[Conversation],
    embedder: Embedder,
    k: int,
    out: Callable[[str], None],
    reranker: Reranker | None = None,
) -> Recall:
    """Score every strategy on every conversation; print the tables; return the app
    default's recall@k over all questions, ours and LoCoMo's. ``reranker``: the app's
    cross-encoder (``None``: the reranking stage is skipped in every strategy)."""
    cached = CachedEmbedder(embedder)
    model = None if reranker is None else CachedReranker(reranker)
    names = [name for name, _ in strategies(Rig(InMemoryVectorStore(), cached, k))]
    costs: dict[str, list[float]] = {name: [] for name in names}
    pairs: dict[str, list[int]] = {name: [] for name in names}
    # strategy -> list of (conversation, category, recall) per question
    results: dict[str, list[tuple[str, int, float]]] = {name: [] for name in names}
    # the same, as LoCoMo's evaluation scores it
    theirs: dict[str, list[tuple[str, int, float]]] = {name: [] for name in names}
    drops = {name: Drops() for name in (COLLAPSE_ONLY, GIST_ONLY, APP_DEFAULT)}
    load_s = 0.0
    for conv in conversations:
        started = time.perf_counter()
        store = InMemoryVectorStore()
        store.upsert(NS, load_memories(conv.rows, cached))
        load_s += time.perf_counter() - started
        rig = Rig(store, cached, k, reranker=model)
        runners = strategies(rig)
        topic = {row["id"]: row["topic"] for row in conv.rows}
        category = {q["id"]: q["category"] for q in conv.queries}
        needed = {q["id"]: set(q["needed_topics"]) for q in conv.queries}
        for name, run in runners:
            recorded = Recorded(run)
            scores = evaluate(conv.queries, topic, recorded)
            results[name] += [(conv.name, category[q], r) for q, r in scores.per_query.items()]
            theirs[name] += _locomo_scores(conv, recorded.returned)
        traced = {name: run for name, run in runners if isinstance(run, Traced)}
        for name, run in traced.items():
            costs[name] += run.ms
            pairs[name] += run.reranked
        base = traced[NO_DIVERSITY]
        for name, tally in drops.items():
            strategy = traced[name]
            for qid, evidence in needed.items():
                tally.add(
                    set(base.returned[qid]) & evidence,
                    set(strategy.returned[qid]) & evidence,
                    strategy.collapsed[qid],
                    gist=name != COLLAPSE_ONLY,
                )
        for _name, run in runners:
            if isinstance(run, Traced):
                run.ltm.activation_threads().shutdown(wait=False)

    turns = sum(len(c.rows) for c in conversations)
    questions = sum(len(c.queries) for c in conversations)
    asked = sum(len(c.asked) for c in conversations)
    ran = f"reranker={model.model}" if model is not None else "reranker off (not installed)"
    out(f"LoCoMo evidence recall@{k}: {len(conversations)} conversations, {turns} turns, "
        f"{questions} questions, store=memory, embedder={cached.model}, {ran}\n")  # fmt: skip
    for line in _category_table(results, k, "evidence recall"):
        out(line)

    out(f"\nLoCoMo's own definition (task_eval/evaluation.py): {asked} questions of categories "
        "1-4, evidence entries as written, a question without evidence counts 1:\n")  # fmt: skip
    for line in _category_table(theirs, k, "LoCoMo recall"):
        out(line)

    out("\nper conversation (questions):\n")
    out("| conversation | " + " | ".join(names) + " |")
    out("| --- |" + " ---: |" * len(names))
    for conv in conversations:
        cells = " | ".join(
            _fmt([r for n, _, r in results[name] if n == conv.name]) for name in names
        )
        out(f"| {conv.name} ({len(conv.queries)}) | {cells} |")

    out(f"\nevidence turns in the top {k} of '{NO_DIVERSITY}' that a diversity stage drops, "
        f"and evidence the freed slots bring in (all questions):\n")  # fmt: skip
    out("| strategy | dropped by collapse | dropped by GIST | gained | net | "
        "questions hurt | questions helped |")  # fmt: skip
    out("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, tally in drops.items():
        net = tally.gained - tally.by_collapse - tally.by_gist
        out(f"| {name} | {tally.by_collapse} | {tally.by_gist} | {tally.gained} | {net:+d} | "
            f"{tally.questions_hurt} | {tally.questions_helped} |")  # fmt: skip
    out("\nthe cost of each strategy: activation ms without the cross-encoder (query "
        "embedding cached), pairs handed to the cross-encoder per question:\n")  # fmt: skip
    out("| strategy | activation p50 ms | mean ms | pairs reranked (mean) |")
    out("| --- | ---: | ---: | ---: |")
    for name in names:
        if costs[name]:
            out(f"| {name} | {statistics.median(costs[name]):.1f} | "
                f"{statistics.fmean(costs[name]):.1f} | {_mean(pairs[name]):.1f} |")  # fmt: skip
    if model is not None and model.model_ms:
        timed = model.model_ms
        out(f"\ncross-encoder: {len(timed)} runs of the model, {model.pairs} pairs: p50 "
            f"{statistics.median(timed):.1f} ms, p95 {_pct(timed, 95):.1f} ms, mean "
            f"{statistics.fmean(timed):.1f} ms a question "
            f"({sum(timed) / model.pairs:.2f} ms a pair)")  # fmt: skip
    out(f"\nembedded {cached.embedded} distinct texts; loading the stores took {load_s:.1f} s")
    return Recall(
        _mean([r for _, _, r in results[APP_DEFAULT]]),
        _mean([r for _, _, r in theirs[APP_DEFAULT]]),
    )


def _mean(values: list[float] | list[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run_sweep(
    conversations: list[Conversation],
    embedder: Embedder,
    reranker: Reranker,
    k: int,
    out: Callable[[str], None],
    ns: Sequence[int] = SWEEP_N,
    weights: Sequence[float] = SWEEP_WEIGHTS,
) -> None:
    """The app default's evidence recall@k for each ``rerank_n`` x ``rerank_weight`` of
    the grid (and with the stage off), every pair read by the model once."""
    cached = CachedEmbedder(embedder)
    model = PairCachedReranker(reranker)
    grid = [(n, w) for n in sorted(ns, reverse=True) for w in weights]
    recalls: dict[tuple[int, float], list[float]] = {cell: [] for cell in [(0, 0.0), *grid]}
    for conv in conversations:
        store = InMemoryVectorStore()
        store.upsert(NS, load_memories(conv.rows, cached))
        rig = Rig(store, cached, k, reranker=model)
        topic = {row["id"]: row["topic"] for row in conv.rows}
        for n, w in recalls:
            run = Traced(rig.ltm(rig.without(rerank_n=n, rerank_weight=w)))
            recalls[(n, w)] += list(evaluate(conv.queries, topic, run).per_query.values())
            run.ltm.activation_threads().shutdown(wait=False)
        print(f"{conv.name} done", file=sys.stderr)
    out(f"rerank_n x rerank_weight, evidence recall@{k} of the app default "
        f"({sum(len(c.queries) for c in conversations)} questions, embedder={cached.model}, "
        f"reranker={model.model}); stage off: {_mean(recalls[(0, 0.0)]):.3f}\n")  # fmt: skip
    out("| rerank_n | " + " | ".join(f"weight {w}" for w in weights) + " |")
    out("| ---: |" + " ---: |" * len(weights))
    for n in ns:
        cells = " | ".join(f"{_mean(recalls[(n, w)]):.3f}" for w in weights)
        out(f"| {n} | {cells} |")
    out(f"\nthe model read {model.pairs} pairs in {len(model.model_ms)} runs")


def main(
    argv: list[str] | None = None,
    *,
    embedder: Embedder | None = None,
    reranker: Reranker | Literal["app"] | None = "app",
) -> int:
    """``reranker``: the app's cross-encoder when installed (``"app"``), or this one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--embedder", choices=LOCAL_MODELS, default=DEFAULT_LOCAL_MODEL,
                        help="the offline embedder; default: the app's")  # fmt: skip
    parser.add_argument(
        "--sweep", action="store_true", help="rerank_n x rerank_weight instead of the stages"
    )
    parser.add_argument("--sweep-n", default=",".join(map(str, SWEEP_N)), help="e.g. 20,30")
    parser.add_argument(
        "--sweep-weights", default=",".join(map(str, SWEEP_WEIGHTS)), help="e.g. 0.3,0.5"
    )
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"locomo_retrieval: no LoCoMo data at {args.data}, skipped "
              "(pass --data path/to/locomo10.json)")  # fmt: skip
        return 0
    try:
        data = json.loads(args.data.read_text(encoding="utf-8"))
        conversations = [convert(sample, i) for i, sample in enumerate(data)]
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        print(f"locomo_retrieval: cannot read {args.data}: {exc}", file=sys.stderr)
        return 2
    if args.conversations is not None:
        conversations = conversations[: max(0, args.conversations)]
    conversations = [c for c in conversations if c.rows and c.queries]
    if not conversations:
        print(f"locomo_retrieval: no conversation with questions in {args.data}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if embedder is None:
        embedder = build_embedder("local", model=args.embedder)
    if reranker == "app":
        reranker, _note = app_reranker()
    if args.sweep:
        if reranker is None:
            print("locomo_retrieval: --sweep needs the reranker (./install.sh)", file=sys.stderr)
            return 2
        ns = tuple(int(x) for x in args.sweep_n.split(","))
        weights = tuple(float(x) for x in args.sweep_weights.split(","))
        run_sweep(conversations, embedder, reranker, args.k, print, ns, weights)
        print(f"run time {time.perf_counter() - started:.0f} s")
        return 0
    recall = run_bench(conversations, embedder, args.k, print, reranker)
    print(f"run time {time.perf_counter() - started:.0f} s")
    print(f"\nlocomo_recall@{args.k}={recall.locomo:.3f}")
    print(f"evidence_recall@{args.k}={recall.ours:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
