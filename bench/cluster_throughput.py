"""Throughput with one and with two app processes, on one machine, in one run.

    python -m bench.cluster_throughput [--sessions 16] [--turns 6] [--chat-ms 50]
                                       [--hippo-ms 50] [--processes 1 2] [--repeat 3]

Each configuration gets a fresh cluster of the real components: a PostgreSQL server
(Debian's binaries, a throwaway cluster on loopback, one new database per run), a
``chroma run`` server, N ``python -m backend serve`` processes (embedded MiniLM
embeddings, long-term memory on the Chroma server, sessions on PostgreSQL) and scripted
OpenAI-compatible upstreams (``tests/cluster/rig.py``): the chat model waits
``--chat-ms`` before its first token, the hippocampus ``--hippo-ms`` before its JSON.
``--sessions`` clients (asyncio + httpx) run at once, each its own user, each sending
``--turns`` non-streaming turns one after the other; like a round-robin load balancer,
a session's turn t goes to process ``(session + t) % N``. The scripted hippocampus makes
every turn write one long-term memory.

Throughput = turns completed / wall time of the load phase (start-up excluded);
latency = client-side request time. Configurations run interleaved, ``--repeat`` times
each; the table shows each one's median run. The ratio compares each row with the first.
Every turn must answer 200 and every conversation's background chain must be whole at
the end (the same coherence rule as the cluster test), or the run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench._rig import command_line, machine_line, percentile
from tests.cluster.rig import (
    AppProcesses,
    ScriptServer,
    chat_reply,
    chroma_server,
    hippocampus_reply,
    user_message,
)
from tests.postgres_server import PostgresServer


def _cpu_by_role() -> dict[str, float]:
    """CPU seconds (user + system) so far of the processes on this machine, by role:
    the app processes, the Chroma server, PostgreSQL, and this one (clients and the
    scripted upstreams). Other users' processes are left out."""
    tick = os.sysconf("SC_CLK_TCK")
    totals = dict.fromkeys(ROLES, 0.0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == os.getpid():
            role = "bench"
        elif "-m backend" in cmdline and " serve" in cmdline:
            role = "app"
        elif "chroma run" in cmdline:
            role = "chroma"
        elif cmdline.startswith(("postgres", "/usr/lib/postgresql")):
            role = "postgres"
        else:
            continue
        totals[role] += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return totals


ROLES = ("app", "chroma", "postgres", "bench")


def key(s: int) -> str:
    return f"bench-key-{s}"


async def _session(
    client: httpx.AsyncClient, apps: AppProcesses, s: int, turns: int, latencies: list[float]
) -> str:
    headers = {"Authorization": f"Bearer {key(s)}"}
    session = ""
    for t in range(1, turns + 1):
        if session:
            headers["X-Session-Id"] = session
        started = time.perf_counter()
        message = {"role": "user", "content": user_message(s, t)}
        r = await client.post(
            f"{apps.url((s + t) % apps.count)}/v1/chat/completions",
            headers=headers,
            json={"model": "companion", "messages": [message]},
        )
        latencies.append(time.perf_counter() - started)
        if r.status_code != 200:
            raise RuntimeError(f"session {s} turn {t}: HTTP {r.status_code} {r.text[:200]}")
        session = r.headers["x-session-id"]
    return session


async def _coherent(apps: AppProcesses, sessions: list[str], turns: int) -> None:
    """Every background chain whole, once the last merges are in."""
    async with httpx.AsyncClient(timeout=60) as client:
        for s, session in enumerate(sessions):
            want = f"c{s}: " + " ".join(f"t{t}" for t in range(1, turns + 1))
            deadline = time.monotonic() + 60
            while True:
                r = await client.get(
                    f"{apps.url(0)}/api/sessions/{session}",
                    headers={"Authorization": f"Bearer {key(s)}"},
                )
                if r.json()["background"] == want:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"session {s}: background {r.json()['background']!r}")
                await asyncio.sleep(0.2)


