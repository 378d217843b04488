"""Prompt size per turn over a long scripted conversation, against resending the full history.

    python -m bench.prompt_size [--turns 200] [--plot docs/prompt_size.png] [--yscale log]

Runs ``--turns`` turns of one session through the app's wiring (``build_services``:
session store and outbox in a temp dir, long-term memory on the in-memory vector store
with the local MiniLM embedder, the default persona, the default short-term token budget
from ``MemorySettings``). The
chat model is a ``FakeChatModel`` scripted with varied replies of realistic length (two
to five sentences); user messages are varied too, about one in five states a fact worth
remembering. Two runs over the same conversation:

- **hippocampus**: a ``FakeChatModel`` hippocampus scripted, before each turn, with a
  plausible compressing result computed from the session's current state: the previous
  turn stays verbatim, older items shrink to their first sentence (at most 60
  characters), items beyond the newest 12 are dropped and folded, as topics, into a
  background of bounded size that is rewritten each turn; stated facts go to long-term;
- **fallback**: the hippocampus always fails, so the deterministic fallback (keep
  everything, trim the oldest items to the budget) bounds the prompt.

For each turn: the estimated tokens of the messages the main model received
(``chat.calls[-1].messages``), against resending the full history (the persona's system
prompt, every previous user and assistant message, the new message). Tokens are
``backend.hippocampus.estimate_tokens`` of each message's content plus
``ITEM_OVERHEAD_TOKENS`` per message, for both. Prints a Markdown table at a few turns and
writes a PNG plot of the curves (matplotlib; skipped with a message when it is missing).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.clock import FixedClock
from backend.config import MemorySettings
from backend.embeddings.port import Embedder
from backend.engine.services import build_services
from backend.engine.turn import TurnRequest
from backend.hippocampus import (
    ITEM_OVERHEAD_TOKENS,
    SessionMemoryState,
    estimate_tokens,
)
from backend.hippocampus.schema import BACKGROUND_MAX_CHARS, ITEM_MAX_CHARS
from backend.llm.fake import FakeChatModel
from backend.llm.port import LLMUnavailable
from backend.memory.keywords import extract_keywords
from backend.stores.in_memory import InMemoryVectorStore
from bench._rig import (
    FEELINGS,
    REPO,
    TextMaker,
    UserLine,
    command_line,
    machine_line,
    split_chunks,
)
from tests.engine.wiring import fake_settings

USER = "bench-user"
SEED = 20260502
CHECKPOINTS = (1, 10, 25, 50, 100, 150, 200)
DEFAULT_PLOT = REPO / "docs" / "prompt_size.png"

# The scripted hippocampus's compression gradient.
KEEP_VERBATIM = 2  # the previous turn (user message and reply)
MAX_ITEMS = 12
COMPRESSED_CHARS = 60
BACKGROUND_TOPICS = 24
BACKGROUND_PREFIX = "Earlier in this conversation the user talked about: "


def message_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Estimated prompt tokens: each content's estimate plus the per-message overhead."""
    return sum(
        estimate_tokens(str(m.get("content") or "")) + ITEM_OVERHEAD_TOKENS for m in messages
    )


def first_sentence(text: str, limit: int = COMPRESSED_CHARS) -> str:
    found = re.match(r"(.+?[.!?])(\s|$)", text.strip())
    sentence = found.group(1) if found else text.strip()
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def _topic(text: str) -> str:
    return " ".join(extract_keywords(text)[:3]) or first_sentence(text, 30)


def compressing_result(state: SessionMemoryState, line: UserLine, turn_no: int) -> dict[str, Any]:
    """What a well-behaved hippocampus could answer for ``state`` and the new message."""
    items = list(state.short_term)
    rewritten = [
        {
            "role": item.role,
            "text": (item.text if len(items) - i <= KEEP_VERBATIM else first_sentence(item.text))[
                :ITEM_MAX_CHARS
            ],
        }
        for i, item in enumerate(items)
    ]
    dropped, kept = rewritten[:-MAX_ITEMS], rewritten[-MAX_ITEMS:]
    topics = []
    if state.background.startswith(BACKGROUND_PREFIX):
        topics = [
            t for t in state.background[len(BACKGROUND_PREFIX) :].rstrip(".").split("; ") if t
        ]
    topics += [_topic(item["text"]) for item in dropped if item["role"] == "user"]
    topics = topics[-BACKGROUND_TOPICS:]
    background = (BACKGROUND_PREFIX + "; ".join(topics) + ".") if topics else state.background
    long_term = []
    if line.fact:
        long_term.append({
            "content": line.fact, "category": line.category, "importance": 0.7,
            "confidence": 0.9, "subject": "user", "keywords": list(line.keywords),
        })  # fmt: skip
    return {
        "background": background[:BACKGROUND_MAX_CHARS],
        "short_term": kept,
        "long_term": long_term,
        "user_emotion": {"label": FEELINGS[turn_no % len(FEELINGS)], "intensity": 0.5},
    }


@dataclass
class Curve:
    label: str
    tokens: list[int]
    short_term: list[int]
    hippocampus_failures: int = 0


