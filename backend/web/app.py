"""``create_app(settings, services=None)``: the FastAPI app, its services built in the lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.config import Settings
from backend.engine.maintenance import maintenance_loop
from backend.engine.services import Services, build_services
from backend.engine.warm_up import warm_up
from backend.longterm.outbox_replay import outbox_loop
from backend.longterm.reembed import reembed_loop
from backend.web import (
    entities_api,
    health,
    memories_api,
    nemo_api,
    openai_api,
    personas_api,
    sessions_api,
)
from backend.web.errors import error_body, install_error_handlers
from backend.web.log_masking import install_log_masking
from backend.web.mcp_server import mount as mount_mcp
from backend.web.websocket import router as websocket_router

log = logging.getLogger(__name__)


class BodyLimit:
    """413 for request bodies over the configured limit, checked while reading (a declared
    ``Content-Length`` is not trusted alone, and a chunked body has none).

    The body is read here, up to the limit, before the app sees it. An oversized one is
    read on to its end (at most ``DRAIN_BYTES``) and discarded before the 413 is sent: a
    client still sending when the server answers and closes would otherwise get a
    connection reset instead of the 413. Past ``DRAIN_BYTES`` the connection is closed
    after the 413 (a client sending that much at a server that refused it is not waited
    for)."""

    DRAIN_BYTES = 64 * 1024 * 1024

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        too_large = declared is not None and declared.isdigit() and int(declared) > self.max_bytes
        chunks: list[bytes] = []
        seen = 0
        more = not too_large
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nothing to answer
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            more = bool(message.get("more_body", False))
            if seen > self.max_bytes:
                too_large = True
                break
            chunks.append(chunk)
        if too_large:
            if more or declared is not None:
                await self._drain(receive, seen)
            await self._reject(send)
            return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # http.disconnect, when it comes

        await self.app(scope, replay, send)

    async def _drain(self, receive: Receive, seen: int) -> None:
        """Read the rest of an oversized body (bounded), so the client reads the 413."""
        while seen <= self.DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _reject(self, send: Send) -> None:
        import json

        body = json.dumps(
            error_body(413, f"request body larger than {self.max_bytes} bytes", "request_too_large")
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def create_app(
    settings: Settings, services: Services | None = None, *, own_services: bool | None = None
) -> FastAPI:
    """The app. Without ``services`` the real ones are built at startup; services the app
    owns (built here, or handed over with ``own_services=True``) are closed at shutdown,
    after in-flight merges finish. Tests pass their own and keep them."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = services is None if own_services is None else own_services
        app.state.services = services or await asyncio.to_thread(build_services, settings)
        svc = app.state.services
        maintenance = asyncio.ensure_future(
            maintenance_loop(
                svc.long_term,
                settings.memory.decay_interval_hours,
                jobs=svc.sessions.db,  # one pass per cluster
            )
        )
        # Writes queued while the vector store was down (also those of an earlier run).
        replay = asyncio.ensure_future(outbox_loop(svc.long_term))
        # Local models load and read the shared prompt prefix now, not on the first turn.
        warming = asyncio.ensure_future(warm_up(svc.engine))
        # A changed embedder re-embeds the store in the background (embedding_switch).
        job = None if svc.embedding is None else svc.embedding.job
        reembedding = None if job is None else asyncio.ensure_future(reembed_loop(job))
        try:
            # The MCP endpoint's session manager (streamable HTTP) runs for the app's lifetime.
            async with app.state.mcp.run():
                yield
        finally:
            maintenance.cancel()
            replay.cancel()
            warming.cancel()
            if reembedding is not None:
                reembedding.cancel()  # stops at its next batch; the next start resumes
            await asyncio.gather(replay, return_exceptions=True)  # its pass in flight ends
            if owned:
                await app.state.services.aclose()
            else:
                await app.state.services.engine.drain()

    app = FastAPI(
        title="Limbic Memory",
        summary="A chat companion with a brain-inspired memory; OpenAI-compatible API.",
        version="0.1.0",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    install_log_masking()
    app.include_router(health.router)
    app.include_router(openai_api.router)
    app.include_router(nemo_api.router)  # /chat, /generate, /generate/stream (NeMo UI)
    app.include_router(personas_api.router)
    app.include_router(memories_api.router)
    app.include_router(entities_api.router)
    app.include_router(sessions_api.router)
    app.include_router(websocket_router)
    mount_mcp(app, settings.server.host)  # /mcp; its session manager runs in the lifespan
    app.add_middleware(BodyLimit, max_bytes=settings.server.max_body_bytes)
    from backend.web.ui import mount_ui  # the browser UI (pages, fragments, static files)

    mount_ui(app)
    return app
