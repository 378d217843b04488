"""``GET /healthz``: fast, never calls a model (docs/api.md, Health).

``vector_store.needs_repair: true`` (with ``unreadable``: how many records) appears once a read
met records the store could not read (tolerant reads, ``backend.stores.chroma_store``);
the store still answers with the rest, so it does not make the status ``degraded``: run
``limbic-memory doctor`` (docs/reliability.md).

``embedding`` names the model that embeds now and, after the embedder was changed,
``reembedding``: the background re-embedding's progress (``backend.longterm.reembed``),
or a ``note`` saying why the store stays on the old model.

``memory`` is whether memories are being formed and saved (``backend.engine.memory_health``):
``ok: false`` with a ``warning`` in words once a part failed several times in a row (the
hippocampus, the store's writes, the embedder), which makes the status ``degraded``.

``reranker`` is whether activation's reranking stage runs (``on``, its ``model``, its recent
``ms_per_pair`` and the ``pairs_a_turn`` that gives within ``memory.rerank_budget_ms``) or
why not (``off``: turned off, or its model not installed: ``./install.sh`` installs it).
The app ranks without it, so it never makes the status ``degraded``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Response

from backend.engine.services import Services
from backend.llm.port import PromptCache
from backend.memory.types import Namespace
from backend.web.deps import ServicesDep

router = APIRouter(tags=["health"])

PROBE_TIMEOUT_S = 0.5
STORE_TIMEOUT_S = 2.0  # a healthy store counts in milliseconds; 2 s is clearly not healthy
_probe_pool: concurrent.futures.ThreadPoolExecutor | None = None
_probe_guard = threading.Lock()
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
        model = getattr(services, name, None)  # the embedder has no prompt cache
        if isinstance(model, PromptCache):  # warm: loaded, shared prompt prefix read
            return {"provider": "embedded", "ok": True, "warm": model.primed}
        return {"provider": "embedded", "ok": True}
    return {"provider": "openai", "model": role.model, "ok": _tcp_reachable(role.base_url)}


def _store_probe() -> concurrent.futures.ThreadPoolExecutor:
    """Two threads for the store check, made on first use (a hung one times out)."""
    global _probe_pool
    with _probe_guard:
        if _probe_pool is None:
            _probe_pool = concurrent.futures.ThreadPoolExecutor(2, "health-store")
        return _probe_pool


def _outbox(services: Services) -> dict[str, Any]:
    """Long-term writes waiting for the store (``queued``) and parked ones (``parked``)."""
    outbox = services.long_term.outbox
    if outbox is None:
        return {}
    try:
        queued, parked = outbox.counts()
    except Exception as exc:
        return {"outbox_error": type(exc).__name__}
    return {"queued": queued, "parked": parked}


def _repair_state(store: object) -> dict[str, Any]:
    """The store's tolerant-read state (``needs_repair``, ``unreadable``: Chroma's
    ``repair_state``), looked up through the wrappers; ``{}`` for a store without one and
    while nothing needs repair (the healthy answer stays as it was)."""
    for _ in range(8):  # wrappers: ``inner`` (forwarding stores), ``_store`` (lazy)
        state = getattr(type(store), "repair_state", None)
        if callable(state):
            try:
                found = dict(state(store))
            except Exception:  # the health check never fails on its extras
                return {}
            return found if found.get("needs_repair") else {}
        attributes = getattr(store, "__dict__", {})
        store = attributes.get("inner", attributes.get("_store"))
        if store is None:
            return {}
    return {}


def _reranker(services: Services) -> dict[str, Any]:
    """Activation's reranking stage: on with its model, or off and why (optional: ``ok``)."""
    long_term = services.long_term
    reranker = long_term.reranker
    if reranker is not None:
        # How fast it reads here, and how many pairs a turn that allows (None: not yet
        # timed); docs/configuration.md, ``rerank_budget_ms``.
        pace = long_term.rerank_pace.ms_per_pair()
        wanted = long_term.activation.retrieval.rerank_n
        pairs = long_term.rerank_pace.pairs(wanted, long_term.activation.rerank_budget_ms)
        return {
            "ok": True, "on": True, "model": reranker.model,
            "ms_per_pair": None if pace is None else round(pace, 2),
            "pairs_a_turn": pairs,
        }  # fmt: skip
    return {"ok": True, "on": False, "off": services.reranker_off or "no reranker"}


def check_dependencies(services: Services) -> dict[str, Any]:
    """Each dependency's state (the stores, the embedder, the models), for /healthz and the
    status page."""
    deps: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        # A hung store (a stopped server) would hold the check for the client's whole
        # timeout: give it STORE_TIMEOUT_S in a worker thread and call it down after that.
        _store_probe().submit(services.store.count, _HEALTH_NS).result(STORE_TIMEOUT_S)
        deps["vector_store"] = {"ok": True, "kind": type(services.store).__name__}
    except concurrent.futures.TimeoutError:
        deps["vector_store"] = {"ok": False, "error": "timeout"}
    except Exception as exc:
        deps["vector_store"] = {"ok": False, "error": type(exc).__name__}
    deps["vector_store"].update(_repair_state(services.store))
    deps["vector_store"].update(_outbox(services))
    try:
        services.sessions.list_sessions("__health__", limit=1)
        deps["session_db"] = {"ok": True}
    except Exception as exc:
        deps["session_db"] = {"ok": False, "error": type(exc).__name__}
    for name in ("chat", "hippocampus", "embedding"):
        deps[name] = _role(services, name)
    deps["reranker"] = _reranker(services)
    if services.embedding is not None:  # the model, and a re-embedding's progress
        deps["embedding"].update(services.embedding.status())
    # Whether memories are being formed and saved: the recent outcomes, not a probe (a
    # server can be up and turn every hippocampus request down).
    deps["memory"] = services.engine.memory_health.report()
    deps["checked_ms"] = round((time.perf_counter() - started) * 1e3, 1)
    return deps


@router.get("/healthz")
async def healthz(services: ServicesDep, response: Response) -> dict[str, Any]:
    deps = await asyncio.to_thread(check_dependencies, services)
    essential = deps["vector_store"]["ok"] and deps["session_db"]["ok"]
    working = all(deps[part]["ok"] for part in ("chat", "hippocampus", "memory"))
    status = "ok" if essential and working else "degraded"
    if not deps["session_db"]["ok"]:
        response.status_code = 503
    return {"status": status, "dependencies": deps}
