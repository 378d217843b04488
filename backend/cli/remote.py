"""The CLI through a running server: when ``limbic-memory serve`` owns the data directory
(``backend.data_dir_lock``), ``chat``, ``mcp``, ``personas import`` and ``demo`` use its
HTTP API instead of opening the embedded store a second time (docs/reliability.md, "One
owner per data directory").

- ``chat``: ``POST /v1/chat/completions`` streamed (the session kept with ``X-Session-Id``,
  ``--persona`` as the model); ``--report`` polls ``GET /api/sessions/{id}`` for the turn's
  stored memory report, the same dict the in-process path prints.
- ``personas import``: ``POST /api/personas/import``: the server writes the card and
  serves the persona at once.
- ``mcp`` (stdio): a JSON-RPC relay to the server's own MCP endpoint (``/mcp``, stateless
  streamable HTTP with JSON responses): each line from stdin is POSTed there and the answer
  written back as one line, so the tools, their schemas and their errors are the server's.

The user: without ``server.api_keys`` the server's only user is ``local``; with keys, the
first key of the configuration that belongs to ``--user`` is sent as the bearer token.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import httpx

from backend.data_dir_lock import DataDirBusy, current_owner, needs_owner_lock

__all__ = [
    "RemoteError",
    "auth_headers",
    "chat",
    "import_persona",
    "mcp_relay",
    "owner_url",
]

LOCAL_USER = "local"  # the server's user when no API keys are configured (backend.web.deps)
# How long to wait for a server that holds the data directory but is not listening yet
# (loading its models), before giving up.
STARTING_SERVER_WAIT_S = 120.0
CONNECT_TIMEOUT_S = 10.0


class RemoteError(Exception):
    """A request to the server failed; the message says why. ``code``: the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --- who owns the data directory ---------------------------------------------------------


def owner_url(
    settings: Any, *, wait_s: float = STARTING_SERVER_WAIT_S, err: IO[str] | None = None
) -> str | None:
    """The URL of the server that owns the data directory; None when the command should
    open the store itself (nobody owns it, or the stores are shared by design). Raises
    ``DataDirBusy`` when a process that serves no HTTP (another CLI command) owns it.

    A server that holds the directory but is not listening yet (it binds its port after
    loading its models) is waited for, at most ``wait_s`` seconds."""
    if not needs_owner_lock(settings):
        return None
    data_dir = Path(settings.storage.data_dir)
    owner = current_owner(data_dir)
    deadline = time.monotonic() + wait_s
    told = False
    while owner is not None and owner.url is None and owner.command == "serve":
        if time.monotonic() >= deadline:
            break
        if not told and err is not None:
            print(
                f"limbic-memory: waiting for the server (pid {owner.pid}) that owns "
                f"{data_dir} to start listening...",
                file=err,
                flush=True,
            )
            told = True
        time.sleep(0.25)
        owner = current_owner(data_dir)
    if owner is None:
        return None
    if owner.url is None:
        raise DataDirBusy(data_dir, owner)
    return owner.url


# --- authentication ------------------------------------------------------------------------


def auth_headers(settings: Any, user: str) -> dict[str, str]:
    """The ``Authorization`` header that makes the server see ``user``."""
    keys: dict[str, str] = settings.server.api_keys
    if not keys:
        if user != LOCAL_USER:
            raise RemoteError(
                f"the running server has no API keys configured, so its only user is "
                f"{LOCAL_USER!r}: --user {user} needs a key of that user in server.api_keys "
                "(or stop the server to use that user in-process)"
            )
        return {}
    for key, owner in keys.items():
        if owner == user:
            return {"Authorization": f"Bearer {key}"}
    raise RemoteError(
        f"no API key in server.api_keys belongs to user {user!r}, so the running server "
        "cannot be asked on its behalf: add one, or pass --user with a user that has one"
    )


def _client(url: str, headers: dict[str, str], read_timeout: float | None) -> httpx.Client:
    return httpx.Client(
        base_url=url,
        headers=headers,
        timeout=httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT_S),
        trust_env=False,  # loopback: never through a proxy from the environment
    )


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return f"HTTP {response.status_code}: {json.dumps(body)[:300]}"


def _unreachable(url: str, exc: Exception) -> RemoteError:
    return RemoteError(f"the server at {url} did not answer ({exc.__class__.__name__}: {exc})")


