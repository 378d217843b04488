"""Talking to the server that owns the data directory (docs/reliability.md, "One owner per
data directory"): the bearer token that makes it see ``--user``, the HTTP client, its
error messages, and the pieces the remote commands share (a persona's lookup, SSE
data)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

LOCAL_USER = "local"  # the server's user when no API keys are configured (backend.web.deps)
CONNECT_TIMEOUT_S = 10.0


class RemoteError(Exception):
    """A request to the server failed; the message says why. ``code``: the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


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


def http_client(url: str, headers: dict[str, str], read_timeout: float | None) -> httpx.Client:
    return httpx.Client(
        base_url=url,
        headers=headers,
        timeout=httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT_S),
        trust_env=False,  # loopback: never through a proxy from the environment
    )


def error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return f"HTTP {response.status_code}: {json.dumps(body)[:300]}"


def unreachable(url: str, exc: Exception) -> RemoteError:
    return RemoteError(f"the server at {url} did not answer ({exc.__class__.__name__}: {exc})")


def persona_of(client: httpx.Client, persona: str | None) -> dict[str, Any]:
    if persona is None:
        r = client.get("/api/personas")
        check_response(r)
        items = r.json()["items"]
        return next((p for p in items if p.get("default")), items[0])
    r = client.get(f"/api/personas/{persona}")
    if r.status_code == 404:
        raise RemoteError(f"unknown persona {persona!r}", code=2)
    check_response(r)
    return r.json()  # type: ignore[no-any-return]


def check_response(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise RemoteError(error_message(response), code=2 if response.status_code == 404 else 1)


def sse_data(lines: Iterable[str]) -> Iterator[str]:
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
