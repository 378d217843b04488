"""llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``, the
``[server]`` extra from PyPI), started on a loopback port: the real thing a user points a
role at when the README says "a llama.cpp server" (issue 26).

It reuses the llama-cpp-python build the app already has, and serves the SmolLM2 GGUF
that ``./install.sh --dev`` installs. Under CI (``LIMBIC_REQUIRE_REAL_MODEL=1``) a missing
server extra or model fails instead of skipping.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support import embedded_model_missing, skip_or_fail

ALIAS = "smollm2"
START_TIMEOUT_S = 120.0


def server_missing() -> str:
    """Why the server cannot run here, or '' when it can."""
    missing = embedded_model_missing()
    if missing:
        return missing
    if importlib.util.find_spec("llama_cpp.server") is None or any(
        importlib.util.find_spec(name) is None for name in ("starlette_context", "sse_starlette")
    ):
        return "llama-cpp-python's server extra is not installed (./install.sh --dev installs it)"
    return ""


def require_server() -> None:
    missing = server_missing()
    if missing:
        skip_or_fail(missing, "LIMBIC_REQUIRE_REAL_MODEL")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def llama_cpp_server(
    log: Path, *, model: Path | None = None, alias: str = ALIAS, chat_format: str = "chatml"
) -> Iterator[str]:
    """The server's base URL (``.../v1``) while it runs: ``model`` (SmolLM2 by default)
    served as ``alias``, with ``chat_format`` (``chatml-function-calling`` for tools)."""
    from backend.llm.llama_model import smollm2_gguf_path

    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model or smollm2_gguf_path()), "--model_alias", alias,
        "--chat_format", chat_format, "--n_ctx", "4096", "--n_threads", "2",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
