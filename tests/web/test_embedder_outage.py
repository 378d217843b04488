"""The embedder down, through the app on a loopback port (issue 8).

Replies are unaffected; recall falls back to keywords (the report says so); memories
the hippocampus proposes meanwhile are stored without a vector; once the embedder is
back, the maintenance pass's backfill gives them one and recall uses cosine again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.engine.maintenance import run_maintenance
from backend.engine.prompt import second_person
from tests.stores.fakes import BagOfWordsEmbedder
from tests.web.app_process import hippocampus_reply
from tests.web.harness import AppHarness

FACT = "The user is allergic to peanuts"


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path, embedder=BagOfWordsEmbedder()) as harness:
        yield harness


def turn(h: AppHarness, session: str | None, text: str) -> tuple[str, dict[str, Any]]:
    headers = {"X-Session-Id": session} if session else {}
    r = httpx.post(
        h.base_url + "/v1/chat/completions",
        headers=headers,
        json={"messages": [{"role": "user", "content": text}]},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "Hello there!"
    session_id = r.headers["x-session-id"]
    turns = sum(m["role"] == "user" for m in session_detail(h, session_id)["transcript"])
    deadline = time.monotonic() + 30  # the merge (with its report) runs after the reply
    while len(reports := session_detail(h, session_id)["reports"]) < turns:
        assert time.monotonic() < deadline, "the turn's report never came"
        time.sleep(0.02)
    return session_id, reports[-1]["report"]


def session_detail(h: AppHarness, session_id: str) -> dict[str, Any]:
    r = httpx.get(h.base_url + f"/api/sessions/{session_id}", timeout=10)
    assert r.status_code == 200
    return dict(r.json())


def memories(h: AppHarness) -> list[dict[str, Any]]:
    r = httpx.get(h.base_url + "/api/personas/companion/memories", timeout=10)
    assert r.status_code == 200
    return list(r.json()["items"])


def test_embedder_down_then_back_through_the_app(h: AppHarness) -> None:
    embedder = h.services.embedder
    assert isinstance(embedder, BagOfWordsEmbedder)
    embedder.down = True
    h.hippocampus.enqueue(hippocampus_reply(FACT))
    session, report = turn(h, None, "Remember that I'm allergic to peanuts.")
    assert [(w["content"], w["vector"]) for w in report["written"]] == [(FACT, False)]
    assert report["activation"]["degraded"] == "no query vector: keywords only"
    (stored,) = memories(h)
    assert (stored["content"], stored["has_vector"]) == (FACT, False)

    # Still down: keyword recall finds it, and the reply's prompt carries it (in another
    # conversation: in this one, the message that said it is still in view).
    _, report = turn(h, None, "Any peanuts in this satay?")
    assert [m["id"] for m in report["activated"]] == [stored["id"]]
    assert report["activated"][0]["score"]["cosine"] is None  # missing, never 0
    # (said to the user: notes are shown in the second person, backend.engine.prompt)
    assert second_person(FACT) in str(h.chat.chat_requests[-1].body["messages"])

    # Back: the backfill (the maintenance pass) embeds it; recall is not degraded.
    embedder.down = False
    assert run_maintenance(h.services.long_term).backfilled == 1
    (stored,) = memories(h)
    assert stored["has_vector"] is True
    _, report = turn(h, session, "What about peanuts?")
    assert "no query vector" not in str(report["activation"]["degraded"])
    assert [m["id"] for m in report["activated"]] == [stored["id"]]
    assert report["activated"][0]["score"]["cosine"] > 0
