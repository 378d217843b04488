"""The demo's replay over HTTP: ``DemoClient`` speaks the app's OpenAI-compatible API
and REST routes (docs/api.md); ``replay`` sends a script's user turns, each session a new
conversation, and awaits every turn's memory merge before the next."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from backend.cli.conversation_script import Script
from backend.cli.demo_report import DemoResult, ProbeResult, short
from backend.cli.demo_script import score


class DemoError(RuntimeError):
    """The replay failed (the app, the network, a merge that never finished)."""


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body.get("error", {}).get("message") or body.get("detail")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {response.status_code}: {message or short(response.text, 300)}"


class DemoClient:
    """The app's HTTP API, as the demo uses it."""

    def __init__(self, base_url: str, api_key: str | None, *, merge_timeout: float = 600.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(merge_timeout, connect=10.0),
        )
        self.merge_timeout = merge_timeout

    def close(self) -> None:
        self.http.close()

    def _body(self, text: str, persona: str | None, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": [{"role": "user", "content": text}], "stream": stream}
        if persona:
            body["model"] = persona
        if stream:
            body["additional_props"] = {"enableIntermediateSteps": True}
        return body

    def say(self, text: str, persona: str | None, session: str | None) -> tuple[str, str, str]:
        """One non-streamed turn → (reply, session id, persona id)."""
        headers = {"X-Session-Id": session} if session else {}
        try:
            r = self.http.post(
                "/v1/chat/completions", json=self._body(text, persona, False), headers=headers
            )
        except httpx.HTTPError as exc:
            raise DemoError(f"the chat request failed: {exc!r}") from None
        if r.status_code != 200:
            raise DemoError(f"the chat request failed: {_error_text(r)}")
        data = r.json()
        reply = data["choices"][0]["message"].get("content") or ""
        return reply, r.headers["x-session-id"], data.get("model") or ""

    def probe(
        self, text: str, persona: str | None, session: str | None
    ) -> tuple[str, str, str, list[dict[str, Any]]]:
        """One streamed turn with intermediate steps → (reply, session, persona, activated)."""
        headers = {"X-Session-Id": session} if session else {}
        parts: list[str] = []
        activated: list[dict[str, Any]] = []
        model = ""
        try:
            with self.http.stream(
                "POST",
                "/v1/chat/completions",
                json=self._body(text, persona, True),
                headers=headers,
            ) as r:
                if r.status_code != 200:
                    r.read()
                    raise DemoError(f"the chat request failed: {_error_text(r)}")
                sid = r.headers["x-session-id"]
                for line in r.iter_lines():
                    if line.startswith("intermediate_data:"):
                        step = json.loads(line.partition(":")[2])
                        if step.get("name") == "Memory activation":
                            activated = json.loads(step["payload"]).get("activated", [])
                    elif line.startswith("data:"):
                        data = line.partition(":")[2].strip()
                        if data == "[DONE]":
                            break
                        chunk = json.loads(data)
                        if "error" in chunk:
                            raise DemoError(f"the reply failed: {chunk['error'].get('message')}")
                        model = chunk.get("model") or model
                        for choice in chunk.get("choices") or []:
                            parts.append((choice.get("delta") or {}).get("content") or "")
        except httpx.HTTPError as exc:
            raise DemoError(f"the chat request failed: {exc!r}") from None
        return "".join(parts), sid, model, activated

    def wait_for_merges(self, session: str, turns: int) -> None:
        """Poll the session until it has ``turns`` memory reports (one per merged turn)."""
        deadline = time.monotonic() + self.merge_timeout
        delay = 0.05
        while True:
            try:
                r = self.http.get(f"/api/sessions/{session}")
            except httpx.HTTPError as exc:
                raise DemoError(f"reading session {session} failed: {exc!r}") from None
            if r.status_code != 200:
                raise DemoError(f"reading session {session} failed: {_error_text(r)}")
            if len(r.json().get("reports") or []) >= turns:
                return
            if time.monotonic() > deadline:
                raise DemoError(
                    f"session {session}: turn {turns}'s memory merge did not finish within "
                    f"{self.merge_timeout:.0f} s (raise --merge-timeout)"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def memories_of(self, persona: str, sessions: set[str]) -> list[dict[str, Any]]:
        """The current memories these sessions created, each with its ``versions``."""
        found: list[dict[str, Any]] = []
        offset = 0
        while True:
            r = self.http.get(
                f"/api/personas/{persona}/memories",
                params={"offset": offset, "limit": 200, "sort": "created"},
            )
            if r.status_code != 200:
                raise DemoError(f"listing the memories failed: {_error_text(r)}")
            page = r.json()
            found += [m for m in page["items"] if m.get("source_session") in sessions]
            if not page.get("has_more"):
                break
            offset += len(page["items"])
        detailed = []
        for memory in sorted(found, key=lambda m: m.get("created_at") or ""):
            r = self.http.get(f"/api/personas/{persona}/memories/{memory['id']}")
            detailed.append(r.json() if r.status_code == 200 else {**memory, "versions": []})
        return detailed


def replay(
    client: DemoClient,
    script: Script,
    persona: str | None,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> DemoResult:
    """Send every user turn of ``script``; each session a new conversation."""
    session_ids: list[str] = []
    probes: list[ProbeResult] = []
    persona_id = persona or ""
    for s, session in enumerate(script.sessions, 1):
        sid: str | None = None
        for t, turn in enumerate(session, 1):
            started = time.monotonic()
            if turn.probe is None:
                reply, sid, model = client.say(turn.text, persona, sid)
            else:
                reply, sid, model, activated = client.probe(turn.text, persona, sid)
                passed, stale = score(turn.probe, reply)
                probes.append(ProbeResult(turn.text, turn.probe, reply, activated, passed, stale))
            persona_id = model or persona_id
            if t == 1:
                session_ids.append(sid)
            client.wait_for_merges(sid, t)
            progress(
                f"session {s}/{len(script.sessions)} turn {t}/{len(session)}: "
                f"{short(turn.text, 60)!r} ({time.monotonic() - started:.1f} s)"
            )
    memories = client.memories_of(persona_id, set(session_ids)) if persona_id else []
    return DemoResult(persona_id, session_ids, memories, probes)
