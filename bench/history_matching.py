"""What finding a client's session from its resent history costs on a turn's path.

    python -m bench.history_matching [--sessions 20] [--messages 20 200 1000] [--repeats 30]

Open WebUI and SillyTavern send the whole conversation with every request and no
session id; ``session_placement.resolve`` lines it up with the user's most recent
sessions (``MATCH_SESSIONS``) to find the one it continues. This measures ``resolve``
on a real SQLite session store in a temp dir: ``--sessions`` sessions of the user with
the persona, each with its own transcript of N messages, and a client request that
continues the OLDEST of them (the worst case: every more recent transcript is read and
rejected first) or the newest (the usual case). A named one-message turn (the ``openai``
SDK with ``X-Session-Id``, the browser UI) reads no transcript; it is shown for
comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from backend.clock import FixedClock
from backend.engine.conversation_match import ClientMessage
from backend.engine.session_placement import MATCH_SESSIONS, resolve
from backend.personas import PersonaRegistry
from backend.sessions.store import SessionStore

REPO = Path(__file__).resolve().parents[1]


def fill(store: SessionStore, clock: FixedClock, sessions: int, messages: int) -> list[str]:
    """``sessions`` sessions, oldest first, each with ``messages`` distinct messages."""
    ids = []
    for s in range(sessions):
        clock.advance(seconds=1)
        session = store.create_session("bench", "companion", None)
        for m in range(messages):
            role = "user" if m % 2 == 0 else "assistant"
            store.append_message(session.id, role, f"session {s} message {m}: some words here")
        ids.append(session.id)
    return ids


def client_for(store: SessionStore, session_id: str) -> tuple[ClientMessage, ...]:
    """The session's transcript as the client resends it, plus a new user message."""
    rows = store.transcript(session_id)
    sent = [ClientMessage(m.role, m.content) for m in rows]  # type: ignore[arg-type]
    return (*sent, ClientMessage("user", "and one more thing"))


async def timed(store: SessionStore, personas: PersonaRegistry, clock: FixedClock,
                client: tuple[ClientMessage, ...], session_id: str | None,
                repeats: int) -> list[float]:  # fmt: skip
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await resolve(
            store, personas, clock, user_id="bench", persona_id="companion",
            session_id=session_id, client=client, final="turn",
        )  # fmt: skip
        times.append((time.perf_counter() - start) * 1000)
    return times


def row(label: str, times: list[float]) -> str:
    p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
    return f"| {label} | {statistics.median(times):.2f} | {p95:.2f} |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=MATCH_SESSIONS)
    parser.add_argument("--messages", type=int, nargs="+", default=[20, 200, 1000])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    personas = PersonaRegistry.load(REPO / "personas", "companion")
    print(f"{args.sessions} sessions of the user with the persona; {args.repeats} repeats\n")
    print("| request | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for messages in args.messages:
        with tempfile.TemporaryDirectory() as tmp:
            clock = FixedClock(datetime(2026, 12, 1, tzinfo=UTC))
            store = SessionStore(Path(tmp) / "sessions.sqlite3", clock)
            ids = fill(store, clock, args.sessions, messages)
            newest, oldest = ids[-1], ids[0]
            for label, target in (("newest", newest), ("oldest", oldest)):
                client = client_for(store, target)
                times = await timed(store, personas, clock, client, None, args.repeats)
                print(row(f"{messages} messages resent, continues the {label} session", times))
            one = (ClientMessage("user", "hello"),)
            times = await timed(store, personas, clock, one, newest, args.repeats)
            print(row(f"{messages} messages stored, named session, one new message", times))
            store.close()


if __name__ == "__main__":
    asyncio.run(main())
