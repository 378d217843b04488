"""Turn latency: the app's time-to-first-token overhead, and turn wall time vs max(main, hippo).

    python -m bench.turn_latency [--memories 10000] [--repeats 50] [--wall-repeats 10]
                                 [--ttft-ms 300] [--hippo-ms 200 800 1500] [--embedder NAME]

Real components end to end: two ``ScriptedOpenAIServer``s on loopback (real sockets,
real SSE), each in a process of its own (a real upstream is elsewhere; in-process its
threads would compete with the app for the interpreter lock), one answering the chat role
and one the hippocampus role (one server per role, so that each request gets its role's
scripted latency however the two concurrent requests interleave), reached through
``OpenAICompatChatModel`` (one instance per role); the app's default local embedder
(``--embedder``; ``minilm-use``: MiniLM and USE, two searches a turn); a
persistent Chroma store in a temp dir pre-filled with ``--memories`` memories in the
benchmark namespace (a few hundred distinct generated sentences embedded for real, the
rest perturbed and renormalised copies of their vectors with varied text); all wired by
the app's ``build_services`` (a ``SessionStore`` and the outbox in the temp dir, the
default persona from ``personas/``, memory settings as the app's defaults).

1. TTFT overhead. For ``--repeats`` turns of one session (after ``--warmup`` turns), the
   time from entering ``engine.turn(...)`` to the first text chunk of ``turn.stream()``;
   each turn's merge is awaited before the next (per-session ordering). After each turn
   the upstream's own TTFT is measured by calling the chat model's ``stream`` directly
   with that turn's messages and the same scripted delay, so loopback, HTTP and SDK
   costs sit in the upstream baseline, not in our overhead. Overhead = app − upstream,
   per percentile. The activation's own split (query embedding, then search + score +
   GIST) comes from ``turn.activation.embed_ms`` / ``search_ms``.
2. Wall-time ratio. For each hippocampus latency in ``--hippo-ms`` (the main model
   streams ``--chunks`` chunks ``--chunk-ms`` apart after ``--ttft-ms``), per repeat:
   the main model alone and the hippocampus alone (called directly on their servers),
   then a whole turn from ``begin`` until its merged memory report is ready. Ratio =
   turn wall / max(main alone, hippocampus alone), per repeat.

Prints two Markdown tables, the command line and the machine (nproc, load average).
Numbers on a loaded machine are noisy; rerun when the load average is high.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from backend.clock import SystemClock
from backend.config import MemorySettings
from backend.embeddings.factory import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, build_embedder
from backend.embeddings.port import Embedder, vector_split
from backend.engine.services import build_services
from backend.engine.turn import TurnEngine, TurnRequest
from backend.hippocampus import SessionMemoryState, build_messages, hippocampus_schema
from backend.llm.port import ChatModel, TextDelta
from backend.memory.keywords import extract_keywords
from backend.memory.types import Emotion, Memory, Namespace
from backend.stores.chroma_store import ChromaVectorStore
from bench._rig import (
    FEELINGS,
    TextMaker,
    UpstreamProcess,
    command_line,
    load_personas,
    machine_line,
    percentile,
    split_chunks,
)
from bench.retrieval_latency import paraphrase
from tests.engine.wiring import app_settings
from tests.llm.scripted_server import Reply

USER = "bench-user"
SEED = 20260501
TTFT_TARGET_MS = 30.0
RATIO_TARGET = 1.05
# Per-coordinate noise of the perturbed copies: cosine to their base about 0.9.
PERTURB_SIGMA = 0.45


# --- the namespace ------------------------------------------------------------------------


def prefill(
    store: ChromaVectorStore,
    embedder: Embedder,
    ns: Namespace,
    n: int,
    base_count: int,
    maker: TextMaker,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Fill ``ns`` with ``n`` memories; (embedding seconds, upsert seconds)."""
    bases: dict[str, str] = {}
    for _ in range(base_count * 50):  # the word lists give thousands of distinct facts
        if len(bases) >= min(base_count, n):
            break
        content, category = maker.memory()
        bases.setdefault(content, category)
    texts = list(bases)
    split = vector_split(embedder)
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    embedded = time.perf_counter()
    now = SystemClock().now()
    asides = (
        "", " They mentioned it again recently.", " It came up more than once.",
        " This matters to them.", " They said it in passing.", " It was a while ago.",
    )  # fmt: skip
    memories: list[Memory] = []
    for i in range(n):
        b = i % len(texts)
        if i < len(texts):
            vector = vectors[b]
            content = texts[b]
        else:
            # Each part of a two-part vector perturbed on its own, as the store keeps it.
            vector = paraphrase(vectors[b], rng, split, noise=PERTURB_SIGMA / np.sqrt(384))
            content = f"{texts[b]}{asides[i % len(asides)]} (note {i})"
        created = now - timedelta(days=float(rng.uniform(0, 365)))
        emotional = rng.random() < 0.3
        memories.append(
            Memory(
                id=f"bench{i:06d}",
                content=content,
                category=bases[texts[b]],
                importance=float(rng.uniform(0.2, 1.0)),
                confidence=float(rng.uniform(0.6, 1.0)),
                created_at=created,
                last_accessed=created + timedelta(days=float(rng.uniform(0, 30))),
                access_count=int(rng.integers(0, 6)),
                keywords=tuple(extract_keywords(content)[:5]),
                emotion=Emotion(FEELINGS[i % len(FEELINGS)], float(rng.uniform(0.2, 0.9)))
                if emotional
                else None,
                embedding=vector.astype(np.float32),
            )
        )
    for start in range(0, n, 2000):
        store.upsert(ns, memories[start : start + 2000])
    return embedded - started, time.perf_counter() - embedded


