"""The personas page (with importing a character card and resetting a persona's memories),
the status page, and signing in and out of the UI.

Failure policy: the status page never calls a model (the same TCP probes as
``/healthz``) and shows a dependency that fails as down rather than failing itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from backend.engine.services import Services
from backend.memory.types import Namespace
from backend.persona_import import MAX_FILE_BYTES, CardImportError, PersonaExists
from backend.stores.vector_port import VectorStoreUnavailable
from backend.web import health
from backend.web.api_keys import user_for_key
from backend.web.personas_api import forget_persona, install_persona
from backend.web.ui_support import (
    COOKIE,
    COOKIE_MAX_AGE_S,
    CrossSiteRequest,
    UiError,
    UiReader,
    UiWriter,
    redirect,
    render,
    safe_next,
    same_origin,
    services_of,
)

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

MAX_KEY = 512


def _memory_counts(services: Services, user: str, persona_id: str) -> dict[str, int]:
    ns = Namespace(user, persona_id)
    store = services.long_term.store
    try:
        total = store.count(ns)
        live = store.count(ns, include_superseded=False)
    except Exception as exc:  # shown as unknown: the status page must not fail
        log.warning("status: counting memories of %s failed: %s", ns.key, type(exc).__name__)
        return {"total": -1, "live": -1, "sessions": -1}
    sessions = len(services.sessions.list_sessions(user, persona_id, limit=100_000))
    return {"total": total, "live": live, "sessions": sessions}


@router.get("/personas", response_class=HTMLResponse)
async def personas_page(request: Request, auth: UiReader) -> Response:
    services = services_of(request)
    personas = list(services.personas)
    counts = await asyncio.gather(
        *(asyncio.to_thread(_memory_counts, services, auth.user, p.id) for p in personas)
    )
    context = {
        "items": list(zip(personas, counts, strict=True)),
        "default_persona": services.personas.default.id,
    }
    return render(request, "personas.html", context)


@router.post("/ui/personas/import", response_class=HTMLResponse)
async def import_persona(
    request: Request,
    _auth: UiWriter,
    file: Annotated[UploadFile, File()],
    overwrite: Annotated[str, Form(max_length=8)] = "",
) -> Response:
    services = services_of(request)
    data = await file.read(MAX_FILE_BYTES + 1)
    name = (file.filename or "the file").rsplit("/", 1)[-1][:100]
    try:
        persona = await asyncio.to_thread(
            install_persona, services, data, name, overwrite=bool(overwrite)
        )
    except PersonaExists:
        raise UiError(
            409, 'A persona with this id already exists. Tick "replace" to overwrite it.'
        ) from None
    except CardImportError as exc:
        raise UiError(400, f"This file cannot be imported: {exc}") from None
    except OSError:
        log.exception("ui: persona import could not write the card")
        raise UiError(500, "The persona directory cannot be written.") from None
    context = {"imported": persona, "filename": name}
    return render(request, "_persona_result.html", context)


@router.post("/ui/personas/{persona_id}/reset", response_class=HTMLResponse)
async def reset_persona(request: Request, persona_id: str, auth: UiWriter) -> Response:
    services = services_of(request)
    persona = services.personas.get(persona_id)
    if persona is None:
        raise UiError(404, "There is no such persona.")
    try:
        count = await asyncio.to_thread(forget_persona, services, auth.user, persona.id)
    except VectorStoreUnavailable:
        raise UiError(503, "The memory store is unavailable; nothing was forgotten.") from None
    context = {"reset": persona, "forgotten": count}
    return render(request, "_persona_result.html", context)


def _where(url: str | None) -> str:
    """A provider URL without credentials, query or fragment."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _roles(services: Services) -> list[dict[str, Any]]:
    settings = services.settings
    live_models = {
        "chat": getattr(services.chat, "model", None),
        "hippocampus": getattr(services.hippocampus, "model", None),
        "embedding": None if services.embedder is None else services.embedder.model,
    }
    roles = []
    for name, purpose in (
        ("chat", "writes the replies"),
        ("hippocampus", "summarises the conversation and proposes memories"),
        ("embedding", "turns memories into vectors for recall"),
    ):
        role: Any = getattr(settings, name)
        remote = role.provider == "openai"
        roles.append(
            {
                "name": name,
                "purpose": purpose,
                "provider": "OpenAI-compatible" if remote else "embedded (on this machine)",
                "model": (role.model if remote else None) or live_models[name] or "default",
                "where": _where(role.base_url) if remote else "",
            }
        )
    return roles


def _memory_row(memory: dict[str, Any]) -> dict[str, Any]:
    """The health list's line for memory forming and saving (``MemoryHealth.report``)."""
    row: dict[str, Any] = {"name": "Memory saving", "ok": memory["ok"]}
    if not memory["ok"]:
        row["down"] = memory["warning"]
    if memory.get("contract_switched"):
        row["note"] = memory["contract_switched"]
    return row


@router.get("/status", response_class=HTMLResponse)
async def status_page(request: Request, auth: UiReader) -> Response:
    services = services_of(request)
    checks = await asyncio.to_thread(health.check_dependencies, services)
    dependencies = [
        {"name": "Session database", **checks["session_db"]},
        {"name": "Long-term memory store", **checks["vector_store"]},
        *({"name": f"{role} model", **checks[role]} for role in ("chat", "hippocampus")),
        {"name": "embedding model", **checks["embedding"]},
        _memory_row(checks["memory"]),
    ]
    personas = list(services.personas)
    counts = await asyncio.gather(
        *(asyncio.to_thread(_memory_counts, services, auth.user, p.id) for p in personas)
    )
    context = {
        "roles": _roles(services),
        "dependencies": dependencies,
        "checked_ms": checks.get("checked_ms"),
        "counts": list(zip(personas, counts, strict=True)),
        "memory_mode": services.settings.memory.mode,
        "store_kind": type(services.store).__name__,
        "user": auth.user,
        "version": request.app.version,
    }
    return render(request, "status.html", context)


# --- signing in ----------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str = "/") -> Response:
    if not services_of(request).settings.server.api_keys:
        return RedirectResponse(safe_next(next), status_code=303)
    return render(request, "login.html", {"next": safe_next(next), "error": None})


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    key: Annotated[str, Form(max_length=MAX_KEY)] = "",
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    server = services_of(request).settings.server
    target = safe_next(next)
    if not same_origin(request):
        raise CrossSiteRequest
    if not server.api_keys:
        return RedirectResponse(target, status_code=303)
    user = user_for_key(server.api_keys, key.strip()) if key.strip() else None
    if user is None:
        log.info("ui: sign-in refused")
        context = {"next": target, "error": "That key is not valid."}
        return render(request, "login.html", context, status=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        key.strip(),
        max_age=COOKIE_MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    log.info("ui: user %s signed in", user)
    return response


@router.post("/logout")
async def logout(request: Request, _auth: UiWriter) -> Response:
    response = redirect(request, "/login")
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
