"""LoCoMo evidence recall@k of the retrieval strategies (retrieval only, no LLM).

    python -m bench.locomo_retrieval [--data ../shared/eval/locomo/locomo10.json] [--k 8]
                                     [--conversations N] [--embedder NAME]

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
Strategies: naive cosine top-k, the app's hybrid scoring without diversity, with the
restatement collapse only, with GIST only, and the app default (both).

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
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from backend.embeddings.factory import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, build_embedder
from backend.embeddings.port import Embedder
from backend.longterm.memory import LongTermMemory
from backend.memory.types import ActivationPolicy
from backend.stores.in_memory import InMemoryVectorStore
from bench.retrieval_quality import NS, Rig, Runner, evaluate, load_memories

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "eval" / "locomo" / "locomo10.json"

# LoCoMo's own code fixes the labels (task_eval/evaluation.py: category 1 is scored as
# multi-hop with a multi-answer F1, 5 as adversarial, 3's answers cut at ';'; gpt_utils.py
# asks category 2 for a date; evaluation_stats.py prints 4, 1, 2, 3, 5 in the paper's column
# order single-hop, multi-hop, temporal, open-domain, adversarial). Tables name each with its
# number, since published tables disagree on the mapping.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

NAIVE = "naive cosine top-k"
NO_DIVERSITY = "hybrid, no collapse, no GIST"
COLLAPSE_ONLY = "hybrid + restatement collapse only"
GIST_ONLY = "hybrid + GIST only"
APP_DEFAULT = "app default (hybrid + collapse + GIST)"

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
        self.embedded = 0  # texts actually sent to ``inner``

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            vectors = self.inner.embed(missing)
            self.embedded += len(missing)
            for text, vector in zip(missing, vectors, strict=True):
                self.cache[text] = np.asarray(vector, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


# ---- strategies ------------------------------------------------------------------------


@dataclass
class Traced:
    """A hybrid strategy that keeps, per query id, what it returned and collapsed."""

    ltm: LongTermMemory
    returned: dict[str, list[str]] = field(default_factory=dict)
    collapsed: dict[str, set[str]] = field(default_factory=dict)

    def __call__(self, query: dict[str, Any]) -> list[str]:
        result = self.ltm.activate(NS, query["text"], target_emotion=query.get("target_emotion"))
        ids = [m.id for m in result.memories]
        self.returned[query["id"]] = ids
        self.collapsed[query["id"]] = set(result.retrieval.collapsed)
        return ids


def strategies(rig: Rig) -> list[tuple[str, Runner]]:
    def traced(policy: ActivationPolicy) -> Traced:
        return Traced(rig.ltm(policy))

    return [
        (NAIVE, rig.naive()),
        (NO_DIVERSITY, traced(rig.hybrid_policy(lam=0.0, same_fact=2.0))),
        (COLLAPSE_ONLY, traced(rig.hybrid_policy(lam=0.0))),
        (GIST_ONLY, traced(rig.hybrid_policy(same_fact=2.0))),
        (APP_DEFAULT, traced(rig.app_policy())),
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
    conversations: list[Conversation], embedder: Embedder, k: int, out: Callable[[str], None]
) -> Recall:
    """Score every strategy on every conversation; print the tables; return the app
    default's recall@k over all questions, ours and LoCoMo's."""
    cached = CachedEmbedder(embedder)
    names = [name for name, _ in strategies(Rig(InMemoryVectorStore(), cached, k))]
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
        rig = Rig(store, cached, k)
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
    out(f"LoCoMo evidence recall@{k}: {len(conversations)} conversations, {turns} turns, "
        f"{questions} questions, store=memory, embedder={cached.model}\n")  # fmt: skip
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
    out(f"\nembedded {cached.embedded} distinct texts; loading the stores took {load_s:.1f} s")
    return Recall(
        _mean([r for _, _, r in results[APP_DEFAULT]]),
        _mean([r for _, _, r in theirs[APP_DEFAULT]]),
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def main(argv: list[str] | None = None, *, embedder: Embedder | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--embedder", choices=LOCAL_MODELS, default=DEFAULT_LOCAL_MODEL,
                        help="the offline embedder; default: the app's")  # fmt: skip
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
    recall = run_bench(conversations, embedder, args.k, print)
    print(f"run time {time.perf_counter() - started:.0f} s")
    print(f"\nlocomo_recall@{args.k}={recall.locomo:.3f}")
    print(f"evidence_recall@{args.k}={recall.ours:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