# --- scripted replies ---------------------------------------------------------------------


def hippocampus_reply_json() -> str:
    """A small valid hippocampus result (one long-term candidate, so the merge writes)."""
    return json.dumps(
        {
            "background": (
                "The user has been talking late at night about work, sleep and their sister "
                "Mei, who moved to Osaka; they worry about an interview next week and find "
                "comfort in oolong tea and long bike rides."
            ),
            "short_term": [
                {"role": "user", "text": "Talked about a long day at work."},
                {"role": "assistant", "text": "Listened and asked what would help."},
            ],
            "long_term": [
                {
                    "content": "The user's sister Mei moved to Osaka.",
                    "category": "relationship",
                    "importance": 0.8,
                    "confidence": 0.9,
                    "subject": "user",
                    "keywords": ["sister", "mei", "osaka"],
                }
            ],
            "user_emotion": {"label": "tired", "intensity": 0.5},
        }
    )


def main_reply(args: argparse.Namespace, maker: TextMaker) -> Reply:
    text = " ".join(maker.reply() for _ in range(2))
    return Reply(
        chunks=split_chunks(text, args.chunks),
        first_token_delay_s=args.ttft_ms / 1e3,
        chunk_delay_s=args.chunk_ms / 1e3,
    )


def hippocampus_reply(total_ms: float) -> Reply:
    chunks = split_chunks(hippocampus_reply_json(), 8)
    return Reply(chunks=chunks, first_token_delay_s=total_ms / 1e3)


# --- measuring ----------------------------------------------------------------------------


@dataclass
class TurnTimes:
    begin_ms: float
    ttft_ms: float
    stream_end_ms: float
    merged_ms: float
    embed_ms: float | None
    search_ms: float | None
    messages: list[dict[str, Any]]
    session_id: str
    hippocampus: dict[str, Any] = field(default_factory=dict)


async def timed_turn(engine: TurnEngine, text: str, session_id: str | None) -> TurnTimes:

    started = time.perf_counter()
    async with engine.turn(TurnRequest(user_id=USER, text=text, session_id=session_id)) as turn:
        begun = time.perf_counter()
        first: float | None = None
        async for piece in turn.stream():
            if first is None and piece:
                first = time.perf_counter()
        ended = time.perf_counter()
    assert turn.merged is not None
    report = await turn.merged
    merged = time.perf_counter()
    activation = turn.activation

    def ms(t: float) -> float:
        return (t - started) * 1e3

    return TurnTimes(
        begin_ms=ms(begun),
        ttft_ms=ms(first if first is not None else ended),
        stream_end_ms=ms(ended),
        merged_ms=ms(merged),
        embed_ms=None if activation is None else activation.embed_ms,
        search_ms=None if activation is None else activation.search_ms,
        messages=turn.messages,
        session_id=turn.session.id,
        hippocampus=dict(report.get("hippocampus") or {}),
    )


async def upstream_stream(model: ChatModel, messages: list[dict[str, Any]]) -> tuple[float, float]:
    """(TTFT ms, total ms) of one direct ``stream`` call, consumed to the end."""
    started = time.perf_counter()
    first: float | None = None
    async for delta in model.stream(messages):
        if first is None and isinstance(delta, TextDelta) and delta.text:
            first = time.perf_counter()
    ended = time.perf_counter()
    return ((first or ended) - started) * 1e3, (ended - started) * 1e3


async def upstream_hippocampus(model: ChatModel, text: str, focus: str | None) -> float:
    messages = build_messages(SessionMemoryState(), text, persona_focus=focus)
    started = time.perf_counter()
    await model.complete(messages, json_schema=hippocampus_schema())
    return (time.perf_counter() - started) * 1e3


def _row(label: str, values: list[float]) -> str:
    return f"| {label} | {percentile(values, 50):.1f} | {percentile(values, 95):.1f} |"


