"""A scripted OpenAI-compatible embeddings server on loopback, for adapter tests.

Real sockets, real HTTP/1.1 (keep-alive), standard library only::

    with FakeEmbeddingServer(dim=16) as server:
        server.enqueue("status:500", "ok")     # next two requests; then "ok" forever
        ... OpenAI(base_url=server.base_url) ...
        server.requests                        # recorded JSON bodies, in order

Behaviours: ``ok`` (vectors), ``status:NNN`` (an OpenAI-style error body),
``hang`` (read the request, answer nothing until the server stops), ``close``
(drop the connection without a response), ``zero`` (all-zero vectors), ``short``
(one vector fewer than inputs). Vectors are deterministic per text, deliberately
not unit length, and listed in reverse order (each with its right ``index``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np


def fake_vector(text: str, dim: int) -> np.ndarray:
    """The deterministic, non-normalised float32 vector the server returns for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return (3.0 * np.random.default_rng(seed).normal(size=dim) + 0.5).astype(np.float32)


class FakeEmbeddingServer:
    """``POST /v1/embeddings`` on 127.0.0.1 with a scripted queue of behaviours."""

    def __init__(self, *, dim: int = 16) -> None:
        self.dim = dim
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # lower-cased names
        self._script: deque[str] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = False  # server_close() joins handler threads
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def enqueue(self, *behaviours: str) -> None:
        """Script the next requests' behaviours; unscripted requests get ``ok``."""
        with self._lock:
            self._script.extend(behaviours)

    def start(self) -> FakeEmbeddingServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()  # wake hanging handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeEmbeddingServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- used by the handler ---------------------------------------------------

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> str:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self._script.popleft() if self._script else "ok"

    def _payload(self, body: dict[str, Any], behaviour: str) -> dict[str, Any]:
        inputs = body.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        dim = int(body.get("dimensions") or self.dim)
        vectors = [fake_vector(text, dim) for text in texts]
        if behaviour == "zero":
            vectors = [np.zeros(dim, dtype=np.float32) for _ in texts]
        if behaviour == "short":
            vectors = vectors[:-1]
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": (
                    base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                    if as_base64
                    else vector.tolist()
                ),
            }
            for index, vector in enumerate(vectors)
        ]
        return {
            "object": "list",
            "data": data[::-1],
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }


def _make_handler(server: FakeEmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 2.0  # idle keep-alive connections end, so stop() never waits long

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/embeddings":
                self._send(404, _error("not found", "invalid_request_error"))
                return
            body = json.loads(raw or b"{}")
            headers = {key.lower(): value for key, value in self.headers.items()}
            behaviour = server._next(body, headers)
            if behaviour == "hang":
                server._release.wait()
                self.close_connection = True
                return
            if behaviour == "close":
                self.close_connection = True
                return
            if behaviour.startswith("status:"):
                status = int(behaviour.split(":", 1)[1])
                self._send(status, _error(f"scripted {status}", "server_error"))
                return
            self._send(200, server._payload(body, behaviour))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("retry-after-ms", "1")  # SDK retries come back at once
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
