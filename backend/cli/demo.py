"""``limbic-memory demo``: replay a scripted multi-session chat and score its probes.

A script is a JSON list of sessions; a session is a list of turns
``{"role": "user"|"assistant", "content": str}``; user turns may carry
``"probe": {"expects_any": [str, ...], "topic": str?, "stale_any": [str, ...]?}``
(the format of ``shared/eval/conversations/``). Only the user turns are sent; the
assistant turns are reference text. Each session is a new conversation through the
OpenAI-compatible API (the app creates the session; its ``X-Session-Id`` carries the
following turns), and every turn's memory merge is awaited (``GET /api/sessions/{id}``
until it has one report per turn) before the next turn is sent, so later sessions see
what earlier ones planted. Probes are streamed with intermediate steps, which gives the
activated memories. A probe passes when its reply contains any ``expects_any`` string
(case-insensitively). The output ends with the line ``probes passed N/M``.

In-process (the default) the app is built from the config and served on a free loopback
port in a thread, with a fresh data directory (a temporary one unless ``--data-dir``)
and a fresh user (a one-off API key), so memory starts empty. Against ``--url`` the
server's store is used as is: the memories listed are only those this run's sessions
created.

Failure policy: a malformed script or an unknown demo → ``DemoUsageError`` (exit 2);
the app failing to start, an HTTP error, or a merge that does not finish in time →
``DemoError`` (exit 1).
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

SHORT = 160  # characters of a reply or memory shown per line


class DemoError(RuntimeError):
    """The replay failed (the app, the network, a merge that never finished)."""


class DemoUsageError(ValueError):
    """A bad script or an unknown demo: the user's input is wrong."""


# ---- the script -------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    expects_any: tuple[str, ...]
    topic: str | None = None
    stale_any: tuple[str, ...] = ()


@dataclass(frozen=True)
class UserTurn:
    content: str
    probe: Probe | None = None


@dataclass(frozen=True)
class Script:
    path: Path
    sessions: tuple[tuple[UserTurn, ...], ...]

    @property
    def turns(self) -> int:
        return sum(len(s) for s in self.sessions)

    @property
    def probes(self) -> int:
        return sum(1 for s in self.sessions for t in s if t.probe is not None)


