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

``chat`` is ``backend.cli.remote_chat``, ``mcp`` ``backend.cli.remote_mcp``, the HTTP
client and the user's token ``backend.cli.remote_http``; this module finds the server and
imports personas through it.

The user: without ``server.api_keys`` the server's only user is ``local``; with keys, the
first key of the configuration that belongs to ``--user`` is sent as the bearer token.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx

from backend.cli.remote_http import error_message, http_client, unreachable
from backend.data_dir_lock import DataDirBusy, current_owner, needs_owner_lock

# How long to wait for a server that holds the data directory but is not listening yet
# (loading its models), before giving up.
STARTING_SERVER_WAIT_S = 120.0

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
        with http_client(url, headers, 120.0) as client:
            r = client.post(
                "/api/personas/import",
                params={"overwrite": "true"} if overwrite else None,
                files={"file": (file.name, data)},
            )
    except httpx.HTTPError as exc:
        print(f"limbic-memory: {unreachable(url, exc)}", file=err)
        return 1
    if r.status_code != 201:
        print(f"limbic-memory: {error_message(r)}", file=err)
        return 1
    persona = r.json()
    print(f"imported {persona['id']} ({persona['name']}) through the server at {url}", file=out)
    return 0
