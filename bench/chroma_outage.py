"""A Chroma server down and back under the real app: what is answered, queued and lost.

    python -m bench.chroma_outage [--turns 5] [--outage-s 20] [--hang]

The app runs as its own process (``tests/web/app_process.AppProcess``) with
``storage.chroma_url`` pointing at a real ``chroma run`` server on loopback, the local
MiniLM embedder and scripted upstreams; each turn's hippocampus proposes one distinct
fact. One turn with the server up, then the server is stopped (connections refused)
and ``--turns`` turns are sent; after ``--outage-s`` seconds in all the server is
started again on the same port and data directory (``--hang``: the server is paused
with SIGSTOP instead, a hung server whose socket still accepts connections, and
resumed with SIGCONT), and the bench waits until
``/healthz`` reports the store up with nothing queued. Then it counts the memories:
every fact proposed should be stored exactly once.

Reported: turns answered while down, the response time of a non-streaming turn (the
scripted chat answers at once) before and the slowest during the outage, the writes
queued, the seconds from the server answering again until the queue had drained (the
replay loop backs off up to 5 s between attempts, so this depends on where in its
back-off the server returned), memories lost and duplicated. Everything stays on
loopback; every wait is bounded.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._rig import command_line, machine_line
from tests.llm.scripted_server import ScriptedOpenAIServer
from tests.web.app_process import AppProcess, ChromaServer, hippocampus_reply

# Varied enough that the save gate keeps each one (no two are near-duplicates).
FACTS = (
    "The user's sister Mei lives in Osaka",
    "The user works night shifts as a nurse",
    "The user is learning to play the cello",
    "The user's dog is called Biscuit",
    "The user is allergic to peanuts",
    "The user is training for a half marathon in May",
    "The user grew up on a farm near Lyon",
    "The user hates crowded trains",
    "The user's best friend Tom is getting married in June",
    "The user bakes sourdough bread every Sunday",
    "The user is afraid of flying",
    "The user collects old jazz records",
)


def fact(index: int) -> str:
    return FACTS[index]


def run(turns: int, outage_s: float, hang: bool = False) -> dict[str, Any]:
    proposed: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="lm-chroma-outage-") as tmp,
        ScriptedOpenAIServer() as chat,
        ScriptedOpenAIServer() as hippocampus,
    ):
        root = Path(tmp)
        chroma = ChromaServer(root)
        chroma.start()
        storage = {"data_dir": str(root / "data"), "chroma_url": chroma.url}
        app = AppProcess(root, chat.base_url, hippocampus.base_url, storage)
        app.start()
        try:

            def turn(session: str | None, index: int) -> tuple[str, dict[str, Any], float]:
                proposed.append(fact(index))
                hippocampus.enqueue(hippocampus_reply(fact(index)))
                text = f"Something about me, number {index}."
                started = time.perf_counter()
                r = app.client.post(
                    "/v1/chat/completions",
                    headers={"X-Session-Id": session} if session else {},
                    json={"model": "companion", "messages": [{"role": "user", "content": text}]},
                )
                took = time.perf_counter() - started
                if r.status_code != 200:
                    raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
                session = r.headers["x-session-id"]
                report = app.wait(lambda: app._reports_with(session, text))
                return session, report, took

            session, _report, before_s = turn(None, 0)
            if hang:
                chroma.pause()
            else:
                chroma.stop()
            down_at = time.monotonic()
            during: list[float] = []  # response times of the turns while down, in order
            queued = answered = 0
            for index in range(1, turns + 1):
                session, report, took = turn(session, index)
                answered += 1
                queued += len(report["queued"])
                during.append(took)
            health_down = app.health()
            time.sleep(max(0.0, outage_s - (time.monotonic() - down_at)))
            if hang:
                chroma.resume()
            else:
                chroma.start()
            back_at = time.monotonic()
            app.wait(lambda: app.health()["dependencies"]["vector_store"].get("queued") == 0
                     and app.health()["dependencies"]["vector_store"]["ok"])  # fmt: skip
            drained_s = time.monotonic() - back_at
            stored = app.memories()
        finally:
            app.stop()
            app.client.close()
            chroma.stop()
    return {
        "mode": "hung (SIGSTOP)" if hang else "down (stopped)",
        "turns": turns,
        "answered": answered,
        "before_s": before_s,
        "max_during_s": max(during),
        "during_s": during,
        "queued": queued,
        "health_down": health_down["status"],
        "store_ok_down": health_down["dependencies"]["vector_store"]["ok"],
        "outage_s": back_at - down_at,
        "drained_s": drained_s,
        "proposed": len(proposed),
        "lost": len(set(proposed) - set(stored)),
        "duplicated": len(stored) - len(set(stored)),
        "stored": len(stored),
    }


def table(r: dict[str, Any]) -> str:
    rows = [
        ("server", r["mode"]),
        ("turns while down: answered / sent", f"{r['answered']} / {r['turns']}"),
        (
            "response time (non-streaming) before / slowest while down",
            f"{r['before_s'] * 1e3:.0f} ms / {r['max_during_s'] * 1e3:.0f} ms",
        ),
        ("each response while down", " / ".join(f"{t * 1e3:.0f}" for t in r["during_s"]) + " ms"),
        ("/healthz while down", f"{r['health_down']} (vector_store ok: {r['store_ok_down']})"),
        ("writes queued", str(r["queued"])),
        ("outage length", f"{r['outage_s']:.1f} s"),
        ("queue drained after the server answered", f"{r['drained_s']:.1f} s"),
        ("facts proposed / memories stored", f"{r['proposed']} / {r['stored']}"),
        ("lost / duplicated", f"{r['lost']} / {r['duplicated']}"),
    ]
    lines = ["| metric | value |", "|---|---:|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.chroma_outage", description=__doc__)
    parser.add_argument("--turns", type=int, default=5, choices=range(1, len(FACTS)), metavar="N")
    parser.add_argument("--outage-s", type=float, default=20.0)
    parser.add_argument(
        "--hang", action="store_true", help="SIGSTOP the server (hung) instead of stopping it"
    )
    args = parser.parse_args(argv)
    result = run(args.turns, min(max(args.outage_s, 0.0), 300.0), args.hang)
    print(table(result))
    print()
    print(command_line("bench.chroma_outage", argv))
    print(machine_line())
    return result


if __name__ == "__main__":
    outcome = main()
    sys.exit(0 if outcome["lost"] == 0 and outcome["duplicated"] == 0 else 1)
