"""``limbic-memory chat`` through the server (docs/reliability.md, "One owner per data
directory"): ``POST /v1/chat/completions`` streamed, the session kept with
``X-Session-Id``; ``--report`` polls ``GET /api/sessions/{id}`` for the turn's stored
memory report."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

import httpx

from backend.cli.remote_http import (
    RemoteError,
    auth_headers,
    check_response,
    error_message,
    http_client,
    persona_of,
    sse_data,
    unreachable,
)


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
    merge_wait = settings.hippocampus.timeout + 60.0
    status = 0
    with http_client(url, headers, max(300.0, chat_timeout + 60.0)) as client:
        try:
            if not message:
                shown = persona_of(client, persona)
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
            print(f"limbic-memory: {unreachable(url, exc)}", file=err)
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
            message = error_message(r)
            if r.status_code == 404:  # unknown persona or session: as in-process, status 2
                raise RemoteError(message, code=2)
            if r.status_code == 502:  # the chat model failed; the session goes on
                print(f"limbic-memory: {message}", file=err)
                return None, session_id, True
            raise RemoteError(message)
        for data in sse_data(r.iter_lines()):
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


def _wait_report(
    client: httpx.Client, session: str, turn_id: str, wait_s: float
) -> dict[str, Any] | None:
    """The turn's stored memory report, polled until it is there (at most ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        r = client.get(f"/api/sessions/{session}")
        check_response(r)
        for item in r.json().get("reports", ()):
            if item.get("turn_id") == turn_id:
                return item.get("report")  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.25)
