"""``GET /healthz``: fast, never calls a model (wire.md, Health)."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Response

from backend.engine.services import Services
from backend.memory.types import Namespace
from backend.web.deps import ServicesDep

router = APIRouter(tags=["health"])

PROBE_TIMEOUT_S = 0.5
_HEALTH_NS = Namespace("__health__", "__health__")


def _tcp_reachable(url: str) -> bool:
    """Whether a TCP connection to the URL's host:port opens (no request is sent)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def _role(services: Services, name: str) -> dict[str, Any]:
    role: Any = getattr(services.settings, name)
    if role.provider == "embedded":
        return {"provider": "embedded", "ok": True}
    return {"provider": "openai", "model": role.model, "ok": _tcp_reachable(role.base_url)}


def _check(services: Services) -> dict[str, Any]:
    deps: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        services.store.count(_HEALTH_NS)
        deps["vector_store"] = {"ok": True, "kind": type(services.store).__name__}
    except Exception as exc:
        deps["vector_store"] = {"ok": False, "error": type(exc).__name__}
    try:
        services.sessions.list_sessions("__health__", limit=1)
        deps["session_db"] = {"ok": True}
    except Exception as exc:
        deps["session_db"] = {"ok": False, "error": type(exc).__name__}
    for name in ("chat", "hippocampus", "embedding"):
        deps[name] = _role(services, name)
    deps["checked_ms"] = round((time.perf_counter() - started) * 1e3, 1)
    return deps


@router.get("/healthz")
async def healthz(services: ServicesDep, response: Response) -> dict[str, Any]:
    deps = await asyncio.to_thread(_check, services)
    essential = deps["vector_store"]["ok"] and deps["session_db"]["ok"]
    status = (
        "ok" if essential and all(deps[r]["ok"] for r in ("chat", "hippocampus")) else "degraded"
    )
    if not deps["session_db"]["ok"]:
        response.status_code = 503
    return {"status": status, "dependencies": deps}
