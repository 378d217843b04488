"""``limbic-memory serve``: uvicorn on the configured host and port."""

from __future__ import annotations

import logging
import sys

import uvicorn

from backend.config import Settings
from backend.engine.services import StartupError, build_services
from backend.web.app import create_app

log = logging.getLogger(__name__)

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def serve(settings: Settings) -> int:
    server = settings.server
    try:
        services = build_services(settings)
    except StartupError as exc:
        print(f"limbic-memory: {exc}", file=sys.stderr)
        return 1
    if not server.api_keys:
        where = "loopback only" if server.host in _LOOPBACK else f"{server.host} WITHOUT AUTH"
        print(f"limbic-memory: no API keys configured: serving {where}", file=sys.stderr)
    print(f"limbic-memory: http://{server.host}:{server.port}/", file=sys.stderr, flush=True)
    app = create_app(settings, services, own_services=True)
    config = uvicorn.Config(
        app,
        host=server.host,
        port=server.port,
        log_level="warning",
        timeout_graceful_shutdown=30,
        ws="websockets-sansio",
    )
    uvicorn.Server(config).run()
    return 0
