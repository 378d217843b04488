"""The app for an in-process demo: built from the config with a fresh data directory and
a fresh user, and served on a free loopback port in a thread."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backend.cli.demo_replay import DemoError


def _describe_role(role: Any, name: str) -> str:
    if role.provider == "embedded":
        path = getattr(role, "model_path", None)
        if path is not None:
            return f"embedded {Path(path).name}"
        from backend.llm import presets

        return f"embedded {presets.get(role.model or presets.default_preset(name)).model}"
    return f"{role.model} at {role.base_url}"


def describe_models(settings: Any) -> str:
    return (
        f"chat: {_describe_role(settings.chat, 'chat')}; "
        f"hippocampus: {_describe_role(settings.hippocampus, 'hippocampus')}"
    )


@contextmanager
def in_process_app(settings: Any, data_dir: Path | None) -> Iterator[tuple[str, str]]:
    """The app on a free loopback port in a thread → (base URL, API key of a fresh user).

    The store lives in ``data_dir`` (a temporary directory, removed afterwards, when None);
    the API key is the only one the app accepts, for a fresh user id, so memory starts
    empty even in a data directory that already has memories.
    """
    import socket

    import uvicorn

    from backend.engine.services import StartupError, build_services
    from backend.web.app import create_app

    temporary = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="limbic-demo-")) if temporary else data_dir
    assert directory is not None
    key = "demo-" + secrets.token_urlsafe(18)
    user = f"demo-{secrets.token_hex(4)}"
    storage = settings.storage.model_copy(
        update={"data_dir": directory, "sessions_db": directory / "sessions.sqlite3"}
    )
    server_settings = settings.server.model_copy(update={"api_keys": {key: user}})
    settings = settings.model_copy(update={"storage": storage, "server": server_settings})
    try:
        try:
            services = build_services(settings, command="demo")
        except StartupError as exc:
            raise DemoError(f"the app did not start: {exc}") from None
        app = create_app(settings, services, own_services=True)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=port,
                log_level="warning",
                ws="websockets-sansio",
                timeout_graceful_shutdown=30,
            )
        )
        thread = threading.Thread(target=server.run, name="limbic-demo-app", daemon=True)
        thread.start()
        deadline = time.monotonic() + 300
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                server.should_exit = True
                raise DemoError("the app did not start (see the log above)")
            time.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}", key
        finally:
            server.should_exit = True
            thread.join(timeout=120)
    finally:
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)
