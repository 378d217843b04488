"""The hippocampus down for many turns, then back: what the session state looks like.

    python -m bench.hippocampus_outage [--before 3] [--outage 30] [--after 3]

The real app runs as its own process (``tests/web/app_process.AppProcess``: embedded
Chroma and the local MiniLM embedder in a temp data dir, SQLite sessions) with scripted
OpenAI-compatible upstreams on loopback. One session, one turn after the other:

- ``--before`` turns with a working hippocampus;
- ``--outage`` turns where it fails: HTTP 500 and unparseable text (``garbage``) in
  turn, with ``max_retries: 0`` so that each failure is one request;
- ``--after`` turns with it back.

Every user message names a topic (``topic-NN``) and is about 100 estimated tokens; the
chat reply is fixed. The working hippocampus is scripted to do its job on what it is
shown: its background lists every topic in its prompt (the old background, the
short-term items, the new message), it compresses short-term to one note, and it
proposes one long-term fact about the newest topic.

Measured per turn, from what the app stores and sends: the reply (unaffected?), the
turn report's hippocampus status, the short-term tokens after the merge
(``backend.hippocampus.budget.short_term_tokens``, the quantity the budget bounds), the
tokens of the chat prompt the upstream received (``estimate_tokens`` of every message
plus 4 per message), the background (how many topics it names: the turns trimmed during
the outage reach it through the catch-up, a few per turn) and the memories written.
"Turns to recover" counts
the turns after the hippocampus is back until background, short-term and long-term are
all healthy again (background names the newest topic, short-term under half the
budget, a memory written). No wall-clock numbers: nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.hippocampus.budget import ITEM_OVERHEAD_TOKENS, estimate_tokens, short_term_tokens
from backend.hippocampus.state import ShortTermItem
from bench._rig import command_line, machine_line
from tests.llm.scripted_server import RecordedRequest, Reply, ScriptedOpenAIServer
from tests.web.app_process import AppProcess

TOPIC = re.compile(r"topic-\d{2}")
BUDGET = 1500  # the default memory.short_term_token_budget
FILLER = (
    "I have been thinking about it on the way home and again this morning, and I would "
    "like to talk it through properly with you, because it keeps coming back to me and "
    "I am not sure what I should do about it yet. "
)


class ScriptedHippocampus(ScriptedOpenAIServer):
    """Fails while ``down`` (500 and garbage in turn); otherwise answers from its prompt."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self._failures = 0
        self._local = threading.local()

    def _record(self, request: RecordedRequest) -> None:
        super()._record(request)
        self._local.request = request

    def _next_reply(self) -> Reply:
        if self.down:
            self._failures += 1
            if self._failures % 2:
                return Reply.error(500, "hippocampus down")
            return Reply(chunks=["I am sorry, ", "I cannot produce JSON today."])
        request: RecordedRequest | None = getattr(self._local, "request", None)
        text = request.raw_body.decode("utf-8", "replace") if request else ""
        topics = sorted(set(TOPIC.findall(text)))
        newest = topics[-1] if topics else "nothing"
        answer = {
            "background": "The user has talked about " + ", ".join(topics) + ".",
            "short_term": [{"role": "note", "text": f"The user went over {len(topics)} topics."}],
            "long_term": [
                {"content": f"The user cares about {newest}", "category": "interest",
                 "importance": 0.7, "confidence": 0.9, "subject": "user"}
            ],
            "user_emotion": {"label": "calm", "intensity": 0.4},
        }  # fmt: skip
        return Reply(chunks=[json.dumps(answer)])


@dataclass
class TurnRow:
    index: int
    phase: str
    topic: str
    reply_ok: bool = False
    hippocampus: str | None = None
    short_term_tokens: int = 0  # the stored short-term after this turn's merge
    prompt_tokens: int = 0  # the whole chat prompt of this turn
    prompt_short_term_tokens: int = 0  # its short-term part (the state before this turn)
    background_topics: int = 0
    background_has_newest: bool = False
    written: int = 0
    errors: list[str] = field(default_factory=list)


def prompt_tokens(request: RecordedRequest, *, short_term_only: bool = False) -> int:
    """Estimated tokens of the chat prompt; ``short_term_only``: of the messages carrying
    short-term (every non-system message but the last, which is the new user message)."""
    messages = request.body.get("messages", []) if isinstance(request.body, dict) else []
    if short_term_only:
        messages = [m for m in messages[:-1] if m.get("role") != "system"]
    return sum(
        estimate_tokens(str(m.get("content") or "")) + ITEM_OVERHEAD_TOKENS for m in messages
    )


