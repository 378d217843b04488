"""``create_app(settings, services=None)``: the FastAPI app, its services built in the lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.config import Settings
from backend.engine.maintenance import maintenance_loop
from backend.engine.outbox_replay import outbox_loop
from backend.engine.services import Services, build_services
from backend.engine.warm_up import warm_up
from backend.web import health, memories_api, nemo_api, openai_api, personas_api, sessions_api
from backend.web.errors import error_body, install_error_handlers
from backend.web.log_masking import install_log_masking
from backend.web.mcp_server import mount as mount_mcp
from backend.web.websocket import router as websocket_router

log = logging.getLogger(__name__)


class BodyLimit:
    """413 for request bodies over the configured limit (checked while reading, not trusted
    from Content-Length alone)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        seen = 0

        async def limited() -> dict:  # type: ignore[type-arg]
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._reject(send)

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


class _TooLarge(Exception):
    pass


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
        try:
            # The MCP endpoint's session manager (streamable HTTP) runs for the app's lifetime.
            async with app.state.mcp.run():
                yield
        finally:
            maintenance.cancel()
            replay.cancel()
            warming.cancel()
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
    # REST API routers (memories, sessions, personas) are included below this line.
    app.include_router(personas_api.router)
    app.include_router(memories_api.router)
    app.include_router(sessions_api.router)
    # WebSocket and MCP are included below this line.
    app.include_router(websocket_router)
    mount_mcp(app, settings.server.host)  # /mcp; its session manager runs in the lifespan
    app.add_middleware(BodyLimit, max_bytes=settings.server.max_body_bytes)
    from backend.web.ui import mount_ui  # the browser UI (pages, fragments, static files)

    mount_ui(app)
    return app
