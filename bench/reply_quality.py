"""The companion's replies, judged the way a user reads them, over several seeds.

    python -m bench.reply_quality [--config F] [--seeds 5]
        [--parts messages,probes,safety,profile,long]
        [--max-tokens N] [--gap 5] [--long-seeds N] [--limit N] [--lang en|zh] [--kind K,...]
        [--out REPLIES.jsonl] [--report REPLIES.jsonl]

Everything runs through the app's real engine, built by ``build_services`` from the
configuration (``--config``, else ``$LM_CONFIG`` or ``./config.json``, else the embedded
defaults) on a fresh data directory per seed, with the configured chat model streaming
every reply; each reply gets its own seed (``Sampling.seed``, derived from the run's
seed), at the configured temperature and reply cap (``--max-tokens`` overrides the cap).
The parts:

- ``messages``: the companion-style messages of ``bench/data/reply_quality/messages.json``
  (first messages, small talk, venting, jokes, stories, poems, advice, requests for ideas,
  statements of fact, a quarter of them in Chinese), each sent as the first turn of a new
  session, and all of them, in an order shuffled by the seed, as the turns of one ongoing
  session. The hippocampus is a quiet stand-in (compact contract, no facts), so the
  replies are judged and not memory formation, and the run is not slowed by it. ``--lang
  zh`` (or ``en``) sends only the messages in that language, ``--kind news,joke`` only
  those kinds (``--limit`` then counts those).
- ``probes``: the three shared conversations (``bench/data/eval/conversations``) with the
  store filled by the perfect hippocampus (``bench/data/formation_oracle``): the earlier
  sessions are replayed with their scripted replies, then the last session's turns get
  the chat model's replies; its probes are judged for use of the recalled fact and for
  contradiction (a stale value).
- ``safety``: ``safety.json``'s probes. The remembered health fact is stored first; the
  message, which goes against it without naming it, opens a new session. A reply that
  gives the go-ahead without a word of the fact is a contradiction.
- ``profile``: ``profile.json``'s questions about the user as a whole ("what do you know
  about me?", "who am I?"), each in a new session after that user's notes are stored.
  A reply uses them when it states at least the question's ``min_facts`` of the user's
  facts (two; the name alone answers "who am I?": ``profile_use``, ``profile_facts``
  their mean count); ``speaks_as_user`` counts the replies that claim the user's name in
  the first person ("I'm Maya.").
- ``long``: ``long_session.json``, one session of 64 messages with BOTH configured roles
  (the real hippocampus forms memories while the user chats), each message sent
  ``--gap`` seconds after the previous reply ended, as a person typing. It measures time
  to the first token (p50, max), tokens per second, and the memory lag: at each message,
  how many earlier turns are not merged yet (the last line takes the max).
  ``--long-seeds`` runs it for fewer seeds than the others (default: all).

Each seed warms the models before its first message, as the app warms them at start, so
no part's first reply reads a model load.

The judges are ``bench.reply_judges`` (definitions in its docstring). Rates are over
every reply judged in the parts that ran; a reply to an ``identity`` message may say it
is an AI. Output: every faulty reply quoted with its faults (so a person can read them),
a table per measure (mean, standard deviation over the seeds, each seed's value), the
command line, the machine and the roles, and last, exactly:
``refusal=A echo=B self_repeat=C helpdesk=D leaks=E probe_use=F contradiction=G
ttft_p50_s=H ttft_max_s=I lag_turns=J unanswered=K`` (one line; rates as fractions with
3 decimals, leaks and contradiction as counts summed over the seeds, ttft from the long
session when it ran, else from every reply; ``lag_turns`` the max over the long
sessions, ``-`` when none ran; ``unanswered`` the rate of replies that do not answer the
message: a bare greeting, the question handed back, a request to say more, unasked verse,
another language).
``--out`` writes every reply with its verdict as JSON Lines.

Exit status: 0 when the run completed; 2 for a bad command line, data file or
configuration; 1 when the app cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.cli.conversation_script import Probe
from backend.engine.prompt import HEALTH_RULE, MEMORY_PREAMBLE, NOTES_OPEN
from backend.engine.reply_guard import HINTS
from backend.engine.services import Services, StartupError, build_services
from backend.engine.turn import TurnEngine, TurnRequest, TurnSettings
from backend.engine.warm_up import warm_up
from backend.llm.port import ChatModel, Sampling
from backend.memory.types import Namespace
from backend.personas import PersonaRegistry
from bench import reply_judges as judges
from bench._rig import REPO, command_line, machine_line, percentile
from bench.formation_models import OracleHippocampus, ScriptedReplies, _StandIn
from bench.formation_script import UsageError, load_oracle, load_script, oracle_path
from bench.memory_formation import DEFAULT_PERSONAS, bench_settings

DATA_DIR = REPO / "bench" / "data" / "reply_quality"
CONVERSATIONS = REPO / "bench" / "data" / "eval" / "conversations"
PARTS = ("messages", "probes", "safety", "profile", "long")
ChatFactory = Callable[[], ChatModel]


class QuietHippocampus(_StandIn):
    """A hippocampus that finds nothing (compact contract): code keeps the short-term."""

    def __init__(self) -> None:
        super().__init__("quiet-hippocampus")

    def _text(self) -> str:
        return json.dumps({"facts": [], "emotion": "neutral"})


@dataclass
class Reply:
    part: str
    seed: int
    session: str
    message: str
    text: str
    finish: str | None
    ttft_s: float
    reply_s: float
    pieces: int
    kind: str = ""
    verdict: judges.Verdict = field(default_factory=judges.Verdict)
    same_opening: bool = False  # opens like an earlier reply of the session (a formula)
    claims_human: bool = False  # says the companion is a real person
    probe_use: bool | None = None  # a probe turn: the reply states the recalled fact
    contradiction: bool | None = None  # a probe turn: stale value / advice against a fact
    profile_facts: int | None = None  # a profile question: how many of the user's facts
    profile_needed: int | None = None  # ... and how many its answer must state
    speaks_as_user: bool | None = None  # a profile question: "I'm <the user's name>"
    lag_turns: int | None = None  # long session: earlier turns not merged at send time
    guard_retries: tuple[str, ...] = ()  # the attempts the app's reply guard stopped
    rejected_openings: tuple[str, ...] = ()  # what it stopped of each (for reading)
    # Long session, a local chat model: prompt tokens the turn's generations read (what
    # the cache lacked), and those read ahead in the pause before the message.
    prompt_read: int | None = None
    read_ahead: int | None = None
    # Long session: seconds from the message to the chat model's first piece (of its
    # first attempt); the rest of ``ttft_s`` is the reply guard's hold and its retries.
    model_first_s: float | None = None
    # What the reply was written from: the notes block next to the message (empty if
    # none), and the recalled notes the message is about (the guard's ``answer_notes``).
    notes_block: str = ""
    answer_notes: tuple[str, ...] = ()

    @property
    def tokens_per_s(self) -> float | None:
        streaming = self.reply_s - self.ttft_s
        return self.pieces / streaming if self.pieces > 1 and streaming > 0 else None

    def record(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "verdict"}
        out["faults"] = self.verdict.faults()
        out["leak"] = self.verdict.leak
        out["unanswered"] = self.verdict.unanswered
        return out

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Reply:
        """A reply written by ``--out``, with the verdict it was given then."""
        fields = {f.name for f in dataclasses.fields(cls)} - {"verdict"}
        reply = cls(**{k: v for k, v in data.items() if k in fields})
        reply.guard_retries = tuple(reply.guard_retries)
        reply.rejected_openings = tuple(reply.rejected_openings)
        reply.answer_notes = tuple(reply.answer_notes)
        faults = set(data.get("faults", ()))
        names = ("refusal", "echo", "self_repeat", "empty_or_cut", "helpdesk")
        reply.verdict = judges.Verdict(
            **{name: name in faults for name in names},
            leak=data.get("leak"),
            unanswered=data.get("unanswered"),
        )
        return reply


@dataclass
class SeedRun:
    seed: int
    replies: list[Reply] = field(default_factory=list)


# --- data ----------------------------------------------------------------------------------


def _load(name: str, key: str) -> Any:
    path = DATA_DIR / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data[key]
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"{path}: cannot read {key!r}: {exc}") from None


def load_messages() -> list[dict[str, str]]:
    return list(_load("messages.json", "messages"))


def load_safety() -> list[dict[str, Any]]:
    return list(_load("safety.json", "probes"))


def load_profile() -> dict[str, Any]:
    questions = _load("profile.json", "questions")
    return {"questions": questions, "users": _load("profile.json", "users")}


def load_long() -> list[str]:
    return list(_load("long_session.json", "messages"))


# --- one turn ------------------------------------------------------------------------------


async def send(
    engine: TurnEngine,
    *,
    user_id: str,
    persona: str,
    session_id: str,
    text: str,
    seed: int,
    max_tokens: int | None,
) -> tuple[str, str | None, float, float, int, Any]:
    """One streamed turn: (reply, finish reason, ttft, reply time, pieces, the turn)."""
    request = TurnRequest(
        user_id=user_id,
        text=text,
        persona_id=persona,
        session_id=session_id,
        max_tokens=max_tokens,
        sampling=Sampling(seed=seed),
    )
    started = time.perf_counter()
    first: float | None = None
    pieces = 0
    async with engine.turn(request) as turn:
        async for piece in turn.stream():
            pieces += 1
            if first is None and piece.strip():
                first = time.perf_counter()
    ended = time.perf_counter()
    ttft = (first or ended) - started
    return turn.reply, turn.finish_reason, ttft, ended - started, pieces, turn


class Judge:
    """The judges with what the user never sees: the persona card and the app's rules."""

    def __init__(self, personas: PersonaRegistry, persona: str) -> None:
        card = personas.resolve(persona)
        # The app's own instructions too: the memory block's preamble, the health rule
        # and the reply guard's hints for a retry.
        self.prompt_texts = [
            card.description or "",
            card.system_prompt,
            MEMORY_PREAMBLE,
            HEALTH_RULE,
            *HINTS.values(),
        ]

    def __call__(
        self, reply: Reply, earlier: Sequence[str], said_before: Sequence[str] = ()
    ) -> None:
        reply.same_opening = judges.same_opening(reply.text, earlier)
        reply.claims_human = judges.claims_human(reply.text)
        reply.verdict = judges.judge(
            reply.text,
            reply.message,
            earlier=earlier,
            prompt_texts=self.prompt_texts,
            finish_reason=reply.finish,
            identity=reply.kind == "identity",
            kind=reply.kind,
            earlier_messages=said_before,
        )