async def _load(apps: AppProcesses, sessions: int, turns: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=sessions * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        started = time.perf_counter()
        ids = await asyncio.gather(
            *(_session(client, apps, s, turns, latencies) for s in range(sessions))
        )
        wall = time.perf_counter() - started
    await _coherent(apps, list(ids), turns)
    return wall, latencies


def run_one(
    base: Path, postgres: PostgresServer, processes: int, args: argparse.Namespace
) -> dict[str, float]:
    keys = {key(s): f"bench-user-{s}" for s in range(args.sessions)}
    with (
        ScriptServer(chat_reply, args.chat_ms / 1000) as chat,
        ScriptServer(hippocampus_reply, args.hippo_ms / 1000) as hippocampus,
        chroma_server(base / "chroma") as chroma_port,
    ):
        apps = AppProcesses(
            base / "apps", processes, postgres.new_database(), chroma_port, chat.base_url,
            hippocampus.base_url, keys,
        ).start()  # fmt: skip
        try:
            asyncio.run(_warm_up(apps))
            before = _cpu_by_role()
            wall, latencies = asyncio.run(_load(apps, args.sessions, args.turns))
            after = _cpu_by_role()
        finally:
            apps.stop()
    turns = args.sessions * args.turns
    cpu = {f"cpu_{r}_ms": (after[r] - before[r]) * 1e3 / turns for r in ROLES}
    return cpu | {
        "processes": processes,
        "turns": turns,
        "wall_s": wall,
        "turns_per_s": turns / wall,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p95_ms": percentile(latencies, 95) * 1e3,
    }


async def _warm_up(apps: AppProcesses) -> None:
    """One turn per process first (lazy model and client set-up is not throughput)."""
    async with httpx.AsyncClient(timeout=120) as client:
        for n in range(apps.count):
            r = await client.post(
                f"{apps.url(n)}/v1/chat/completions",
                headers={"Authorization": f"Bearer {key(0)}"},
                json={"model": "companion",
                      "messages": [{"role": "user", "content": user_message(9000 + n, 1)}]},
            )  # fmt: skip
            r.raise_for_status()


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median throughput (its other numbers with it)."""
    ordered = sorted(runs, key=lambda r: r["turns_per_s"])
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--chat-ms", type=float, default=50.0)
    parser.add_argument("--hippo-ms", type=float, default=50.0)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration")
    args = parser.parse_args(argv)
    postgres = PostgresServer().start()
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in args.processes}
    try:
        # Interleaved (1, 2, 1, 2, ...): a change in the machine's load hits both alike.
        for _ in range(args.repeat):
            for processes in args.processes:
                with tempfile.TemporaryDirectory(prefix="limbic-cluster-bench-") as tmp:
                    runs[processes].append(run_one(Path(tmp), postgres, processes, args))
    finally:
        postgres.stop()
    rows = [_median_run(runs[n]) for n in args.processes]
    print(machine_line())
    print(command_line("bench.cluster_throughput", argv))
    print(
        f"{args.sessions} sessions x {args.turns} turns, chat {args.chat_ms:.0f} ms to first"
        f" token, hippocampus {args.hippo_ms:.0f} ms\n"
    )
    print(f"median of {args.repeat} runs each (turns/s of every run in brackets)\n")
    print("| app processes | turns | wall s | turns/s | p50 ms | p95 ms | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ratio = row["turns_per_s"] / rows[0]["turns_per_s"]
        each = ", ".join(f"{r['turns_per_s']:.1f}" for r in runs[int(row["processes"])])
        print(
            f"| {row['processes']:.0f} | {row['turns']:.0f} | {row['wall_s']:.1f} |"
            f" {row['turns_per_s']:.1f} ({each}) | {row['p50_ms']:.0f} | {row['p95_ms']:.0f} |"
            f" {ratio:.2f} |"
        )
    print("\nCPU per turn (ms, load phase and the final coherence check):\n")
    print("| app processes | " + " | ".join(ROLES) + " | total |")
    print("|---:|" + "---:|" * (len(ROLES) + 1))
    for row in rows:
        cells = [row[f"cpu_{r}_ms"] for r in ROLES]
        print(
            f"| {row['processes']:.0f} | "
            + " | ".join(f"{c:.1f}" for c in cells)
            + f" | {sum(cells):.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
