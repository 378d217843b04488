"""Graceful shutdown: the merges of finished turns are not lost when the app stops."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from backend.clock import SystemClock
from backend.sessions.store import SessionStore
from tests.llm.scripted_server import Reply
from tests.web.harness import AppHarness

FACT = {
    "content": "The user's cat is called Mochi",
    "category": "personal_fact",
    "importance": 0.8,
    "confidence": 0.9,
    "subject": "user",
    "keywords": ["cat", "mochi"],
}


def test_stopping_the_app_finishes_pending_merges(tmp_path: Path) -> None:
    with AppHarness(tmp_path) as h:
        slow = json.dumps({"background": "cat talk", "short_term": [], "long_term": [FACT]})
        h.hippocampus.enqueue(Reply(chunks=[slow], first_token_delay_s=1.0))
        r = httpx.post(
            h.base_url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "My cat is Mochi"}]},
        )
        assert r.status_code == 200
        session = r.headers["x-session-id"]
        # The reply is back; the hippocampus is still thinking. Now the app stops.
        assert h.services.sessions.turn_reports(session) == []
    reopened = SessionStore(tmp_path / "sessions.sqlite3", SystemClock())
    try:
        reports = reopened.turn_reports(session)
        assert len(reports) == 1
        assert [w["content"] for w in reports[0].report["written"]] == [FACT["content"]]
        assert reopened.load_state(session).background == "cat talk"
    finally:
        reopened.close()
