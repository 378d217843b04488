"""The browser UI, served by the app itself: ``mount_ui(app)`` adds its pages and static files.

Pages (docs/ui.md): Chat ``/`` (with the memory panel), Memories ``/memories``,
Personas ``/personas``, Status ``/status``, and ``/login`` when API keys are set. Server
rendered jinja2 templates (``frontend/templates``) and htmx fragments; the reply streams
over SSE with htmx's SSE extension. No Node build step: htmx and the extension are
installed from npm into ``frontend/static/vendor`` by ``frontend/install-vendor.sh``
(called by ``install.sh``), pinned in ``frontend/package.json``.

Failure policy: when the vendor files are missing or are not the pinned versions, the
UI is not started: its pages answer 503 with the command that fixes it and an error is
logged once; the API is not affected.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles

from backend.web import ui_chat, ui_memories, ui_messages, ui_pages
from backend.web.ui_support import install_ui_handlers, make_templates

log = logging.getLogger(__name__)

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
# The files the pages load from static/vendor, by the npm package that ships them.
VENDOR_FILES = {"htmx.org": "htmx.min.js", "htmx-ext-sse": "htmx-ext-sse.js"}
MANIFEST = "manifest.json"  # written by install-vendor.sh: {package: installed version}
UI_PATHS = ("/", "/memories", "/personas", "/status", "/login")


def vendor_problem(frontend: Path = FRONTEND) -> str | None:
    """Why the UI cannot start (missing or stale vendor files), or ``None``."""
    vendor = frontend / "static" / "vendor"
    fix = f"run {frontend / 'install-vendor.sh'} (./install.sh runs it)"
    missing = [name for name in VENDOR_FILES.values() if not (vendor / name).is_file()]
    if missing:
        return f"the web UI's vendor files are missing ({', '.join(missing)} in {vendor}): {fix}"
    try:
        pinned = json.loads((frontend / "package.json").read_text())["dependencies"]
        installed = json.loads((vendor / MANIFEST).read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"cannot read the web UI's vendor manifest ({exc}): {fix}"
    stale = [
        f"{package} {installed.get(package)} (pinned {pinned.get(package)})"
        for package in VENDOR_FILES
        if installed.get(package) != pinned.get(package)
    ]
    if stale:
        return f"the web UI's vendor files are not the pinned versions: {', '.join(stale)}: {fix}"
    return None


def mount_ui(app: FastAPI, frontend: Path = FRONTEND) -> None:
    """Add the UI's routes, templates and static files to ``app`` (or, when its vendor
    files are missing, pages that say so)."""
    problem = vendor_problem(frontend)
    if problem is not None:
        log.error("not starting the web UI: %s", problem)

        async def unavailable() -> PlainTextResponse:
            return PlainTextResponse(f"The web UI is not available: {problem}\n", status_code=503)

        for path in UI_PATHS:
            app.add_api_route(path, unavailable, methods=["GET"], include_in_schema=False)
        return

    app.state.ui_templates = make_templates(frontend / "templates")

    install_ui_handlers(app)
    app.include_router(ui_chat.router)
    app.include_router(ui_messages.router)
    app.include_router(ui_memories.router)
    app.include_router(ui_pages.router)
    app.mount("/static", StaticFiles(directory=frontend / "static"), name="static")