# --- chat ----------------------------------------------------------------------------------


def chat(
    url: str,
    settings: Any,
    *,
    message: str | None,
    session: str | None,
    persona: str | None,
    user: str,
    report: bool,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    lines: Iterable[str] | None = None,
) -> int:
    """The ``chat`` command against the server at ``url`` (``lines``: the interactive
    input, default ``input()``)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        headers = auth_headers(settings, user)
    except RemoteError as exc:
        print(f"limbic-memory: {exc}", file=err)
        return exc.code
    chat_timeout = float(getattr(settings.chat, "timeout", 600.0))
    merge_wait = float(getattr(settings.hippocampus, "timeout", 300.0)) + 60.0
    status = 0
    with _client(url, headers, max(300.0, chat_timeout + 60.0)) as client:
        try:
            if not message:
                shown = _persona(client, persona)
                print(
                    f"[{shown['name']}] {shown['greeting']}\n(via {url}; Ctrl-D to quit)",
                    file=err,
                )
            for text in [message] if message else _inputs(lines, err):
                turn_id, session_id, failed = _turn(client, text, session, persona, out, err)
                if session is None and session_id is not None:
                    print(f"(session {session_id})", file=err)
                session = session_id or session
                if failed:
                    status = 1
                elif report and turn_id is not None and session is not None:
                    found = _wait_report(client, session, turn_id, merge_wait)
                    if found is None:
                        print(
                            f"limbic-memory: the memory report of turn {turn_id} was not "
                            f"there after {merge_wait:g} s; see GET /api/sessions/{session}",
                            file=err,
                        )
                        status = 1
                    else:
                        print(json.dumps(found, ensure_ascii=False, indent=2), file=out)
                out.flush()
        except RemoteError as exc:
            print(f"limbic-memory: {exc}", file=err)
            return exc.code
        except httpx.HTTPError as exc:
            print(f"limbic-memory: {_unreachable(url, exc)}", file=err)
            return 1
    return status


def _inputs(lines: Iterable[str] | None, err: IO[str]) -> Iterator[str]:
    if lines is not None:
        yield from (line for line in lines if line.strip())
        return
    while True:
        try:
            text = input("you> ")
        except EOFError:
            print(file=err)
            return
        if text.strip():
            yield text


def _persona(client: httpx.Client, persona: str | None) -> dict[str, Any]:
    if persona is None:
        r = client.get("/api/personas")
        _check(r)
        items = r.json()["items"]
        return next((p for p in items if p.get("default")), items[0])
    r = client.get(f"/api/personas/{persona}")
    if r.status_code == 404:
        raise RemoteError(f"unknown persona {persona!r}", code=2)
    _check(r)
    return r.json()  # type: ignore[no-any-return]


def _check(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise RemoteError(_error_message(response), code=2 if response.status_code == 404 else 1)


def _turn(
    client: httpx.Client,
    text: str,
    session: str | None,
    persona: str | None,
    out: IO[str],
    err: IO[str],
) -> tuple[str | None, str | None, bool]:
    """One streamed turn, its reply printed as it comes → (turn id, session id, failed)."""
    body: dict[str, Any] = {"messages": [{"role": "user", "content": text}], "stream": True}
    if persona:
        body["model"] = persona
    headers = {"X-Session-Id": session} if session else {}
    turn_id: str | None = None
    failed = False
    with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        session_id = r.headers.get("x-session-id")
        if r.status_code != 200:
            r.read()
            message = _error_message(r)
            if r.status_code == 404:  # unknown persona or session: as in-process, status 2
                raise RemoteError(message, code=2)
            if r.status_code == 502:  # the chat model failed; the session goes on
                print(f"limbic-memory: {message}", file=err)
                return None, session_id, True
            raise RemoteError(message)
        for data in _sse_data(r.iter_lines()):
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                print(f"\nlimbic-memory: {_error_text(chunk)}", file=err)
                failed = True
                continue
            if turn_id is None and str(chunk.get("id", "")).startswith("chatcmpl-"):
                turn_id = chunk["id"].removeprefix("chatcmpl-")
            for choice in chunk.get("choices") or ():
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    print(piece, end="", flush=True, file=out)
    print(file=out)
    return turn_id, session_id, failed


def _error_text(chunk: dict[str, Any]) -> str:
    error = chunk.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The data of each SSE event (multi-line data joined; other fields skipped)."""
    buffer: list[str] = []
    for line in lines:
        if not line:
            if buffer:
                yield "\n".join(buffer)
                buffer = []
            continue
        if line.startswith("data:"):
            buffer.append(line[5:].removeprefix(" "))
    if buffer:
        yield "\n".join(buffer)


