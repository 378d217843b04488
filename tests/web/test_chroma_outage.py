"""A Chroma server down and back, under the real app process: nothing gated is lost.

The app runs as ``python -m backend serve`` (real services: Chroma over HTTP at
``storage.chroma_url``, the local MiniLM embedder, SQLite sessions, the outbox) with
scripted OpenAI-compatible upstreams; the Chroma server is a real ``chroma run`` on a
fixed loopback port and data directory, so it can be stopped and started again where
the app expects it. Each turn's hippocampus proposes one distinct fact.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.scripted_server import ScriptedOpenAIServer
from tests.web.app_process import AppProcess, ChromaServer, hippocampus_reply

pytestmark = pytest.mark.slow

FACTS = (
    "The user's sister Mei lives in Osaka",
    "The user works night shifts as a nurse",
    "The user is learning to play the cello",
    "The user's dog is called Biscuit",
    "The user is allergic to peanuts",
    "The user is training for a half marathon in May",
)
# What the user says on each fact's turn: the save gate stores only what the user said.
SAID = (
    "My sister Mei lives in Osaka.",
    "I work night shifts as a nurse.",
    "I am learning to play the cello.",
    "My dog is called Biscuit.",
    "Do you remember my dog Biscuit? I am allergic to peanuts, by the way.",
    "I am training for a half marathon in May.",
)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[ChromaServer, AppProcess, ScriptedOpenAIServer]]:
    chroma = ChromaServer(tmp_path)
    with ScriptedOpenAIServer() as chat, ScriptedOpenAIServer() as hippocampus:
        storage = {"data_dir": str(tmp_path / "data"), "chroma_url": chroma.url}
        app = AppProcess(tmp_path, chat.base_url, hippocampus.base_url, storage)
        try:
            yield chroma, app, hippocampus
        finally:
            app.stop()
            app.client.close()
            chroma.stop()


def test_chroma_down_and_back_loses_no_memory(
    rig: tuple[ChromaServer, AppProcess, ScriptedOpenAIServer],
) -> None:
    chroma, app, hippocampus = rig
    chroma.start()
    app.start()
    hippocampus.enqueue(hippocampus_reply(FACTS[0]))
    session, report = app.turn(None, "My sister Mei lives in Osaka.")
    assert [w["content"] for w in report["written"]] == [FACTS[0]]
    assert app.health()["dependencies"]["vector_store"] == {
        "ok": True, "kind": "LazyVectorStore", "queued": 0, "parked": 0,
    }  # fmt: skip

    chroma.stop()  # down: connections refused
    health = app.health()
    assert health["status"] == "degraded"
    assert health["dependencies"]["vector_store"]["ok"] is False
    for index in (1, 2, 3):
        hippocampus.enqueue(hippocampus_reply(FACTS[index]))
        _, report = app.turn(session, SAID[index])
        assert report["written"] == [] and report["activated"] == []
        assert report["activation"]["degraded"].startswith("store unavailable")
        assert [q["content"] for q in report["queued"]] == [FACTS[index]]
        assert "write_error" not in report["hippocampus"]
    vector_store = app.health()["dependencies"]["vector_store"]
    assert (vector_store["ok"], vector_store["queued"]) == (False, 3)
    status_page = app.client.get("/status").text
    assert "unreachable" in status_page and "3 memories queued" in status_page
    assert app.client.get("/api/personas/companion/memories").status_code == 503

    chroma.start()  # back: the replay loop notices within its back-off
    app.wait(lambda: app.health()["dependencies"]["vector_store"] == {
        "ok": True, "kind": "LazyVectorStore", "queued": 0, "parked": 0,
    })  # fmt: skip
    assert app.memories() == sorted(FACTS[:4])  # every one, each once

    # Recall works again, and the replayed memories are recalled.
    hippocampus.enqueue(hippocampus_reply(FACTS[4]))
    _, report = app.turn(session, SAID[4])
    assert FACTS[3] in [m["content"] for m in report["activated"]]
    assert report["activation"]["degraded"] is None

    # Down again, a write queued, the app stopped: the next start replays it.
    chroma.stop()
    hippocampus.enqueue(hippocampus_reply(FACTS[5]))
    _, report = app.turn(session, "I am training for a half marathon in May.")
    assert [q["content"] for q in report["queued"]] == [FACTS[5]]
    app.stop()
    app.start()  # the store is still down: the app starts all the same
    assert app.health()["dependencies"]["vector_store"]["queued"] == 1
    chroma.start()
    app.wait(lambda: app.health()["dependencies"]["vector_store"].get("queued") == 0)
    assert app.memories() == sorted(FACTS)


def test_hung_chroma_fails_fast_and_loses_no_memory(
    rig: tuple[ChromaServer, AppProcess, ScriptedOpenAIServer],
) -> None:
    """A paused server (SIGSTOP: its socket accepts, nothing answers). The first store call
    waits for the client's timeout; after that the store counts as down and calls fail at
    once (the reports say ``vector store down``) until its heartbeat answers again."""
    chroma, app, hippocampus = rig
    chroma.start()
    app.start()
    hippocampus.enqueue(hippocampus_reply(FACTS[0]))
    session, _ = app.turn(None, "My sister Mei lives in Osaka.")
    chroma.pause()
    degraded = []
    for index in (1, 2, 3):
        hippocampus.enqueue(hippocampus_reply(FACTS[index]))
        _, report = app.turn(session, SAID[index])
        assert [q["content"] for q in report["queued"]] == [FACTS[index]]
        degraded.append(report["activation"]["degraded"])
    assert all(d.startswith("store unavailable") for d in degraded)
    assert "vector store down" in degraded[-1]  # failed fast, not another timeout
    assert app.health()["dependencies"]["vector_store"]["ok"] is False
    chroma.resume()
    app.wait(lambda: app.health()["dependencies"]["vector_store"] == {
        "ok": True, "kind": "LazyVectorStore", "queued": 0, "parked": 0,
    })  # fmt: skip
    assert app.memories() == sorted(FACTS[:4])