def run(before: int, outage: int, after: int) -> dict[str, Any]:
    rows: list[TurnRow] = []
    with (
        tempfile.TemporaryDirectory(prefix="lm-hippo-") as tmp,
        ScriptedOpenAIServer() as chat,
        ScriptedHippocampus() as hippocampus,
    ):
        extra = {
            # The scripted chat says the same thing every turn: the reply guard would take
            # it for a loop and sample again; this bench is about the hippocampus.
            "chat": {"reply_guard": False},
            "hippocampus": {"max_retries": 0},
            "memory": {"short_term_token_budget": BUDGET},
        }
        app = AppProcess(Path(tmp), chat.base_url, hippocampus.base_url, extra=extra)
        app.start()
        try:
            session: str | None = None
            phases = ["before"] * before + ["outage"] * outage + ["after"] * after
            for index, phase in enumerate(phases, start=1):
                hippocampus.down = phase == "outage"
                topic = f"topic-{index:02d}"
                row = TurnRow(index, phase, topic)
                try:
                    session, report = app.turn(session, f"About {topic}: {FILLER * 2}")
                    row.reply_ok = True  # AppProcess.turn checked the status and the text
                    row.hippocampus = report["hippocampus"]["status"]
                    row.written = len(report["written"])
                    detail = app.client.get(f"/api/sessions/{session}").json()
                    items = [ShortTermItem.from_dict(i) for i in detail["short_term"]]
                    row.short_term_tokens = short_term_tokens(items)
                    background = detail["background"] or ""
                    row.background_topics = len(set(TOPIC.findall(background)))
                    row.background_has_newest = topic in background
                    request = chat.chat_requests[-1]
                    row.prompt_tokens = prompt_tokens(request)
                    row.prompt_short_term_tokens = prompt_tokens(request, short_term_only=True)
                except Exception as exc:  # counted: a bench reports, it does not stop
                    row.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                rows.append(row)
        finally:
            app.stop()
            app.client.close()
    return summarise(rows, before, outage)


def summarise(rows: list[TurnRow], before: int, outage: int) -> dict[str, Any]:
    down = [r for r in rows if r.phase == "outage"]
    back = [r for r in rows if r.phase == "after"]
    recovered_at = next(
        (
            i
            for i, r in enumerate(back, start=1)
            if r.hippocampus == "ok"
            and r.background_has_newest
            and r.short_term_tokens <= BUDGET // 2
            and r.written > 0
        ),
        None,
    )
    last_before = rows[before - 1] if before else None
    return {
        "rows": rows,
        "turns": len(rows),
        "before": before,
        "outage_turns": len(down),
        "after": len(back),
        "errors": sum(len(r.errors) for r in rows),
        "replies_ok": sum(r.reply_ok for r in rows),
        "outage_statuses": sorted({str(r.hippocampus) for r in down}),
        "budget": BUDGET,
        "max_short_term_outage": max((r.short_term_tokens for r in down), default=0),
        "max_prompt_outage": max((r.prompt_tokens for r in down), default=0),
        "max_prompt_short_term_outage": max((r.prompt_short_term_tokens for r in down), default=0),
        "topics_seen_after": back[0].index if back else None,
        "prompt_before": last_before.prompt_tokens if last_before else None,
        "written_outage": sum(r.written for r in down),
        "turns_to_recover": recovered_at,
        "background_topics_after": back[0].background_topics if back else None,
        "first_turn_after": back[0] if back else None,
        "back_rows": back,
    }


def table(r: dict[str, Any]) -> str:
    first = r["first_turn_after"]
    rows = [
        ("turns (before / outage / after)", f"{r['before']} / {r['outage_turns']} / {r['after']}"),
        ("replies as scripted", f"{r['replies_ok']} / {r['turns']}"),
        ("errors", str(r["errors"])),
        ("hippocampus status in the outage reports", ", ".join(r["outage_statuses"])),
        ("short-term budget", f"{r['budget']} tokens"),
        ("max short-term during the outage", f"{r['max_short_term_outage']} tokens"),
        ("max chat prompt during the outage", f"{r['max_prompt_outage']} tokens"),
        (
            "max short-term part of a chat prompt during the outage",
            f"{r['max_prompt_short_term_outage']} tokens",
        ),
        ("chat prompt on the last turn before", f"{r['prompt_before']} tokens"),
        ("memories written during the outage", str(r["written_outage"])),
        ("turns to recover (hippocampus back)", str(r["turns_to_recover"])),
        (
            "first turn back: short-term / topics in background / topics so far",
            "-"
            if first is None
            else f"{first.short_term_tokens} tokens / {first.background_topics} / "
            f"{r['topics_seen_after']}",
        ),
        (
            "topics in background, turn by turn back (catch-up on missed turns)",
            " / ".join(str(row.background_topics) for row in r["back_rows"]) or "-",
        ),
    ]
    lines = ["| metric | value |", "|---|---:|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.hippocampus_outage", description=__doc__)
    parser.add_argument("--before", type=int, default=3, choices=range(0, 21), metavar="N")
    parser.add_argument("--outage", type=int, default=30, choices=range(1, 101), metavar="N")
    parser.add_argument("--after", type=int, default=3, choices=range(1, 21), metavar="N")
    args = parser.parse_args(argv)
    result = run(args.before, args.outage, args.after)
    print(table(result))
    print()
    print(command_line("bench.hippocampus_outage", argv))
    print(machine_line())
    for row in result["rows"]:
        for error in row.errors:
            print(f"error: turn {row.index}: {error}")
    return result


if __name__ == "__main__":
    outcome = main()
    sys.exit(0 if outcome["errors"] == 0 and outcome["turns_to_recover"] else 1)