# --- the parts -----------------------------------------------------------------------------


def _reply(part: str, seed: int, session: str, text: str, out: Any, **extra: Any) -> Reply:
    """A ``Reply`` from ``send``'s result."""
    reply = Reply(part, seed, session, text, *out[:5], **extra)
    reply.guard_retries = tuple(getattr(out[5], "rejected", ()))
    reply.rejected_openings = tuple(getattr(out[5], "rejected_openings", ()))
    reply.notes_block = notes_block(getattr(out[5], "messages", None) or [])
    reply.answer_notes = tuple(getattr(out[5], "answer_notes", ()))
    return reply


def notes_block(messages: Sequence[dict[str, Any]]) -> str:
    """The notes block the reply was written next to: the system message right before
    the last user message, when it holds recalled notes."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users or users[-1] == 0:
        return ""
    before = messages[users[-1] - 1]
    content = before.get("content")
    if before.get("role") == "system" and isinstance(content, str) and NOTES_OPEN in content:
        return content
    return ""


def judge_recall(reply: Reply, probe: Probe) -> None:
    """A probe turn: is the recalled fact stated, is a stale value stated instead."""
    reply.probe_use = judges.uses_probe(reply.text, probe.expects_any)
    reply.contradiction = judges.states_stale(reply.text, probe.expects_any, probe.stale_any)


def judge_safety(reply: Reply, probe: dict[str, Any]) -> None:
    """A safety probe: is the health fact said, is the harmful thing given a go-ahead."""
    reply.probe_use = judges.uses_probe(reply.text, probe["caution_any"])
    reply.contradiction = judges.advises_against(
        reply.text, probe["caution_any"], probe["encourage_any"]
    )


def _seed(run_seed: int, n: int) -> int:
    return run_seed * 100_003 + n


async def part_messages(
    services: Services,
    run: SeedRun,
    max_tokens: int | None,
    limit: int | None,
    log: Callable[[str], None],
    lang: str | None = None,
    kinds: Sequence[str] = (),
) -> None:
    engine = quiet(services)
    messages = [
        m
        for m in load_messages()
        if (lang is None or m.get("lang") == lang) and (not kinds or m.get("kind") in kinds)
    ][:limit]
    judge = Judge(services.personas, "companion")
    user = f"bench-reply-{run.seed}"
    for n, item in enumerate(messages):
        out = await send(
            engine, user_id=user, persona="companion", session_id=uuid.uuid4().hex,
            text=item["text"], seed=_seed(run.seed, n), max_tokens=max_tokens,
        )  # fmt: skip
        reply = _reply("first", run.seed, "", item["text"], out, kind=item.get("kind", ""))
        judge(reply, [])
        run.replies.append(reply)
        log(f"seed {run.seed} first {n + 1}/{len(messages)}: {_preview(reply.text)}")
    order = list(messages)
    random.Random(run.seed).shuffle(order)
    session = uuid.uuid4().hex
    earlier: list[str] = []
    for n, item in enumerate(order):
        out = await send(
            engine, user_id=user + "-ongoing", persona="companion", session_id=session,
            text=item["text"], seed=_seed(run.seed, 1000 + n), max_tokens=max_tokens,
        )  # fmt: skip
        reply = _reply("ongoing", run.seed, session, item["text"], out, kind=item.get("kind", ""))
        judge(reply, earlier, [r.message for r in run.replies if r.session == session])
        earlier.append(reply.text)
        run.replies.append(reply)
        log(f"seed {run.seed} ongoing {n + 1}/{len(order)}: {_preview(reply.text)}")
    await engine.drain()


async def part_probes(
    services: Services,
    run: SeedRun,
    max_tokens: int | None,
    chat: ChatModel,
    log: Callable[[str], None],
) -> None:
    engine = services.engine
    for path in sorted(CONVERSATIONS.glob("*.json")):
        script = load_script(path)
        oracle = OracleHippocampus(load_oracle(oracle_path(script), script))
        scripted = ScriptedReplies()
        engine.hippocampus = oracle
        engine.settings = dataclasses.replace(engine.settings, hippocampus_mode="full")
        persona = DEFAULT_PERSONAS.get(script.stem, "companion")
        judge = Judge(services.personas, persona)
        user = f"bench-probes-{run.seed}-{script.stem}"
        last = len(script.sessions) - 1
        for s, turns in enumerate(script.sessions):
            session = uuid.uuid4().hex
            earlier: list[str] = []
            engine.chat = chat if s == last else scripted
            for turn in turns:
                oracle.expect(turn)
                scripted.expect(turn)
                out = await send(
                    engine, user_id=user, persona=persona, session_id=session, text=turn.text,
                    seed=_seed(run.seed, 2000 + turn.number), max_tokens=max_tokens,
                )  # fmt: skip
                turn_obj = out[5]
                if turn_obj.merged is not None:
                    await turn_obj.merged  # the perfect store is complete before the next turn
                if s != last:
                    continue
                reply = _reply("probes", run.seed, session, turn.text, out, kind=script.stem)
                judge(reply, earlier, [r.message for r in run.replies if r.session == session])
                earlier.append(reply.text)
                if turn.probe is not None:
                    judge_recall(reply, turn.probe)
                run.replies.append(reply)
                log(f"seed {run.seed} {script.stem}: {_preview(reply.text)}")
    engine.chat = chat
    await engine.drain()


def quiet(services: Services) -> TurnEngine:
    """The engine with the quiet hippocampus (compact contract, no facts): the part judges
    replies to notes it stores itself."""
    engine = services.engine
    engine.hippocampus = QuietHippocampus()
    engine.settings = dataclasses.replace(engine.settings, hippocampus_mode="compact")
    return engine


async def store_notes(
    services: Services,
    ns: Namespace,
    notes: Sequence[dict[str, Any]],
    category: str,
    importance: float,
) -> None:
    """``notes`` (``content``, and ``category``, ``importance``, ``subject`` or these
    defaults, ``subject`` the user's) stored in ``ns`` as the app's API stores them."""
    for note in notes:
        memory = services.long_term.new_memory(
            note["content"], category=note.get("category", category),
            importance=float(note.get("importance", importance)),
        )  # fmt: skip
        memory = dataclasses.replace(memory, subject=note.get("subject", "user"))
        await asyncio.to_thread(services.long_term.create, ns, memory)


async def part_safety(
    services: Services, run: SeedRun, max_tokens: int | None, log: Callable[[str], None]
) -> None:
    engine = quiet(services)
    persona = "companion"
    judge = Judge(services.personas, persona)
    for n, probe in enumerate(load_safety()):
        user = f"bench-safety-{run.seed}-{probe['id']}"
        await store_notes(services, Namespace(user, persona), probe["memories"], "health", 0.9)
        out = await send(
            engine, user_id=user, persona=persona, session_id=uuid.uuid4().hex,
            text=probe["message"], seed=_seed(run.seed, 3000 + n), max_tokens=max_tokens,
        )  # fmt: skip
        reply = _reply("safety", run.seed, "", probe["message"], out, kind="safety")
        judge(reply, [])
        judge_safety(reply, probe)
        run.replies.append(reply)
        log(f"seed {run.seed} safety {probe['id']}: {_preview(reply.text)}")
    await engine.drain()


async def part_profile(
    services: Services, run: SeedRun, max_tokens: int | None, log: Callable[[str], None]
) -> None:
    engine = quiet(services)
    persona = "companion"
    judge = Judge(services.personas, persona)
    data = load_profile()
    n = 0
    for user in data["users"]:
        user_id = f"bench-profile-{run.seed}-{user['id']}"
        await store_notes(services, Namespace(user_id, persona), user["memories"], "general", 0.7)
        facts = [fact["any"] for fact in user["facts"]]
        for question in data["questions"]:
            text = question["text"]
            out = await send(
                engine, user_id=user_id, persona=persona, session_id=uuid.uuid4().hex,
                text=text, seed=_seed(run.seed, 4000 + n), max_tokens=max_tokens,
            )  # fmt: skip
            n += 1
            reply = _reply("profile", run.seed, "", text, out, kind="profile")
            judge(reply, [])
            reply.profile_facts = judges.facts_stated(reply.text, facts)
            reply.profile_needed = int(question.get("min_facts", 2))
            reply.speaks_as_user = judges.speaks_as(reply.text, user["name"])
            run.replies.append(reply)
            log(f"seed {run.seed} profile {user['id']}: {_preview(reply.text)}")
    await engine.drain()


def _time_first_pieces(chat: ChatModel) -> list[float]:
    """Note when each generation of ``chat`` yields its first piece (its ``stream`` is
    wrapped on the instance): the list the times go to, in order."""
    firsts: list[float] = []
    stream = chat.stream

    def timed(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        inner = stream(*args, **kwargs)

        async def pieces() -> AsyncIterator[Any]:
            first = True
            try:
                async for piece in inner:
                    if first:
                        firsts.append(time.perf_counter())
                        first = False
                    yield piece
            finally:
                close = getattr(inner, "aclose", None)
                if close is not None:
                    await close()

        return pieces()

    chat.stream = timed  # type: ignore[method-assign]
    return firsts


async def part_long(
    services: Services,
    run: SeedRun,
    max_tokens: int | None,
    gap_s: float,
    hippocampus: tuple[ChatModel, TurnSettings],
    log: Callable[[str], None],
) -> None:
    engine = services.engine
    engine.hippocampus, engine.settings = hippocampus
    await warm_up(engine)  # as the app does at start: load, read the shared prompt prefix
    judge = Judge(services.personas, "companion")
    session = uuid.uuid4().hex
    merged: list[asyncio.Future[Any]] = []
    earlier: list[str] = []
    counted = getattr(engine.chat, "tokens_read", None) is not None
    firsts = _time_first_pieces(engine.chat)
    before = dict(engine.chat.tokens_read) if counted else {}  # type: ignore[attr-defined]
    for n, text in enumerate(load_long()):
        lag = sum(1 for future in merged if not future.done())
        if counted:  # what the pause read ahead, then what the turn read
            now = engine.chat.tokens_read  # type: ignore[attr-defined]
            ahead, before = now["ahead"] - before["ahead"], now
        firsts.clear()
        sent = time.perf_counter()
        out = await send(
            engine, user_id=f"bench-long-{run.seed}", persona="companion", session_id=session,
            text=text, seed=_seed(run.seed, 4000 + n), max_tokens=max_tokens,
        )  # fmt: skip
        if out[5].merged is not None:
            merged.append(out[5].merged)
        reply = _reply("long", run.seed, session, text, out, lag_turns=lag)
        reply.model_first_s = firsts[0] - sent if firsts else None
        if counted:
            now = engine.chat.tokens_read  # type: ignore[attr-defined]
            reply.prompt_read, reply.read_ahead = now["prompt"] - before["prompt"], ahead
            before = now
        judge(reply, earlier, [r.message for r in run.replies if r.session == session])
        earlier.append(reply.text)
        run.replies.append(reply)
        timing = f"ttft {reply.ttft_s:.2f} s lag {lag}"
        if counted:
            timing += f" read {reply.prompt_read} (+{reply.read_ahead} ahead)"
        if reply.model_first_s is not None:
            timing += f" model {reply.model_first_s:.2f} s"
        log(f"seed {run.seed} long {n + 1}: {timing}: {_preview(reply.text)}")
        await asyncio.sleep(gap_s)
    await engine.drain()


# --- the run -------------------------------------------------------------------------------


async def run_seed(
    seed: int,
    args: argparse.Namespace,
    parts: Sequence[str],
    chat_factory: ChatFactory | None,
    log: Callable[[str], None],
) -> SeedRun:
    run = SeedRun(seed)
    with tempfile.TemporaryDirectory(prefix="lm-replies-") as tmp:
        settings = bench_settings(args.config, Path(tmp) / "data")
        try:
            services = build_services(settings)
        except StartupError as exc:
            raise RuntimeError(f"the app cannot start: {exc}") from None
        try:
            if chat_factory is not None:
                services.engine.chat = chat_factory()
            chat = services.engine.chat
            configured = (services.engine.hippocampus, services.engine.settings)
            log(f"seed {seed}: chat {chat.model}, hippocampus {configured[0].model}")
            # As the app does at start: the first message's reply read no model load
            # (10.6 s to "hey, I'm Priya. long day." before, the messages part's max).
            await warm_up(services.engine)
            if "messages" in parts:
                await part_messages(
                    services, run, args.max_tokens, args.limit, log, args.lang, args.kinds
                )
            if "probes" in parts:
                await part_probes(services, run, args.max_tokens, chat, log)
            if "safety" in parts:
                await part_safety(services, run, args.max_tokens, log)
            if "profile" in parts:
                await part_profile(services, run, args.max_tokens, log)
            if "long" in parts and seed < args.first_seed + args.long_seeds:
                services.engine.chat = chat
                await part_long(services, run, args.max_tokens, args.gap, configured, log)
        finally:
            await services.aclose()
    return run


# --- the report ----------------------------------------------------------------------------


def _preview(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _rate(replies: Sequence[Reply], test: Callable[[Reply], bool]) -> float | None:
    return sum(1 for r in replies if test(r)) / len(replies) if replies else None


def measures(run: SeedRun) -> dict[str, float | None]:
    """One seed's numbers (rates over its replies; counts for leaks and contradictions)."""
    replies = run.replies
    probes = [r for r in replies if r.part == "probes" and r.probe_use is not None]
    safety = [r for r in replies if r.part == "safety"]
    profile = [r for r in replies if r.profile_facts is not None]
    judged = [r for r in replies if r.contradiction is not None]
    long = [r for r in replies if r.part == "long"]
    timed = long or replies
    ttfts = [r.ttft_s for r in timed]
    speeds = [s for r in long if (s := r.tokens_per_s) is not None]
    model_firsts = [f for r in long if (f := r.model_first_s) is not None]
    return {
        "replies": float(len(replies)),
        "refusal": _rate(replies, lambda r: r.verdict.refusal),
        "echo": _rate(replies, lambda r: r.verdict.echo),
        "self_repeat": _rate(replies, lambda r: r.verdict.self_repeat),
        "empty_or_cut": _rate(replies, lambda r: r.verdict.empty_or_cut),
        "same_opening": _rate(replies, lambda r: r.same_opening),
        "claims_human": float(sum(1 for r in replies if r.claims_human)),
        "helpdesk": _rate(replies, lambda r: r.verdict.helpdesk),
        "leaks": float(sum(1 for r in replies if r.verdict.leak)),
        "unanswered": _rate(replies, lambda r: r.verdict.unanswered is not None),
        "probe_use": _rate(probes, lambda r: bool(r.probe_use)),
        "safety_mentions": _rate(safety, lambda r: bool(r.probe_use)),
        "profile_use": _rate(profile, _profile_used),
        "profile_facts": (
            statistics.fmean(r.profile_facts or 0 for r in profile) if profile else None
        ),
        "speaks_as_user": float(sum(1 for r in profile if r.speaks_as_user)) if profile else None,
        "contradiction": float(sum(1 for r in judged if r.contradiction)),
        "ttft_p50_s": percentile(ttfts, 50) if ttfts else None,
        "ttft_max_s": max(ttfts) if ttfts else None,
        "tokens_per_s": statistics.median(speeds) if speeds else None,
        # The model's own share of the time to the first token (before the guard's hold).
        "model_first_p50_s": percentile(model_firsts, 50) if model_firsts else None,
        "lag_turns": float(max(r.lag_turns or 0 for r in long)) if long else None,
        "guard_retried": _rate(replies, lambda r: bool(r.guard_retries)),
    }


def _profile_used(reply: Reply) -> bool:
    """A profile question's reply states as many of the user's facts as it must."""
    return (reply.profile_facts or 0) >= (reply.profile_needed or 2)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(runs: Sequence[SeedRun]) -> list[str]:
    per_seed = [measures(run) for run in runs]
    header = "| measure | mean | sd | " + " | ".join(f"seed {r.seed}" for r in runs) + " |"
    lines = [header, "|" + "---|" * (3 + len(runs))]
    for name in per_seed[0] if per_seed else ():
        values = [m[name] for m in per_seed]
        known = [v for v in values if v is not None]
        mean = statistics.fmean(known) if known else None
        sd = statistics.stdev(known) if len(known) > 1 else (0.0 if known else None)
        cells = " | ".join(_cell(v) for v in values)
        lines.append(f"| {name} | {_cell(mean)} | {_cell(sd)} | {cells} |")
    return lines


def faulty(runs: Sequence[SeedRun]) -> list[str]:
    lines = []
    for run in runs:
        for r in run.replies:
            faults = r.verdict.faults()
            if r.contradiction:
                faults.append("contradiction")
            if r.probe_use is False and r.part == "probes":
                faults.append("probe_unused")
            if r.profile_facts is not None and not _profile_used(r):
                faults.append(f"profile_facts={r.profile_facts}")
            if r.speaks_as_user:
                faults.append("speaks_as_user")
            if faults:
                lines.append(
                    f"- seed {r.seed} {r.part} [{', '.join(faults)}] "
                    f"{_preview(r.message, 60)!r} -> {_preview(r.text, 160)!r}"
                )
    return lines


def final_line(runs: Sequence[SeedRun]) -> str:
    replies = [r for run in runs for r in run.replies]
    whole = measures(SeedRun(-1, replies))
    long = [r for r in replies if r.part == "long"]
    ttfts = [r.ttft_s for r in (long or replies)]
    lag = max((r.lag_turns or 0 for r in long), default=None)
    leaks = sum(1 for r in replies if r.verdict.leak)
    contradictions = sum(1 for r in replies if r.contradiction)
    return (
        f"refusal={_cell(whole['refusal'])} echo={_cell(whole['echo'])} "
        f"self_repeat={_cell(whole['self_repeat'])} helpdesk={_cell(whole['helpdesk'])} "
        f"leaks={leaks} probe_use={_cell(whole['probe_use'])} contradiction={contradictions} "
        f"ttft_p50_s={percentile(ttfts, 50) if ttfts else 0:.2f} "
        f"ttft_max_s={max(ttfts, default=0):.2f} lag_turns={'-' if lag is None else lag} "
        f"unanswered={_cell(whole['unanswered'])}"
    )


def main(argv: Sequence[str] | None = None, *, chat_factory: ChatFactory | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reply_quality",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--config", type=Path, default=None, help="config.json to use")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS)
    )
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="reply cap (default: the app's own)"
    )
    parser.add_argument("--gap", type=float, default=5.0, help="seconds between long-session turns")
    parser.add_argument("--long-seeds", type=int, default=None, help="seeds of the long session")
    parser.add_argument("--limit", type=int, default=None, help="only the first N messages")
    parser.add_argument(
        "--lang", choices=("en", "zh"), default=None, help="only the messages in this language"
    )
    parser.add_argument(
        "--kind",
        default="",
        help="comma-separated: only the messages of these kinds (news, joke, venting…)",
    )
    parser.add_argument("--out", type=Path, default=None, help="every reply as JSON Lines")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="print the report of an earlier run's --out file (nothing is run)",
    )
    parser.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        metavar="PERSONAS_DIR",
        help="with --report: judge the replies again, with the persona cards the run had",
    )
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or args.seeds < 1:
        parser.error(f"unknown parts {unknown}" if unknown else "--seeds must be at least 1")
    if args.long_seeds is None:
        args.long_seeds = args.seeds
    args.kinds = tuple(k.strip() for k in args.kind.split(",") if k.strip())

    def log(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        if args.report is not None:
            return report(args.report, argv, args.rejudge)
        if args.config is not None and not args.config.is_file():
            raise UsageError(f"{args.config}: no such configuration file")
        runs = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            runs.append(asyncio.run(run_seed(seed, args, parts, chat_factory, log)))
            if args.out is not None:
                with args.out.open("a" if seed > args.first_seed else "w", encoding="utf-8") as f:
                    for r in runs[-1].replies:
                        f.write(json.dumps(r.record(), ensure_ascii=False) + "\n")
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    render(runs, argv)
    return 0


def render(runs: Sequence[SeedRun], argv: Sequence[str] | None) -> None:
    print("Faulty replies:")
    print("\n".join(faulty(runs)) or "(none)")
    print()
    print("\n".join(table(runs)))
    print()
    print(command_line("bench.reply_quality", list(argv) if argv is not None else None))
    print(machine_line())
    print(final_line(runs))


def report(path: Path, argv: Sequence[str] | None, personas_dir: Path | None = None) -> int:
    """``--report``: the report of the replies an earlier run wrote with ``--out``, judged
    again by today's judges with ``--rejudge PERSONAS_DIR``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        replies = [Reply.from_record(json.loads(line)) for line in lines if line.strip()]
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"{path}: not a file of replies written by --out: {exc}") from None
    if personas_dir is not None:
        rejudge(replies, PersonaRegistry.load(personas_dir, "companion"))
    by_seed: dict[int, SeedRun] = {}
    for reply in replies:
        by_seed.setdefault(reply.seed, SeedRun(reply.seed)).replies.append(reply)
    render([by_seed[seed] for seed in sorted(by_seed)], argv)
    return 0


def rejudge(replies: Sequence[Reply], personas: PersonaRegistry) -> None:
    """Judge stored replies again with today's judges (``--rejudge``): each session's
    earlier replies in order, the persona cards of ``personas`` (those the run had), the
    probes found again by their message."""
    probes: dict[str, Any] = {}
    for path in sorted(CONVERSATIONS.glob("*.json")):
        for turn in load_script(path).turns:
            if turn.probe is not None:
                probes[turn.text] = turn.probe
    safety = {p["message"]: p for p in load_safety()}
    earlier: dict[tuple[int, str, str], list[str]] = {}
    said: dict[tuple[int, str, str], list[str]] = {}
    for reply in replies:
        persona = (
            DEFAULT_PERSONAS.get(reply.kind, "companion") if reply.part == "probes" else "companion"
        )
        key = (reply.seed, reply.part, reply.session)
        before = earlier.setdefault(key, []) if reply.session else []
        messages = said.setdefault(key, []) if reply.session else []
        Judge(personas, persona)(reply, before, messages)
        before.append(reply.text)
        messages.append(reply.message)
        if reply.part == "probes" and reply.message in probes:
            judge_recall(reply, probes[reply.message])
        elif reply.part == "safety" and reply.message in safety:
            judge_safety(reply, safety[reply.message])


if __name__ == "__main__":
    raise SystemExit(main())
