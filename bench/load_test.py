"""Load test: many concurrent sessions against the whole app, on loopback only.

    python -m bench.load_test [--sessions 50] [--turns 10] [--ttft-ms 100]
                              [--hippo-ms 50] [--timeout-s 300]
                              [--store memory|chroma] [--embedder bow|minilm]

The app runs in this process (``tests/web/harness.AppHarness``: uvicorn on a loopback
port in a thread, SQLite session store in a temp dir) with scripted OpenAI-compatible
upstreams for the chat and hippocampus roles. The long-term store and the embedder are
``--store memory`` (the in-memory reference store, the default) or ``--store chroma``
(``ChromaVectorStore.persistent`` in the temp dir, what the app uses by default), and
``--embedder bow`` (a bag-of-words test embedder, the default) or ``--embedder minilm``
(the local MiniLM ONNX model the app uses by default).
``--sessions`` clients (asyncio + ``httpx.AsyncClient``) run at once; each is its own
user (one API key per session, so one memory namespace per session) and sends
``--turns`` streaming ``POST /v1/chat/completions`` one after the other in one session.

Isolation, made checkable. Each session's user messages carry a unique marker
(``zqx`` + 3 digits + 6 hex). The scripted upstreams *echo* (a subclass of
``ScriptedOpenAIServer`` that builds each reply from the request it answers): the chat
reply names every marker found anywhere in its prompt (persona prompt, recalled
memories, short-term, history, the new message), and the hippocampus stores one
long-term fact and a background naming every marker found in its prompt. So a leak at
any point (a prompt built from another session's transcript, another namespace's
memories recalled, a merge applied to the wrong session) puts a foreign marker into
what is stored. After the run, with each user's own key over the REST API:

- ``GET /api/sessions``: exactly one session, the one the client was given;
- ``GET /api/sessions/{id}``: the whole JSON (transcript, background, short-term,
  turn reports) holds only the session's own marker, ``2 x turns`` messages and
  ``turns`` reports;
- ``GET /api/personas/companion/memories``: at least one memory, and only the own
  marker in the whole page;
- another user's key on that session: 404;

and every chat and hippocampus request the upstreams recorded holds exactly one marker.

Timing. TTFT is client-side: from sending the request to the first SSE chunk with
non-empty content. The chat upstream waits ``--ttft-ms`` before its first chunk (then
three more chunks 5 ms apart), so overhead = TTFT - ``--ttft-ms``: the app's work
(auth, session, activation, prompt) plus loopback HTTP to and from the upstream and
waiting for the interpreter lock under load (the upstreams and the clients share this
process with the app, so this is an upper bound). Throughput = turns completed / wall
time of the load phase. Memory: ``VmRSS`` / ``VmHWM`` of this process from
``/proc/self/status`` (app, upstreams and clients together: an upper bound on the app).

Exits 1 when there was an error or the isolation check failed. Nothing here leaves the
loopback interface; every wait is bounded (``--timeout-s`` for the whole load phase,
30 s per request).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import secrets
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench._rig import command_line, machine_line, percentile
from tests.llm.scripted_server import RecordedRequest, Reply, ScriptedOpenAIServer
from tests.web.harness import AppHarness

MARKER = re.compile(r"zqx\d{3}[0-9a-f]{6}")
PERSONA = "companion"
REQUEST_TIMEOUT_S = 30.0
LISTEN_BACKLOG = 512


class EchoServer(ScriptedOpenAIServer):
    """A scripted server whose reply is built from the request it answers.

    The handler records a request and then takes its reply in the same thread, so the
    request is kept in a thread-local between the two calls. The listen backlog is
    raised from ``socketserver``'s 5: with dozens of sessions connecting at once, the
    kernel would otherwise reset connections (a limit of this test server, not the app).
    """

    def __init__(self, build: Any) -> None:
        super().__init__()
        self._httpd.socket.listen(LISTEN_BACKLOG)
        self._build = build
        self._local = threading.local()

    def _record(self, request: RecordedRequest) -> None:
        super()._record(request)
        self._local.request = request

    def _next_reply(self) -> Reply:
        request: RecordedRequest | None = getattr(self._local, "request", None)
        return self._build(request)


def markers_in(text: str) -> set[str]:
    return set(MARKER.findall(text))


def _request_markers(request: RecordedRequest | None) -> list[str]:
    return sorted(markers_in(request.raw_body.decode("utf-8", "replace"))) if request else []


def chat_reply(ttft_s: float) -> Any:
    def build(request: RecordedRequest | None) -> Reply:
        named = " ".join(_request_markers(request)) or "nothing"
        chunks = ["Noted", f": {named}", " - I will", " remember."]
        return Reply(chunks=chunks, first_token_delay_s=ttft_s, chunk_delay_s=0.005)

    return build


def hippocampus_reply(delay_s: float) -> Any:
    def build(request: RecordedRequest | None) -> Reply:
        named = _request_markers(request)
        text = " ".join(named) or "nothing"
        fact = {
            "content": f"The user's code word is {text}",
            "category": "personal_fact",
            "importance": 0.9,
            "confidence": 0.9,
            "subject": "user",
            "keywords": named[:3] or ["code"],
        }
        answer = {
            "background": f"The user keeps repeating the code word {text}",
            "short_term": [],
            "long_term": [fact] if named else [],
            "user_emotion": None,
        }
        return Reply(chunks=[json.dumps(answer)], first_token_delay_s=delay_s)

    return build


def memory_kib() -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` in KiB (``ru_maxrss`` for the peak where /proc is absent)."""
    found: dict[str, int] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
    except OSError:
        pass
    found.setdefault("VmHWM", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    found.setdefault("VmRSS", -1)
    return found


@dataclass
class SessionResult:
    index: int
    user: str
    key: str
    marker: str
    session_id: str | None = None
    ttft_s: list[float] = field(default_factory=list)
    turns_done: int = 0
    errors: list[str] = field(default_factory=list)


async def _turn(client: httpx.AsyncClient, s: SessionResult, turn: int) -> None:
    text = f"Turn {turn}: my code word is {s.marker}. Please remember it."
    headers = {"Authorization": f"Bearer {s.key}"}
    if s.session_id:
        headers["X-Session-Id"] = s.session_id
    body = {
        "model": PERSONA,
        "messages": [{"role": "user", "content": text}],
        "stream": True,
    }
    started = time.perf_counter()
    first: float | None = None
    done = False
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        if r.status_code != 200:
            await r.aread()
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
        s.session_id = s.session_id or r.headers.get("x-session-id")
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(f"SSE error event: {event['error']}")
            choices = event.get("choices") or []
            if first is None and choices and choices[0].get("delta", {}).get("content"):
                first = time.perf_counter()
    if not done:
        raise RuntimeError("the stream ended without [DONE]")
    if first is None:
        raise RuntimeError("no content chunk")
    s.ttft_s.append(first - started)
    s.turns_done += 1


async def _session(client: httpx.AsyncClient, s: SessionResult, turns: int) -> None:
    for turn in range(1, turns + 1):
        try:
            await _turn(client, s, turn)
        except Exception as exc:  # counted, and the session stops: later turns would pile up
            s.errors.append(f"turn {turn}: {type(exc).__name__}: {exc}")
            return


async def _load(base_url: str, results: list[SessionResult], turns: int, timeout_s: float) -> None:
    limits = httpx.Limits(max_connections=len(results) + 10, max_keepalive_connections=None)
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as client:
        tasks = [asyncio.create_task(_session(client, s, turns)) for s in results]
        _done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    for s, task in zip(results, tasks, strict=True):
        if task in pending:
            s.errors.append(f"cancelled by the {timeout_s:g} s global timeout")


def _wait_for_merges(h: AppHarness, results: list[SessionResult], turns: int) -> None:
    """Each session's last merge runs after its reply; wait (bounded) until all are stored."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(
            s.session_id is None or len(h.services.sessions.turn_reports(s.session_id)) >= turns
            for s in results
        ):
            return
        time.sleep(0.05)


def check_isolation(
    h: AppHarness, results: list[SessionResult], turns: int
) -> tuple[bool, list[str]]:
    """The checks of the module docstring; returns (passed, problems)."""
    problems: list[str] = []
    with httpx.Client(base_url=h.base_url, timeout=REQUEST_TIMEOUT_S) as api:
        for s in results:
            own = {s.marker}
            auth = {"Authorization": f"Bearer {s.key}"}
            if s.session_id is None:
                problems.append(f"{s.user}: no session id")
                continue
            listed = api.get("/api/sessions", headers=auth).json()
            ids = [item["id"] for item in listed["items"]]
            if ids != [s.session_id]:
                problems.append(f"{s.user}: sessions listed {ids}, expected [{s.session_id}]")
            r = api.get(f"/api/sessions/{s.session_id}", headers=auth)
            if r.status_code != 200:
                problems.append(f"{s.user}: GET own session → {r.status_code}")
                continue
            detail = r.json()
            foreign = markers_in(r.text) - own
            if foreign:
                problems.append(f"{s.user}: foreign markers in the session: {sorted(foreign)}")
            if s.marker not in r.text:
                problems.append(f"{s.user}: own marker missing from the session")
            if len(detail["transcript"]) != 2 * s.turns_done:
                problems.append(
                    f"{s.user}: {len(detail['transcript'])} messages for {s.turns_done} turns"
                )
            if len(detail["reports"]) != s.turns_done:
                problems.append(
                    f"{s.user}: {len(detail['reports'])} turn reports for {s.turns_done} turns"
                )
            params = {"limit": 200, "include_superseded": "true"}
            r = api.get(f"/api/personas/{PERSONA}/memories", headers=auth, params=params)
            page = r.json()
            if r.status_code != 200 or page["total"] < 1:
                problems.append(f"{s.user}: no memories ({r.status_code})")
            foreign = markers_in(r.text) - own
            if foreign:
                problems.append(f"{s.user}: foreign markers in memories: {sorted(foreign)}")
            other = results[(s.index + 1) % len(results)]
            if other is not s:
                peek = api.get(
                    f"/api/sessions/{s.session_id}",
                    headers={"Authorization": f"Bearer {other.key}"},
                )
                if peek.status_code != 404:
                    problems.append(f"{other.user} reading {s.user}'s session → {peek.status_code}")
    for role, server in (("chat", h.chat), ("hippocampus", h.hippocampus)):
        for request in server.chat_requests:
            found = _request_markers(request)
            if len(found) != 1:
                problems.append(f"{role} upstream request with markers {found}")
    return not problems, problems


def build_components(args: argparse.Namespace, tmp: Path) -> tuple[Any, Any]:
    """The store and embedder the options ask for; ``None`` lets the harness pick its own
    (in-memory store, bag-of-words embedder)."""
    store = embedder = None
    if args.store == "chroma":
        from backend.stores.chroma_store import ChromaVectorStore

        store = ChromaVectorStore.persistent(tmp / "chroma")
    if args.embedder == "minilm":
        from backend.embeddings.local_minilm import LocalMiniLMEmbedder

        embedder = LocalMiniLMEmbedder()
    return store, embedder


def run(args: argparse.Namespace) -> dict[str, Any]:
    n = args.sessions
    results = [
        SessionResult(
            index=i,
            user=f"user{i:03d}",
            key=f"load-key-{i:03d}-{secrets.token_hex(8)}",
            marker=f"zqx{i:03d}{secrets.token_hex(3)}",
        )
        for i in range(n)
    ]
    rss_start = memory_kib()
    with tempfile.TemporaryDirectory(prefix="lm-load-") as tmp:
        config = {"server": {"api_keys": {s.key: s.user for s in results}}}
        store, embedder = build_components(args, Path(tmp))
        h = AppHarness(Path(tmp), config=config, store=store, embedder=embedder)
        for unused in (h.chat, h.hippocampus):  # never started: replaced by echoing ones
            unused._httpd.server_close()
        h.chat = EchoServer(chat_reply(args.ttft_ms / 1e3))
        h.hippocampus = EchoServer(hippocampus_reply(args.hippo_ms / 1e3))
        with h:
            kinds = (
                type(h.services.store).__name__,
                str(getattr(h.services.embedder, "model", "")),
            )
            rss_ready = memory_kib()
            started = time.perf_counter()
            asyncio.run(_load(h.base_url, results, args.turns, args.timeout_s))
            wall = time.perf_counter() - started
            rss_loaded = memory_kib()
            _wait_for_merges(h, results, args.turns)
            isolated, problems = check_isolation(h, results, args.turns)
            rss_end = memory_kib()
    errors = [f"{s.user}: {e}" for s in results for e in s.errors]
    ttfts = [t for s in results for t in s.ttft_s]
    turns_done = sum(s.turns_done for s in results)
    ttft_ms = args.ttft_ms
    return {
        "store_kind": kinds[0],
        "embedder_model": kinds[1],
        "sessions": n,
        "turns": args.turns,
        "turns_done": turns_done,
        "turns_expected": n * args.turns,
        "errors": len(errors),
        "error_samples": errors[:5],
        "isolation_ok": isolated,
        "isolation_problems": problems[:10],
        "ttft_p50_ms": percentile(ttfts, 50) * 1e3,
        "ttft_p95_ms": percentile(ttfts, 95) * 1e3,
        "overhead_p50_ms": percentile(ttfts, 50) * 1e3 - ttft_ms,
        "overhead_p95_ms": percentile(ttfts, 95) * 1e3 - ttft_ms,
        "throughput_tps": turns_done / wall if wall > 0 else float("nan"),
        "wall_s": wall,
        "rss_start_mib": rss_start["VmRSS"] / 1024,
        "rss_ready_mib": rss_ready["VmRSS"] / 1024,
        "rss_loaded_mib": rss_loaded["VmRSS"] / 1024,
        "rss_end_mib": rss_end["VmRSS"] / 1024,
        "hwm_mib": rss_end["VmHWM"] / 1024,
    }


def table(r: dict[str, Any], args: argparse.Namespace) -> str:
    rows = [
        ("store / embedder", f"{r['store_kind']} / {r['embedder_model']}"),
        ("sessions x turns", f"{r['sessions']} x {r['turns']}"),
        ("turns completed", f"{r['turns_done']} / {r['turns_expected']}"),
        ("errors", str(r["errors"])),
        ("isolation check", "passed" if r["isolation_ok"] else "FAILED"),
        ("TTFT p50 / p95 (client)", f"{r['ttft_p50_ms']:.1f} ms / {r['ttft_p95_ms']:.1f} ms"),
        ("upstream scripted TTFT", f"{args.ttft_ms:g} ms"),
        (
            "overhead p50 / p95",
            f"{r['overhead_p50_ms']:.1f} ms / {r['overhead_p95_ms']:.1f} ms",
        ),
        ("throughput", f"{r['throughput_tps']:.1f} turns/s"),
        ("wall time (load phase)", f"{r['wall_s']:.2f} s"),
        (
            "RSS before app / app ready / after load / after checks",
            f"{r['rss_start_mib']:.0f} / {r['rss_ready_mib']:.0f} / "
            f"{r['rss_loaded_mib']:.0f} / {r['rss_end_mib']:.0f} MiB",
        ),
        ("peak RSS (VmHWM, whole process)", f"{r['hwm_mib']:.0f} MiB"),
    ]
    lines = ["| metric | value |", "|---|---:|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.load_test", description=__doc__)
    parser.add_argument("--sessions", type=int, default=50, choices=range(1, 201), metavar="N")
    parser.add_argument("--turns", type=int, default=10, choices=range(1, 101), metavar="N")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--hippo-ms", type=float, default=50.0)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--store", choices=("memory", "chroma"), default="memory")
    parser.add_argument("--embedder", choices=("bow", "minilm"), default="bow")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    result = run(args)
    print(table(result, args))
    print()
    print(command_line("bench.load_test", argv))
    print(machine_line())
    for line in result["error_samples"]:
        print("error:", line)
    for line in result["isolation_problems"]:
        print("isolation:", line)
    return result


if __name__ == "__main__":
    outcome = main()
    sys.exit(0 if outcome["errors"] == 0 and outcome["isolation_ok"] else 1)
