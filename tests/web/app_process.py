"""The real app as its own process, and a restartable ``chroma run`` server, for tests
that stop, fill or restart what the app depends on (outage, disk-full, restart tests).

``AppProcess`` runs ``python -m backend serve`` on a config written for the test, with
scripted OpenAI-compatible upstreams (``tests/llm/scripted_server.py``); ``ChromaServer``
keeps its port and data directory across ``stop``/``start``, so the app finds it again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.chroma_server import ChromaServer
from tests.llm.scripted_server import Reply
from tests.web.harness import REPO, free_port

__all__ = ["AppProcess", "ChromaServer", "hippocampus_reply"]

WAIT_S = 90.0  # bound on every wait for the app or the replay (the replay backs off to 5 s)


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


class AppProcess:
    """The app as its own process, on a config written for this test (``storage``: the
    config's storage section; default: ``data`` under ``tmp_path``, embedded Chroma;
    ``extra``: more settings, merged into their sections)."""

    def __init__(
        self,
        tmp_path: Path,
        chat: str,
        hippocampus: str,
        storage: dict[str, Any] | None = None,
        *,
        extra: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.port = free_port()
        config: dict[str, dict[str, Any]] = {
            # The scripted chat says the same sentence every turn: the reply guard, which
            # these tests are not about, would sample it again and, once the first attempt
            # has taken past its deadline (a hung store), show its stand-in instead.
            "chat": {
                "provider": "openai",
                "base_url": chat,
                "model": "scripted",
                "reply_guard": False,
            },
            "hippocampus": {
                "provider": "openai",
                "base_url": hippocampus,
                "model": "scripted",
                "mode": "full",  # the scripted answers are the full contract's
            },
            "storage": storage or {"data_dir": str(tmp_path / "data")},
            "server": {"port": self.port, "personas_dir": str(REPO / "personas")},
        }
        for section, values in (extra or {}).items():  # more settings, merged per section
            config.setdefault(section, {}).update(values)
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

    def kill(self) -> None:
        """SIGKILL: no shutdown at all (the OS drops its locks, files stay as they were)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
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
        said = r.json()["choices"][0]["message"]["content"]
        assert said == "Hello from the scripted server.", said
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
