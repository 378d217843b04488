"""The memory tools for outside agents, as an MCP server (README.md, "Ways in").

Four tools over ONE namespace (user, persona): ``memory_recall(query, k=5)``,
``memory_store(content, category="general", importance=0.6)`` (through the save gate, as
the chat model's own tool: confidence 0.9), ``memory_forget(memory_id)`` and
``memory_people()`` (the people and pets the memories name, each with its notes:
``backend.memory.entities``). Built with the
official ``mcp`` SDK (2.x: ``MCPServer``, formerly ``FastMCP``).

Two transports:

- streamable HTTP at ``/mcp`` in the web app (``mount``): stateless, JSON responses. Each
  request names its namespace: the user from ``Authorization: Bearer <key>`` (401 without
  a valid key when keys are configured; ``local`` without keys) and the persona from
  ``?persona=`` or ``X-Persona`` (the default persona otherwise; unknown → 404). Every
  request is authenticated on its own, so a session can never cross namespaces. The SDK's
  DNS-rebinding protection (Host/Origin checks) is on when ``server.host`` is loopback.
- stdio (``serve_stdio``, the ``limbic-memory mcp`` command): the namespace is fixed when
  the process starts.

Failure policy: bad arguments are refused by the SDK's validation (an ``isError`` result);
store trouble surfaces as an ``isError`` result, never a dropped connection; forgetting an
unknown id is not an error (``forgotten: false``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from backend.longterm.memory import LongTermMemory
from backend.memory.entities import Entity
from backend.memory.types import CATEGORIES, Candidate, Memory, Namespace
from backend.personas import UnknownPersona
from backend.storable_text import unstorable_reason
from backend.web.deps import user_for_authorization
from backend.web.entities_api import entities_with_facts, live_memories
from backend.web.errors import error_body

log = logging.getLogger(__name__)

SCOPE_KEY = "limbic.mcp"  # the request's MemoryScope, put in the ASGI scope by MCPEndpoint
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """What one tool call may touch: one namespace of one long-term memory."""

    long_term: LongTermMemory
    namespace: Namespace


ScopeResolver = Callable[[Context], MemoryScope]


class RecalledNote(BaseModel):
    id: str
    content: str


class RecalledMemory(BaseModel):
    id: str
    content: str
    category: str
    date: str  # the day it was stored, ISO 8601
    score: float  # the activation score (0..1) this query gave it


class StoreResult(BaseModel):
    result: Literal["write", "reinforce", "supersede", "reject"]
    reason: str
    id: str | None = None  # the memory written or reinforced; None when rejected


class ForgetResult(BaseModel):
    id: str
    forgotten: bool


class Person(BaseModel):
    name: str | None  # None: known only by relation ("the physio")
    aliases: list[str]  # its other names: merged ones, the user's ("Tommy", "奶奶")
    relation: str  # to the user: sister, dog, physio…
    kind: Literal["person", "pet"]
    notes: list[RecalledNote]


def build_mcp_server(resolve: ScopeResolver) -> MCPServer:
    """The MCP server with the four memory tools; ``resolve`` names each call's namespace."""
    server = _quiet_mcp_server(
        "limbic-memory",
        instructions=(
            "Long-term memory of one user as seen by one persona. Recall notes before "
            "answering about the user; store lasting facts as one standalone sentence each."
        ),
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def memory_recall(
        ctx: Context,
        query: Annotated[str, Field(min_length=1, max_length=2000, description="what to look for")],
        k: Annotated[int, Field(ge=1, le=20, description="how many notes at most")] = 5,
    ) -> list[RecalledMemory]:
        """Search the long-term memory of this user for notes about a topic."""
        scope = resolve(ctx)
        policy = replace(scope.long_term.activation.retrieval, k=k)
        activation = await asyncio.to_thread(
            scope.long_term.activate, scope.namespace, query, policy=policy
        )
        return [
            RecalledMemory(
                id=item.memory.id,
                content=item.memory.content,
                category=item.memory.category,
                date=item.memory.created_at.date().isoformat(),
                score=round(item.score.final, 4),
            )
            for item in activation.retrieval.items
        ]

    @server.tool()
    async def memory_store(
        ctx: Context,
        content: Annotated[
            str, Field(min_length=1, max_length=1000, description="one standalone sentence")
        ],
        category: Annotated[str, Field(description=f"one of: {', '.join(CATEGORIES)}")] = (
            "general"
        ),
        importance: Annotated[float, Field(ge=0, le=1)] = 0.6,
    ) -> StoreResult:
        """Remember a lasting fact about the user (the save gate may merge or reject it)."""
        reason = unstorable_reason(content)
        if reason is not None:
            raise ValueError(f"content {reason}")
        scope = resolve(ctx)
        candidate = Candidate(
            content=content,
            category=category,
            importance=importance,
            confidence=0.9,  # stored on purpose, like the chat model's own memory_store
        )
        outcome = (await asyncio.to_thread(scope.long_term.write, scope.namespace, [candidate]))[0]
        return StoreResult(result=outcome.action, reason=outcome.reason, id=outcome.memory_id)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def memory_forget(
        ctx: Context, memory_id: Annotated[str, Field(min_length=1, max_length=200)]
    ) -> ForgetResult:
        """Delete one memory by its id (as returned by memory_recall or memory_store)."""
        scope = resolve(ctx)
        removed = await asyncio.to_thread(scope.long_term.delete, scope.namespace, memory_id)
        return ForgetResult(id=memory_id, forgotten=removed)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def memory_people(ctx: Context) -> list[Person]:
        """The people and pets of the user's life that the memory knows, each with the
        notes that name them (a relation without a name: "the physio") and its other
        names."""
        scope = resolve(ctx)
        return [
            Person(
                name=entity.name,
                aliases=list(entity.aliases),
                relation=entity.relation,
                kind=entity.kind,
                notes=[RecalledNote(id=m.id, content=m.content) for m in facts],
            )
            for entity, facts in await asyncio.to_thread(_people, scope)
        ]

    return server


def _people(scope: MemoryScope) -> list[tuple[Entity, list[Memory]]]:
    """The entity table with the user's edits (the session store's, as recall reads them)."""
    memories = live_memories(scope.long_term, scope.namespace)
    source = scope.long_term.entity_edits
    return entities_with_facts(memories, () if source is None else source(scope.namespace))


def _quiet_mcp_server(name: str, **options: Any) -> MCPServer:
    """``MCPServer(...)`` without its side effect on logging: its constructor calls
    ``logging.basicConfig`` (a Rich handler at INFO on the root logger) when the root
    logger has no handler yet. A placeholder handler makes that call a no-op."""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        return MCPServer(name, log_level="WARNING", **options)
    finally:
        root.removeHandler(placeholder)


# --- streamable HTTP, in the web app ------------------------------------------------------


def _scope_of_request(ctx: Context) -> MemoryScope:
    request = ctx.request_context.request
    scope = getattr(request, "scope", None) or {}
    found = scope.get(SCOPE_KEY)
    if not isinstance(found, MemoryScope):  # only reachable if mounted without MCPEndpoint
        raise RuntimeError("no memory namespace for this request")
    return found


class MCPEndpoint:
    """The ASGI app at ``/mcp``: authenticates, names the namespace, hands over to the SDK."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.server = build_mcp_server(_scope_of_request)
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the SDK's session manager (its task group) for the app's lifetime. A manager
        runs once only, so each run builds a fresh one."""
        self.server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            host=self.host,  # loopback → Host/Origin checks against DNS rebinding
        )
        manager = self.server.session_manager
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope)
        services = request.app.state.services
        user = user_for_authorization(services, request.headers.get("authorization"))
        if user is None:
            await _json_error(
                send,
                401,
                "missing or invalid API key (Authorization: Bearer <key>)",
                "invalid_api_key",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        wanted = request.query_params.get("persona") or request.headers.get("x-persona")
        try:
            persona = services.personas.resolve(wanted)
        except UnknownPersona:
            await _json_error(send, 404, f"unknown persona {wanted!r}", "persona_not_found")
            return
        if self._manager is None:
            await _json_error(send, 503, "the MCP server is not running", "unavailable")
            return
        memory = MemoryScope(services.long_term, Namespace(user, persona.id))
        await self._manager.handle_request({**scope, SCOPE_KEY: memory}, receive, send)


async def _json_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps(error_body(status, message, code)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


def mount(app: FastAPI, host: str) -> MCPEndpoint:
    """Route ``/mcp`` to a new endpoint; the app's lifespan must enter ``endpoint.run()``
    (``app.state.mcp``)."""
    endpoint = MCPEndpoint(host)
    app.add_route("/mcp", endpoint, include_in_schema=False)  # an ASGI app: every method
    app.state.mcp = endpoint
    return endpoint


# --- stdio, the ``limbic-memory mcp`` command ---------------------------------------------


async def serve_stdio(long_term: LongTermMemory, namespace: Namespace) -> None:
    """Serve the tools for one namespace over stdin/stdout until the client hangs up."""
    memory = MemoryScope(long_term, namespace)
    await build_mcp_server(lambda _ctx: memory).run_stdio_async()