def _wait_report(
    client: httpx.Client, session: str, turn_id: str, wait_s: float
) -> dict[str, Any] | None:
    """The turn's stored memory report, polled until it is there (at most ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        r = client.get(f"/api/sessions/{session}")
        _check(r)
        for item in r.json().get("reports", ()):
            if item.get("turn_id") == turn_id:
                return item.get("report")  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.25)


# --- personas import -----------------------------------------------------------------------


def import_persona(
    url: str,
    settings: Any,
    file: Path,
    data: bytes,
    *,
    overwrite: bool,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """``personas import`` through the server: it writes the card and serves it at once."""
    out = out or sys.stdout
    err = err or sys.stderr
    keys: dict[str, str] = settings.server.api_keys
    # Personas are shared by every user: any valid key may import one.
    headers = {"Authorization": f"Bearer {next(iter(keys))}"} if keys else {}
    try:
        with _client(url, headers, 120.0) as client:
            r = client.post(
                "/api/personas/import",
                params={"overwrite": "true"} if overwrite else None,
                files={"file": (file.name, data)},
            )
    except httpx.HTTPError as exc:
        print(f"limbic-memory: {_unreachable(url, exc)}", file=err)
        return 1
    if r.status_code != 201:
        print(f"limbic-memory: {_error_message(r)}", file=err)
        return 1
    persona = r.json()
    print(f"imported {persona['id']} ({persona['name']}) through the server at {url}", file=out)
    return 0


# --- mcp (stdio) ---------------------------------------------------------------------------

_PARSE_ERROR = -32700
_INTERNAL_ERROR = -32603


def check_persona(url: str, headers: dict[str, str], persona: str | None) -> None:
    """Raises ``RemoteError`` (code 2) when the server does not know ``persona``."""
    if persona is None:
        return
    with _client(url, headers, 30.0) as client:
        try:
            _persona(client, persona)
        except httpx.HTTPError as exc:
            raise _unreachable(url, exc) from None


def mcp_relay(
    url: str,
    headers: dict[str, str],
    persona: str | None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
) -> int:
    """The MCP stdio transport relayed to the server's ``/mcp``: one JSON-RPC message per
    line in, its answer (if any) as one line out, until stdin closes."""
    source = stdin or sys.stdin.buffer
    sink = stdout or sys.stdout.buffer
    base = {
        **headers,
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if persona:
        base["X-Persona"] = persona
    protocol: str | None = None

    def write(message: Any) -> None:
        sink.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        sink.flush()

    with _client(url, base, 300.0) as client:
        for raw in source:
            line = raw.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                write(_rpc_error(None, _PARSE_ERROR, "Parse error"))
                continue
            request_id = _request_id(message)
            extra = {"mcp-protocol-version": protocol} if protocol else {}
            try:
                r = client.post("/mcp", content=line, headers=extra)
            except httpx.HTTPError as exc:
                if request_id is not None:
                    write(_rpc_error(request_id, _INTERNAL_ERROR, str(_unreachable(url, exc))))
                continue
            for answer in _answers(r):
                if isinstance(answer, dict) and "jsonrpc" in answer:
                    if r.status_code >= 400 and request_id is not None:
                        answer["id"] = request_id  # the SDK's transport errors carry no id
                    result = answer.get("result")
                    if isinstance(result, dict) and "protocolVersion" in result:
                        protocol = str(result["protocolVersion"])
                    write(answer)
                elif request_id is not None:  # the app's own error body (401, 404, 503)
                    write(_rpc_error(request_id, _INTERNAL_ERROR, _error_message(r)))
    return 0


def _request_id(message: Any) -> Any:
    if isinstance(message, dict) and "method" in message and "id" in message:
        return message["id"]
    return None


def _rpc_error(request_id: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def _answers(response: httpx.Response) -> list[Any]:
    if not response.content:
        return []  # 202: a notification or a response, accepted
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return [json.loads(data) for data in _sse_data(response.text.splitlines()) if data]
    try:
        body = response.json()
    except ValueError:
        return [{"error": response.text[:300]}]
    return body if isinstance(body, list) else [body]
