"""End to end: a real PostgreSQL, a real ``chroma run`` server, two app processes.

Several conversations run at once; turn t of conversation c goes to process
``(c + t) % 2``, so every turn lands on the other process than the one before. The
scripted hippocampus answers slowly, so each merge is still running when the client
already sends the next turn to the other process, which must wait for it
(``tests/cluster/rig.py`` explains how the conversations are made checkable). After the
run, every conversation is read back from both processes: transcript order, background,
short-term, turn reports and long-term memories, with nothing duplicated or lost.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.rig import (
    AppProcesses,
    ScriptServer,
    chat_reply,
    chroma_server,
    fact,
    hippocampus_reply,
    reply_text,
    turns_read,
    user_message,
)

pytestmark = pytest.mark.slow

CONVERSATIONS = 3
TURNS = 4
HIPPOCAMPUS_DELAY_S = 0.4  # the merge lags behind the reply the client already has


def key(c: int) -> str:
    return f"key-conversation-{c}"


def converse(apps: AppProcesses, c: int, out: dict[int, Any]) -> None:
    headers = {"Authorization": f"Bearer {key(c)}"}
    replies: list[str] = []
    session: str | None = None
    with httpx.Client(timeout=60) as client:
        for t in range(1, TURNS + 1):
            if session is not None:
                headers["X-Session-Id"] = session
            r = client.post(
                f"{apps.url((c + t) % 2)}/v1/chat/completions",
                headers=headers,
                json={"model": "companion", "stream": t % 2 == 0,
                      "messages": [{"role": "user", "content": user_message(c, t)}]},
            )  # fmt: skip
            assert r.status_code == 200, r.text
            session = r.headers["x-session-id"]
            replies.append(_content(r))
    out[c] = (session, replies)


def _content(r: httpx.Response) -> str:
    if not r.headers["content-type"].startswith("text/event-stream"):
        return str(r.json()["choices"][0]["message"]["content"])
    import json

    parts = []
    for line in r.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                parts.append(choice.get("delta", {}).get("content") or "")
    return "".join(parts)


def _settled(apps: AppProcesses, c: int, session: str) -> dict[str, Any]:
    """The session once every turn's merge is done (its report stored). Seen once in a
    full CI run on 2 cores: the background still at the first turn's after 60 s; this
    says which it was, merges still missing or one that landed out of order."""
    deadline = time.monotonic() + 180
    while True:
        r = httpx.get(
            f"{apps.url(0)}/api/sessions/{session}",
            headers={"Authorization": f"Bearer {key(c)}"},
        )
        assert r.status_code == 200, r.text
        reports = r.json()["reports"]
        if len(reports) >= TURNS:
            return dict(r.json())
        if time.monotonic() > deadline:
            done = [(x.get("turn_id"), (x.get("hippocampus") or {}).get("status")) for x in reports]
            pytest.fail(f"c{c}: {len(reports)}/{TURNS} merges reported after 180 s: {done}")
        time.sleep(0.2)


def test_conversations_alternating_between_two_processes_stay_coherent(
    tmp_path: Path, postgres_url: str
) -> None:
    keys = {key(c): f"user{c}" for c in range(CONVERSATIONS)}
    with (
        ScriptServer(chat_reply, 0.02) as chat,
        ScriptServer(hippocampus_reply, HIPPOCAMPUS_DELAY_S) as hippocampus,
        chroma_server(tmp_path / "chroma") as chroma_port,
    ):
        apps = AppProcesses(
            tmp_path / "apps", 2, postgres_url, chroma_port, chat.base_url,
            hippocampus.base_url, keys,
        ).start()  # fmt: skip
        try:
            results: dict[int, Any] = {}
            threads = [
                threading.Thread(target=converse, args=(apps, c, results))
                for c in range(CONVERSATIONS)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=300)
            assert sorted(results) == list(range(CONVERSATIONS)), "a conversation failed"
            for c, (session, replies) in results.items():
                _check_conversation(apps, c, session, replies)
            # Every turn was read by exactly one hippocampus run: none twice, none lost.
            read = [turn for req in hippocampus.chat_requests for turn in turns_read(req.body)]
            assert sorted(read) == sorted(
                (c, t) for c in range(CONVERSATIONS) for t in range(1, TURNS + 1)
            )
        finally:
            apps.stop()


def _check_conversation(apps: AppProcesses, c: int, session: str, replies: list[str]) -> None:
    want_replies = [reply_text(c, t, saw=t > 1) for t in range(1, TURNS + 1)]
    assert replies == want_replies  # each turn's prompt had the previous turn in it
    detail = _settled(apps, c, session)
    rows = [(m["role"], m["content"], m["status"]) for m in detail["transcript"]]
    want: list[tuple[str, str, str]] = []
    for t in range(1, TURNS + 1):
        want += [("user", user_message(c, t), "complete"),
                 ("assistant", want_replies[t - 1], "complete")]  # fmt: skip
    assert rows == want
    assert [m["seq"] for m in detail["transcript"]] == list(range(1, 2 * TURNS + 1))
    # The background chain: every turn read the state the turn before it merged.
    assert detail["background"] == f"c{c}: " + " ".join(f"t{t}" for t in range(1, TURNS + 1))
    assert [item["text"] for item in detail["short_term"]] == [text for _, text, _ in want]
    reports = detail["reports"]
    assert len(reports) == TURNS and len({r["turn_id"] for r in reports}) == TURNS
    headers = {"Authorization": f"Bearer {key(c)}"}
    for n in range(2):  # both processes see the same memories, exactly one per turn
        r = httpx.get(
            f"{apps.url(n)}/api/personas/companion/memories",
            headers=headers,
            params={"limit": 100},
        )
        assert r.status_code == 200, r.text
        contents = sorted(item["content"] for item in r.json()["items"])
        assert contents == sorted(fact(c, t) for t in range(1, TURNS + 1))
        again = httpx.get(f"{apps.url(n)}/api/sessions/{session}", headers=headers)
        assert again.json()["transcript"] == detail["transcript"]
