"""``limbic-memory serve``: uvicorn on the configured host and port.

The process owns the data directory while it serves (``backend.data_dir_lock``): its URL
goes into the owner record once the socket is bound, so the CLI on the same data
directory talks to this server instead of opening the store a second time.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys

import uvicorn

from backend.config import Settings
from backend.engine.services import Services, StartupError, build_services
from backend.web.app import create_app

log = logging.getLogger(__name__)

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_ANY = {"", "0.0.0.0", "::"}


def base_url(host: str, port: int) -> str:
    """The URL a local client reaches the server at: loopback for a wildcard host."""
    if host in _ANY:
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound as uvicorn binds it (raises ``OSError``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings) -> int:
    server = settings.server
    try:
        services = build_services(settings, command="serve")
    except StartupError as exc:
        print(f"limbic-memory: {exc}", file=sys.stderr)
        return 1
    try:
        sock = bind(server.host, server.port)
    except OSError as exc:
        print(
            f"limbic-memory: cannot listen on {server.host}:{server.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        _close(services)
        return 1
    port = int(sock.getsockname()[1])  # the one chosen for port 0
    url = base_url(server.host, port)
    if services.lock is not None:
        services.lock.set_url(url)  # bound: the CLI may use this server from now on
    if not server.api_keys:
        where = "loopback only" if server.host in _LOOPBACK else f"{server.host} WITHOUT AUTH"
        print(f"limbic-memory: no API keys configured: serving {where}", file=sys.stderr)
    print(f"limbic-memory: http://{server.host}:{port}/", file=sys.stderr, flush=True)
    app = create_app(settings, services, own_services=True)
    config = uvicorn.Config(
        app,
        host=server.host,
        port=server.port,
        log_level="warning",
        timeout_graceful_shutdown=30,
        ws="websockets-sansio",
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _close(services: Services) -> None:
    try:
        asyncio.run(services.aclose())
    except Exception:
        log.exception("closing the services failed")
