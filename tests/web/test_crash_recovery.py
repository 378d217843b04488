"""Faults at the process level: SIGKILL mid-turn, an unusable data directory at start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backend.clock import SystemClock
from backend.config import load_settings
from backend.engine.services import StartupError, build_services
from backend.sessions.store import SessionStore
from tests.llm.scripted_server import Reply, ScriptedOpenAIServer
from tests.web.harness import REPO, free_port

pytestmark = pytest.mark.slow


def _config(tmp_path: Path, chat: str, hippocampus: str, port: int) -> Path:
    config = {
        "chat": {"provider": "openai", "base_url": chat, "model": "scripted"},
        "hippocampus": {"provider": "openai", "base_url": hippocampus, "model": "scripted"},
        "storage": {"data_dir": str(tmp_path / "data")},
        "server": {"port": port, "personas_dir": str(REPO / "personas")},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def _serve(config: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "--config", str(config), "serve"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the app did not start")


def test_sigkill_mid_turn_loses_nothing_acknowledged(tmp_path: Path) -> None:
    port = free_port()
    with ScriptedOpenAIServer() as chat, ScriptedOpenAIServer() as hippocampus:
        hippocampus.default = Reply(
            chunks=['{"background": "", "short_term": [], "long_term": []}']
        )
        config = _config(tmp_path, chat.base_url, hippocampus.base_url, port)
        proc = _serve(config, port)
        try:
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "first, complete"}]},
            )
            session = r.headers["x-session-id"]
            chat.enqueue(Reply(chunks=[f"word{i} " for i in range(200)], chunk_delay_s=0.05))
            body = {"messages": [{"role": "user", "content": "second, cut off"}], "stream": True}
            with httpx.stream(
                "POST",
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json=body,
                headers={"X-Session-Id": session},
            ) as stream:
                for line in stream.iter_lines():
                    if "word3" in line:
                        os.kill(proc.pid, signal.SIGKILL)  # mid-reply
                        break
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
        # Restart: everything acknowledged is there, the interrupted reply is marked.
        proc = _serve(config, port)
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/api/sessions/{session}")
            assert r.status_code == 200
            rows = [(m["role"], m["content"], m["status"]) for m in r.json()["transcript"]]
            assert rows[:3] == [
                ("user", "first, complete", "complete"),
                ("assistant", "Hello from the scripted server.", "complete"),
                ("user", "second, cut off", "complete"),
            ]
            assert rows[3][0] == "assistant" and rows[3][2] == "incomplete"
            # And the session goes on.
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                headers={"X-Session-Id": session},
                json={"messages": [{"role": "user", "content": "third"}]},
            )
            assert r.status_code == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    store = SessionStore(tmp_path / "data" / "sessions.sqlite3", SystemClock())
    try:
        assert store.transcript(session)[-1].status == "complete"
    finally:
        store.close()


def test_unusable_data_dir_stops_start_with_a_clear_message(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"storage": {"data_dir": str(blocker / "data")}}))
    with pytest.raises(StartupError, match="cannot create the data directory"):
        build_services(load_settings(config, env={}))
    assert blocker.read_text().startswith("a file")  # nothing created or changed