# --- the benchmark ------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> list[str]:
    maker = TextMaker(args.seed)
    rng = np.random.default_rng(args.seed)
    memory_settings = MemorySettings()
    personas = load_personas()
    persona = personas.default
    ns = Namespace(USER, persona.id)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as tmp:
        loaded = time.perf_counter()
        embedder = build_embedder("local", model=args.embedder)
        load_s = time.perf_counter() - loaded
        store = ChromaVectorStore.persistent(Path(tmp) / "chroma")
        embed_s, upsert_s = prefill(
            store, embedder, ns, args.memories, args.base_sentences, maker, rng
        )
        with UpstreamProcess() as main_server, UpstreamProcess() as hippo_server:
            # The app's wiring: its OpenAI-compatible clients (one per role), sessions and
            # outbox in the temp dir, default memory settings; the pre-filled store.
            roles = {
                # Scripted replies repeat their openers (TextMaker): the reply guard would
                # sample again. Its cost on real models: bench.reply_quality.
                "chat": {
                    "base_url": main_server.base_url,
                    "model": "bench-chat",
                    "reply_guard": False,
                },
                "hippocampus": {
                    "base_url": hippo_server.base_url,
                    "model": "bench-hippocampus",
                    "mode": "full",  # its scripted answers are the full contract's
                },
            }
            settings = app_settings(
                Path(tmp) / "data",
                **{r: {"provider": "openai", "timeout": 30.0, **v} for r, v in roles.items()},
            )
            services = build_services(settings, command="bench", embedder=embedder, store=store)
            engine, chat, hippocampus = services.engine, services.chat, services.hippocampus
            try:
                stored = store.count(ns)
                lines += [
                    command_line("bench.turn_latency", args.argv),
                    machine_line(),
                    f"namespace: {stored} memories in Chroma (persistent, temp dir); "
                    f"{min(args.base_sentences, args.memories)} distinct sentences embedded "
                    f"in {embed_s:.1f} s, upserted in {upsert_s:.1f} s; embedder "
                    f"{embedder.model} loaded in {load_s:.1f} s; retrieval "
                    f"mode {memory_settings.activation_policy().retrieval.mode}, "
                    f"pool {memory_settings.activation_policy().pool}",
                    "",
                ]
                lines += await ttft_table(args, engine, chat, maker, main_server, hippo_server)
                lines.append("")
                lines += await wall_table(
                    args, engine, chat, hippocampus, persona.hippocampus_focus, maker,
                    main_server, hippo_server,
                )  # fmt: skip
            finally:
                await services.aclose()
    return lines


async def ttft_table(
    args: argparse.Namespace,
    engine: TurnEngine,
    chat: ChatModel,
    maker: TextMaker,
    main_server: UpstreamProcess,
    hippo_server: UpstreamProcess,
) -> list[str]:
    main_server.default = main_reply(args, maker)
    hippo_server.default = hippocampus_reply(args.ttft_hippo_ms)
    app: list[float] = []
    upstream: list[float] = []
    begin: list[float] = []
    embed: list[float] = []
    search: list[float] = []
    cold_activation: float | None = None
    hippo_failures = 0
    session_id: str | None = None
    for i in range(args.warmup + args.repeats):
        times = await timed_turn(engine, maker.user_line().text, session_id)
        session_id = times.session_id
        if i == 0:
            cold_activation = (times.embed_ms or 0.0) + (times.search_ms or 0.0)
        base_ttft, _ = await upstream_stream(chat, times.messages)
        if i < args.warmup:
            continue
        hippo_failures += times.hippocampus.get("status") != "ok"
        app.append(times.ttft_ms)
        upstream.append(base_ttft)
        begin.append(times.begin_ms)
        if times.embed_ms is not None and times.search_ms is not None:
            embed.append(times.embed_ms)
            search.append(times.search_ms)
    overhead50 = percentile(app, 50) - percentile(upstream, 50)
    overhead95 = percentile(app, 95) - percentile(upstream, 95)
    met = "met" if overhead50 <= TTFT_TARGET_MS else "NOT met"
    return [
        f"### Time to first token: {args.repeats} turns of one session (after {args.warmup} "
        f"warm-up), upstream TTFT scripted at {args.ttft_ms:g} ms, hippocampus at "
        f"{args.ttft_hippo_ms:g} ms",
        "",
        "| measure | p50 ms | p95 ms |",
        "|---|---:|---:|",
        _row("app TTFT: `engine.turn` entered → first text chunk of `turn.stream()`", app),
        _row("upstream TTFT: `OpenAICompatChatModel.stream` called directly", upstream),
        f"| **overhead** (app − upstream, per percentile) | **{overhead50:.1f}** | "
        f"**{overhead95:.1f}** |",
        _row("entering the turn (open session, persist, activation, prompt)", begin),
        _row("activation: query embedding (`embed_ms`)", embed),
        _row("activation: search + score + GIST (`search_ms`)", search),
        "",
        f"Target: overhead p50 ≤ {TTFT_TARGET_MS:g} ms — {met}. First (cold) activation: "
        f"{cold_activation or 0.0:.1f} ms. Hippocampus failures: {hippo_failures}.",
    ]