def _strings(value: Any, where: str, *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if (
        not isinstance(value, list)
        or not all(isinstance(v, str) and v.strip() for v in value)
        or (required and not value)
    ):
        need = "a non-empty list" if required else "a list"
        raise DemoUsageError(f"{where}: must be {need} of non-empty strings")
    return tuple(value)


def _probe(value: Any, where: str) -> Probe:
    if not isinstance(value, dict):
        raise DemoUsageError(f"{where}: 'probe' must be an object with 'expects_any'")
    unknown = set(value) - {"expects_any", "topic", "stale_any"}
    if unknown:
        raise DemoUsageError(f"{where}: unknown probe key(s) {sorted(unknown)}")
    topic = value.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise DemoUsageError(f"{where}: 'probe.topic' must be a string")
    return Probe(
        expects_any=_strings(
            value.get("expects_any"), f"{where}: probe.expects_any", required=True
        ),
        topic=topic,
        stale_any=_strings(value.get("stale_any"), f"{where}: probe.stale_any", required=False),
    )


def parse_script(data: Any, path: Path) -> Script:
    """Validate ``data`` (a parsed script); raises ``DemoUsageError`` naming the place."""
    if not isinstance(data, list) or not data:
        raise DemoUsageError(f"{path}: a script must be a non-empty JSON list of sessions")
    sessions: list[tuple[UserTurn, ...]] = []
    for s, session in enumerate(data, 1):
        if not isinstance(session, list):
            raise DemoUsageError(f"{path}: session {s}: must be a list of turns")
        turns: list[UserTurn] = []
        for t, turn in enumerate(session, 1):
            where = f"{path}: session {s}, turn {t}"
            if not isinstance(turn, dict):
                raise DemoUsageError(f"{where}: must be an object with 'role' and 'content'")
            role, content = turn.get("role"), turn.get("content")
            if role not in ("user", "assistant"):
                raise DemoUsageError(f"{where}: 'role' must be 'user' or 'assistant', not {role!r}")
            if not isinstance(content, str) or not content.strip():
                raise DemoUsageError(f"{where}: 'content' must be a non-empty string")
            if "probe" in turn and role != "user":
                raise DemoUsageError(f"{where}: only user turns can carry a 'probe'")
            if role == "user":
                probe = _probe(turn["probe"], where) if "probe" in turn else None
                turns.append(UserTurn(content, probe))
        if not turns:
            raise DemoUsageError(f"{path}: session {s}: has no user turn")
        sessions.append(tuple(turns))
    script = Script(path, tuple(sessions))
    if script.probes == 0:
        raise DemoUsageError(f"{path}: no user turn carries a 'probe': nothing to score")
    return script


def load_script(path: Path) -> Script:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DemoUsageError(f"{path}: cannot read the script: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DemoUsageError(f"{path}: not valid JSON: {exc}") from None
    return parse_script(data, path)


def demo_path(persona: str, dirs: list[Path]) -> Path:
    """The shipped script of ``persona``: ``<dir>/<persona>.json`` in the first dir that has it."""
    for directory in dirs:
        candidate = directory / f"{persona}.json"
        if candidate.is_file():
            return candidate
    shipped = sorted({p.stem for d in dirs if d.is_dir() for p in d.glob("*.json")})
    raise DemoUsageError(
        f"no demo script for persona {persona!r} (shipped: {', '.join(shipped) or 'none'}); "
        "pass one with --script FILE"
    )


# ---- the replay -------------------------------------------------------------------------


@dataclass
class ProbeResult:
    question: str
    probe: Probe
    reply: str
    activated: list[dict[str, Any]]
    passed: bool
    stale_mentioned: list[str] = field(default_factory=list)


def score(probe: Probe, reply: str) -> tuple[bool, list[str]]:
    low = reply.casefold()
    passed = any(e.casefold() in low for e in probe.expects_any)
    return passed, [s for s in probe.stale_any if s.casefold() in low]


def _short(text: str, limit: int = SHORT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body.get("error", {}).get("message") or body.get("detail")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {response.status_code}: {message or _short(response.text, 300)}"


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


@dataclass
class DemoResult:
    persona: str
    sessions: list[str]
    memories: list[dict[str, Any]]
    probes: list[ProbeResult]

    @property
    def passed(self) -> int:
        return sum(1 for p in self.probes if p.passed)


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
                reply, sid, model = client.say(turn.content, persona, sid)
            else:
                reply, sid, model, activated = client.probe(turn.content, persona, sid)
                passed, stale = score(turn.probe, reply)
                probes.append(
                    ProbeResult(turn.content, turn.probe, reply, activated, passed, stale)
                )
            persona_id = model or persona_id
            if t == 1:
                session_ids.append(sid)
            client.wait_for_merges(sid, t)
            progress(
                f"session {s}/{len(script.sessions)} turn {t}/{len(session)}: "
                f"{_short(turn.content, 60)!r} ({time.monotonic() - started:.1f} s)"
            )
    memories = client.memories_of(persona_id, set(session_ids)) if persona_id else []
    return DemoResult(persona_id, session_ids, memories, probes)


def _memory_line(memory: dict[str, Any]) -> str:
    return (
        f"[{memory.get('category', '?')}, importance {float(memory.get('importance', 0)):.2f}] "
        f"{_short(memory.get('content', ''))}"
    )


def render(result: DemoResult, out: TextIO) -> None:
    """The report; its last line is ``probes passed N/M``."""
    print(f"\nLong-term memories formed ({len(result.memories)}):", file=out)
    if not result.memories:
        print("  (none)", file=out)
    for memory in result.memories:
        print(f"  - {_memory_line(memory)}", file=out)
        versions = memory.get("versions") or []
        if len(versions) > 1:
            print(f"      version chain ({len(versions)}, oldest first):", file=out)
            for v in versions:
                print(f"        {_short(v.get('content', ''), 120)}", file=out)
    print(f"\nProbes ({len(result.probes)}):", file=out)
    for i, p in enumerate(result.probes, 1):
        topic = f" [{p.probe.topic}]" if p.probe.topic else ""
        print(f"  {i}.{topic} Q: {_short(p.question)}", file=out)
        print(f"     activated ({len(p.activated)}):", file=out)
        for m in p.activated[:5]:
            final = (m.get("score") or {}).get("final")
            at = f" (score {final:.2f})" if isinstance(final, (int, float)) else ""
            print(f"       - {_short(m.get('content', ''), 110)}{at}", file=out)
        if len(p.activated) > 5:
            print(f"       … and {len(p.activated) - 5} more", file=out)
        print(f"     reply: {_short(p.reply, 240)}", file=out)
        verdict = "PASS" if p.passed else "FAIL"
        wanted = ", ".join(repr(e) for e in p.probe.expects_any)
        print(f"     {verdict} (expects any of: {wanted})", file=out)
        if p.stale_mentioned:
            print(
                f"     note: mentions old value(s) {p.stale_mentioned}: check by hand whether "
                "they are presented as current",
                file=out,
            )
    print(f"probes passed {result.passed}/{len(result.probes)}", file=out)


# ---- the app in-process -----------------------------------------------------------------


def _describe_role(role: Any) -> str:
    if role.provider == "embedded":
        path = getattr(role, "model_path", None)
        if path is not None:
            return f"embedded {Path(path).name}"
        from backend.llm import presets

        return f"embedded {presets.get(role.model or presets.DEFAULT_PRESET).model}"
    return f"{role.model} at {role.base_url}"


def describe_models(settings: Any) -> str:
    return (
        f"chat: {_describe_role(settings.chat)}; "
        f"hippocampus: {_describe_role(settings.hippocampus)}"
    )


@contextmanager
def in_process_app(settings: Any, data_dir: Path | None) -> Iterator[tuple[str, str]]:
    """The app on a free loopback port in a thread → (base URL, API key of a fresh user).

    The store lives in ``data_dir`` (a temporary directory, removed afterwards, when None);
    the API key is the only one the app accepts, for a fresh user id, so memory starts
    empty even in a data directory that already has memories.
    """
    import socket

    import uvicorn

    from backend.engine.services import StartupError, build_services
    from backend.web.app import create_app

    temporary = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="limbic-demo-")) if temporary else data_dir
    assert directory is not None
    key = "demo-" + secrets.token_urlsafe(18)
    user = f"demo-{secrets.token_hex(4)}"
    storage = settings.storage.model_copy(
        update={"data_dir": directory, "sessions_db": directory / "sessions.sqlite3"}
    )
    server_settings = settings.server.model_copy(update={"api_keys": {key: user}})
    settings = settings.model_copy(update={"storage": storage, "server": server_settings})
    try:
        try:
            services = build_services(settings, command="demo")
        except StartupError as exc:
            raise DemoError(f"the app did not start: {exc}") from None
        app = create_app(settings, services, own_services=True)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=port,
                log_level="warning",
                ws="websockets-sansio",
                timeout_graceful_shutdown=30,
            )
        )
        thread = threading.Thread(target=server.run, name="limbic-demo-app", daemon=True)
        thread.start()
        deadline = time.monotonic() + 300
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                server.should_exit = True
                raise DemoError("the app did not start (see the log above)")
            time.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}", key
        finally:
            server.should_exit = True
            thread.join(timeout=120)
    finally:
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)