async def conversation(
    turns: int, *, fail: bool, seed: int, embedder: Embedder, tmp: Path
) -> tuple[Curve, list[int], int]:
    """(our curve, the full-history curve, the persona prompt's tokens)."""
    ids = itertools.count(1)  # deterministic memory ids: ties break the same every run
    clock = FixedClock(datetime(2026, 5, 1, 20, 0, tzinfo=UTC))
    chat = FakeChatModel("bench-chat")
    hippocampus = FakeChatModel("bench-hippocampus")
    # The app's wiring (default memory settings, the repository's personas, the outbox)
    # with the scripted models, the in-memory vector store and the given embedder.
    services = build_services(
        # Scripted replies are drawn from a few openers (TextMaker): the reply guard would
        # take a drawn-again opener for a repeat and ask for another reply.
        fake_settings(
            tmp / ("fallback" if fail else "hippocampus"),
            chat={"reply_guard": False},
            hippocampus={"timeout": 10.0},
        ),
        clock=clock,
        command="bench",
        chat=chat,
        hippocampus=hippocampus,
        embedder=embedder,
        store=InMemoryVectorStore(),
        memory_ids=lambda: f"m{next(ids):05d}",
    )
    engine, sessions, personas = services.engine, services.sessions, services.personas
    system = personas.default.system_prompt
    maker = TextMaker(seed)
    curve = Curve("ours, fallback" if fail else "ours, hippocampus", [], [])
    full: list[int] = []
    history: list[dict[str, Any]] = []
    session_id: str | None = None
    try:
        for turn_no in range(1, turns + 1):
            line, reply = maker.user_line(), maker.reply()
            chat.enqueue(split_chunks(reply, 12))
            if fail:
                hippocampus.enqueue([LLMUnavailable("scripted outage", model=hippocampus.model)])
            else:
                raw = sessions.load_state(session_id) if session_id else None
                state = (
                    SessionMemoryState()
                    if raw is None
                    else SessionMemoryState.from_dict(
                        {
                            "background": raw.background,
                            "short_term": list(raw.short_term),
                            "user_emotion": raw.user_emotion,
                        }
                    )
                )
                hippocampus.enqueue([json.dumps(compressing_result(state, line, turn_no))])
            turn, report = await engine.run(
                TurnRequest(user_id=USER, text=line.text, session_id=session_id)
            )
            session_id = turn.session.id
            curve.hippocampus_failures += report["hippocampus"]["status"] != "ok"
            curve.tokens.append(message_tokens(chat.calls[-1].messages))
            after = sessions.load_state(session_id)
            curve.short_term.append(
                sum(estimate_tokens(i["text"]) + ITEM_OVERHEAD_TOKENS for i in after.short_term)
            )
            new = {"role": "user", "content": line.text}
            full.append(message_tokens([{"role": "system", "content": system}, *history, new]))
            history += [new, {"role": "assistant", "content": reply}]
            clock.advance(minutes=3)
    finally:
        await services.aclose()
    return curve, full, message_tokens([{"role": "system", "content": system}])


def plot(
    path: Path, curves: Sequence[Curve], full: list[int], ceiling: int, budget: int, yscale: str
) -> str:
    """Write the PNG; the line to print about it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"matplotlib is not installed: plot skipped (pip install matplotlib to write {path})"
    x = list(range(1, len(full) + 1))
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    ax.plot(x, full, label="resend the full history", color="tab:red")
    colours = ("tab:blue", "tab:green")
    for curve, colour in zip(curves, colours, strict=False):
        ax.plot(x, curve.tokens, label=curve.label, color=colour)
    ax.axhline(
        ceiling, color="grey", linestyle="--",
        label=f"persona prompt + short-term budget ({budget} tokens)",
    )  # fmt: skip
    ax.set_yscale(yscale)
    ax.set_xlabel("turn")
    ax.set_ylabel("estimated prompt tokens (main model)")
    ax.set_title("Prompt size per turn")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", bbox_to_anchor=(0.99, 0.42))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return f"plot: {path}"


async def run(args: argparse.Namespace) -> list[str]:
    from backend.embeddings.local_minilm import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder()
    budget = MemorySettings().short_term_token_budget
    with tempfile.TemporaryDirectory(prefix="bench-prompt-") as tmp:
        ours, full, persona_tokens = await conversation(
            args.turns, fail=False, seed=args.seed, embedder=embedder, tmp=Path(tmp)
        )
        fallback, _, _ = await conversation(
            args.turns, fail=True, seed=args.seed, embedder=embedder, tmp=Path(tmp)
        )
    marks = [t for t in CHECKPOINTS if t < args.turns] + [args.turns]
    lines = [
        command_line("bench.prompt_size", args.argv),
        machine_line(),
        f"{args.turns} turns, short-term budget {budget} tokens, persona prompt "
        f"{persona_tokens} tokens; hippocampus failures: {ours.hippocampus_failures} "
        f"(hippocampus run), {fallback.hippocampus_failures} (fallback run)",
        "",
        "| turn | ours, hippocampus | ours, fallback | full history | full ÷ ours | "
        "short-term, hippocampus | short-term, fallback |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in marks:
        i = t - 1
        lines.append(
            f"| {t} | {ours.tokens[i]} | {fallback.tokens[i]} | {full[i]} | "
            f"{full[i] / ours.tokens[i]:.1f} | {ours.short_term[i]} | {fallback.short_term[i]} |"
        )
    lines += [
        "",
        f"Max over all turns: ours {max(ours.tokens)} (hippocampus), {max(fallback.tokens)} "
        f"(fallback); short-term never above {max(ours.short_term)} / "
        f"{max(fallback.short_term)} (budget {budget}). Tokens are estimates "
        "(`estimate_tokens` + 4 per message); short-term is the state after each turn.",
    ]
    if args.plot:
        lines.append(
            plot(
                Path(args.plot),
                [ours, fallback],
                full,
                persona_tokens + budget,
                budget,
                args.yscale,
            )
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--plot", default=str(DEFAULT_PLOT), help="PNG path; empty: no plot")
    parser.add_argument("--yscale", choices=("log", "linear"), default="log")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    args.argv = argv
    args.turns = max(1, args.turns)
    print("\n".join(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