async def wall_table(
    args: argparse.Namespace,
    engine: TurnEngine,
    chat: ChatModel,
    hippocampus: ChatModel,
    focus: str | None,
    maker: TextMaker,
    main_server: UpstreamProcess,
    hippo_server: UpstreamProcess,
) -> list[str]:
    main_server.default = main_reply(args, maker)
    main_label = f"{args.ttft_ms:g} ms + {args.chunks} × {args.chunk_ms:g} ms"
    lines = [
        f"### Turn wall time vs max(main, hippocampus): {args.wall_repeats} turns per pair "
        "(after 1 warm-up), a new session per pair",
        "",
        "| main (scripted) | hippocampus (scripted) | main alone p50 ms | hippocampus alone "
        "p50 ms | max p50 ms | turn wall p50 ms | ratio p50 | ratio p95 | begin → last token "
        "p50 ms | last token → merged p50 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for hippo_ms in args.hippo_ms:
        hippo_server.default = hippocampus_reply(hippo_ms)
        mains: list[float] = []
        hippos: list[float] = []
        walls: list[float] = []
        ratios: list[float] = []
        tails: list[float] = []
        visible: list[float] = []
        session_id: str | None = None
        messages: list[dict[str, Any]] | None = None
        for i in range(1 + args.wall_repeats):
            text = maker.user_line().text
            if messages is not None:
                _, main_alone = await upstream_stream(chat, messages)
                hippo_alone = await upstream_hippocampus(hippocampus, text, focus)
            times = await timed_turn(engine, text, session_id)
            session_id, messages = times.session_id, times.messages
            if i == 0:
                continue  # warm-up: opens the session and the connections
            mains.append(main_alone)
            hippos.append(hippo_alone)
            walls.append(times.merged_ms)
            ratios.append(times.merged_ms / max(main_alone, hippo_alone))
            tails.append(times.merged_ms - times.stream_end_ms)
            visible.append(times.stream_end_ms)
        worst = max(worst, percentile(ratios, 50))
        maxes = [max(m, h) for m, h in zip(mains, hippos, strict=True)]
        lines.append(
            f"| {main_label} | {hippo_ms:g} ms | {percentile(mains, 50):.0f} | "
            f"{percentile(hippos, 50):.0f} | {percentile(maxes, 50):.0f} | "
            f"{percentile(walls, 50):.0f} | {percentile(ratios, 50):.3f} | "
            f"{percentile(ratios, 95):.3f} | {percentile(visible, 50):.0f} | "
            f"{percentile(tails, 50):.1f} |"
        )
    met = "met" if worst <= RATIO_TARGET else "NOT met"
    lines += [
        "",
        f"Target: ratio ≤ {RATIO_TARGET:g} — {met} (worst p50 {worst:.3f}). The turn's wall "
        "time includes activation before the main call and the merge after it (save gate "
        "with one candidate, reinforcement, state and report writes).",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000, help="memories in the namespace")
    parser.add_argument(
        "--base-sentences", type=int, default=300, help="distinct sentences embedded for real"
    )
    parser.add_argument("--repeats", type=int, default=50, help="timed turns for the TTFT table")
    parser.add_argument("--warmup", type=int, default=3, help="untimed turns before them")
    parser.add_argument("--ttft-ms", type=float, default=300.0, help="scripted main-model TTFT")
    parser.add_argument("--chunks", type=int, default=20, help="main reply chunks")
    parser.add_argument("--chunk-ms", type=float, default=20.0, help="delay between chunks")
    parser.add_argument(
        "--ttft-hippo-ms", type=float, default=800.0, help="hippocampus latency, TTFT table"
    )
    parser.add_argument(
        "--hippo-ms", type=float, nargs="+", default=[200.0, 800.0, 1500.0],
        help="hippocampus latencies, wall-time table",
    )  # fmt: skip
    parser.add_argument("--wall-repeats", type=int, default=10, help="timed turns per pair")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--embedder", choices=LOCAL_MODELS, default=DEFAULT_LOCAL_MODEL,
                        help="the offline embedder; default: the app's")  # fmt: skip
    args = parser.parse_args(argv)
    args.argv = argv
    args.repeats = max(1, args.repeats)
    args.wall_repeats = max(1, args.wall_repeats)
    args.memories = max(1, args.memories)
    lines = asyncio.run(run(args))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
