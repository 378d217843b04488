"""A memory that stops forming is never silent (issue 26): with the hippocampus's server
gone, ``/healthz``, the status page, the chat page and the OpenAI-compatible response
say so within three turns, and stop saying so once a run succeeds again."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx

from backend.web.openai_api import MEMORY_WARNING_HEADER
from tests.llm.scripted_server import Reply, ScriptedOpenAIServer
from tests.web.harness import HIPPOCAMPUS_OK, AppHarness

CHAT = "/v1/chat/completions"
WARNING = "Memory is not being saved"


def turn(h: AppHarness, text: str, session: str | None) -> httpx.Response:
    headers = {"X-Session-Id": session} if session else {}
    body = {"model": "companion", "stream": False, "messages": [{"role": "user", "content": text}]}
    r = httpx.post(h.base_url + CHAT, json=body, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r


def wait_merged(h: AppHarness, session: str, count: int) -> list[dict]:
    """The session's memory reports once ``count`` turns have one (bounded wait)."""
    deadline = time.monotonic() + 30
    while True:
        reports = [r.report for r in h.services.sessions.turn_reports(session)]
        merged = [r for r in reports if "hippocampus" in r]
        if len(merged) >= count:
            return merged
        assert time.monotonic() < deadline, reports
        time.sleep(0.05)


def test_a_dead_hippocampus_is_said_within_three_turns_and_cleared_when_back(
    tmp_path,
) -> None:
    with AppHarness(tmp_path) as h:
        port = urlsplit(h.hippocampus.base_url).port
        h.hippocampus.stop()  # its port now refuses connections
        first = turn(h, "I'm Priya, a nurse in Leeds.", None)
        session = first.headers["x-session-id"]
        assert MEMORY_WARNING_HEADER.lower() not in first.headers
        for number, text in enumerate(["I'm allergic to peanuts.", "My dog is Pixel."], 2):
            wait_merged(h, session, number - 1)
            turn(h, text, session)
        merged = wait_merged(h, session, 3)
        assert [r["hippocampus"]["status"] for r in merged] == ["failed"] * 3

        health = httpx.get(h.base_url + "/healthz").json()
        assert health["status"] == "degraded"
        memory = health["dependencies"]["memory"]
        assert memory["ok"] is False and memory["warning"].startswith(WARNING)
        assert "connection failed" in memory["warning"]  # the reason, in words
        assert WARNING in httpx.get(h.base_url + "/status").text
        chat_page = httpx.get(h.base_url + "/", params={"session": session}).text
        assert WARNING in chat_page and 'id="memory-warning"' in chat_page
        panel = httpx.get(f"{h.base_url}/ui/sessions/{session}/panel").text
        assert 'hx-swap-oob="true"' in panel and WARNING in panel  # the banner, per turn
        fourth = turn(h, "Are you keeping notes?", session)
        assert fourth.headers[MEMORY_WARNING_HEADER].startswith(WARNING)

        # The server comes back on the same address: one good run clears the warning.
        h.hippocampus = ScriptedOpenAIServer(port=port, default=Reply(chunks=[HIPPOCAMPUS_OK]))
        h.hippocampus.start()
        wait_merged(h, session, 4)
        turn(h, "Still there?", session)
        wait_merged(h, session, 5)
        health = httpx.get(h.base_url + "/healthz").json()
        assert health["status"] == "ok"
        assert health["dependencies"]["memory"]["warning"] is None
        last = turn(h, "Good.", session)
        assert MEMORY_WARNING_HEADER.lower() not in last.headers
        chat_page = httpx.get(h.base_url + "/", params={"session": session}).text
        assert WARNING not in chat_page
