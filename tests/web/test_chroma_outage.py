"""A Chroma server down and back, under the real app process: nothing gated is lost.

The app runs as ``python -m backend serve`` (real services: Chroma over HTTP at
``storage.chroma_url``, the local MiniLM embedder, SQLite sessions, the outbox) with
scripted OpenAI-compatible upstreams; the Chroma server is a real ``chroma run`` on a
fixed loopback port and data directory, so it can be stopped and started again where
the app expects it. Each turn's hippocampus proposes one distinct fact.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.llm.scripted_server import Reply, ScriptedOpenAIServer
from tests.web.harness import REPO, free_port

pytestmark = pytest.mark.slow

FACTS = (
    "The user's sister Mei lives in Osaka",
    "The user works night shifts as a nurse",
    "The user is learning to play the cello",
    "The user's dog is called Biscuit",
    "The user is allergic to peanuts",
    "The user is training for a half marathon in May",
)
WAIT_S = 90.0  # bound on every wait for the app or the replay (the replay backs off to 15 s)


def hippocampus_reply(fact: str) -> Reply:
    answer = {
        "background": "",
        "short_term": [],
        "long_term": [
            {"content": fact, "category": "personal_fact", "importance": 0.8,
             "confidence": 0.9, "subject": "user"}
        ],
        "user_emotion": None,
    }  # fmt: skip
    return Reply(chunks=[json.dumps(answer)])


class ChromaServer:
    """``chroma run`` on a fixed port and data directory, stoppable and restartable."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        executable = Path(sys.executable).with_name("chroma")
        command = [str(executable), "run", "--path", str(self.data / "db")]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
        with (self.data / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"chroma did not start: {self.log_tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self) -> str:
        return (self.data / "server.log").read_text(errors="replace")[-2000:]


class App:
    """The app as its own process, on a config written for this test."""

    def __init__(self, tmp_path: Path, chat: str, hippocampus: str, chroma_url: str) -> None:
        self.port = free_port()
        config = {
            "chat": {"provider": "openai", "base_url": chat, "model": "scripted"},
            "hippocampus": {"provider": "openai", "base_url": hippocampus, "model": "scripted"},
            "storage": {"data_dir": str(tmp_path / "data"), "chroma_url": chroma_url},
            "server": {"port": self.port, "personas_dir": str(REPO / "personas")},
        }
        self.config = tmp_path / "config.json"
        self.config.write_text(json.dumps(config))
        self.log = tmp_path / "app.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "backend", "--config", str(self.config), "serve"],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                self.client.get("/healthz", timeout=1)
                return
            except httpx.TransportError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.2)
        raise AssertionError(f"the app did not start: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.proc = None

    def turn(self, session: str | None, text: str) -> tuple[str, dict[str, Any]]:
        """One turn; returns the session id and the turn's memory report (once merged)."""
        headers = {"X-Session-Id": session} if session else {}
        r = self.client.post(
            "/v1/chat/completions",
            headers=headers,
            json={"model": "companion", "messages": [{"role": "user", "content": text}]},
        )
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "Hello from the scripted server."
        session = r.headers["x-session-id"]
        detail = self.wait(lambda: self._reports_with(session, text))
        return session, detail

    def _reports_with(self, session: str, text: str) -> dict[str, Any] | None:
        detail = self.client.get(f"/api/sessions/{session}").json()
        turns = [m["turn_id"] for m in detail["transcript"] if m["content"] == text]
        reports = {r["turn_id"]: r["report"] for r in detail["reports"]}
        return reports.get(turns[-1]) if turns and turns[-1] in reports else None

    def health(self) -> dict[str, Any]:
        return self.client.get("/healthz").json()  # type: ignore[no-any-return]

    def memories(self) -> list[str]:
        r = self.client.get("/api/personas/companion/memories", params={"limit": 200})
        assert r.status_code == 200, r.text
        return sorted(item["content"] for item in r.json()["items"])

    @staticmethod
    def wait(probe: Any) -> Any:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = probe()
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError("timed out waiting")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[ChromaServer, App, ScriptedOpenAIServer]]:
    chroma = ChromaServer(tmp_path)
    with ScriptedOpenAIServer() as chat, ScriptedOpenAIServer() as hippocampus:
        app = App(tmp_path, chat.base_url, hippocampus.base_url, chroma.url)
        try:
            yield chroma, app, hippocampus
        finally:
            app.stop()
            app.client.close()
            chroma.stop()


def test_chroma_down_and_back_loses_no_memory(
    rig: tuple[ChromaServer, App, ScriptedOpenAIServer],
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
        _, report = app.turn(session, f"Something about me, number {index}.")
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
    _, report = app.turn(session, "Do you remember my dog Biscuit?")
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