# ---- the command ------------------------------------------------------------------------


def run(
    *,
    persona: str | None,
    script_path: Path | None,
    url: str | None,
    api_key: str | None,
    data_dir: Path | None,
    merge_timeout: float,
    load_settings: Callable[[], Any] | None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``limbic-memory demo``: 0 when the replay ran (whatever the probes scored)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        settings = None if url else (load_settings() if load_settings else None)
        if script_path is None:
            if persona is None:
                raise DemoUsageError("give a PERSONA (its shipped demo) or --script FILE")
            # The shipped demos sit beside the personas (``server.personas_dir``), also
            # when the replay goes to a server given by URL.
            config = settings or (load_settings() if load_settings else None)
            if config is None:
                raise DemoUsageError("give --script FILE (no settings to find the demos)")
            script_path = demo_path(persona, [Path(config.server.personas_dir) / "demos"])
        script = load_script(script_path)
    except DemoUsageError as exc:
        print(f"limbic-memory demo: {exc}", file=err)
        return 2

    def progress(line: str) -> None:
        print(f"  {line}", file=err, flush=True)

    with suppress(ValueError):
        script_path = script_path.resolve().relative_to(Path.cwd())
    shown = persona or (settings.server.default_persona if settings else "(the server's default)")
    print(
        f"demo: persona {shown}, script {script_path} "
        f"({len(script.sessions)} sessions, {script.turns} user turns, {script.probes} probes)",
        file=out,
    )
    try:
        if url:
            print(f"app: {url}", file=out, flush=True)
            client = DemoClient(url, api_key, merge_timeout=merge_timeout)
            try:
                result = replay(client, script, persona, progress=progress)
            finally:
                client.close()
        else:
            assert settings is not None
            where = data_dir if data_dir is not None else "a temporary data dir"
            print(f"app: in-process ({where}, a fresh user)", file=out)
            print(f"models: {describe_models(settings)}", file=out, flush=True)
            with in_process_app(settings, data_dir) as (base_url, key):
                client = DemoClient(base_url, key, merge_timeout=merge_timeout)
                try:
                    result = replay(client, script, persona, progress=progress)
                finally:
                    client.close()
    except DemoError as exc:
        print(f"limbic-memory demo: {exc}", file=err)
        return 1
    render(result, out)
    out.flush()
    return 0
