"""A scripted OpenAI-compatible HTTP server on loopback: real sockets, real SSE.

    with ScriptedOpenAIServer() as server:
        server.enqueue(Reply(chunks=["Hel", "lo"], first_token_delay_s=0.3))
        server.enqueue(Reply.error(500), times=2)
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        ...
        server.requests[-1].body["messages"]

It serves ``POST /v1/chat/completions`` (streaming, as ``data: {chunk}\\n\\n`` events then
``data: [DONE]``, and non-streaming) and ``GET /v1/models``. Each chat request takes the
next queued ``Reply`` (first in, first out), else ``server.default``. ``server.reject``
names request features answered with an error whatever the queue says (``"json_schema"``,
``"json_object"``, ``"json_object_schema"`` (a ``schema`` beside ``json_object``),
``"stream_options"``, ``"tools"``, or a sampling field by its name:
``"top_k"``, ``"seed"``, ...): a server that lacks them. The error is a 400 naming the
feature, or ``server.reject_status`` with ``server.reject_message`` when set (a server
that answers 500 in its own words). Every request is recorded (headers and JSON body)
in ``server.requests``.

Only the standard library: ``ThreadingHTTPServer`` in a daemon thread, HTTP/1.1 with
chunked transfer encoding for streams (so a dropped connection is visible as one).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call the server streams as fragments (``arguments`` split in two pieces)."""

    name: str
    arguments: str
    id: str = "call_1"


@dataclass(frozen=True)
class Reply:
    """What the server answers to one chat request.

    ``status`` other than 200 answers with an OpenAI error body (``error_message``) and,
    when ``retry_after_ms`` is set, a ``retry-after-ms`` header (the SDK honours it, which
    keeps retry tests fast). ``hang`` never answers (until the server stops); ``hold``
    answers only once that event is set (or the server stops); ``arrived`` is set when a
    request takes this reply (a test waits for it instead of polling ``requests``);
    ``drop_after`` closes the socket after that many content chunks; ``stall_after``
    stops sending (without closing) after that many content chunks; ``error_event_after``
    sends an OpenAI error object as an SSE event after that many, then ``[DONE]``. ``usage`` is sent
    when the client asks for it (``stream_options.include_usage``) and always in
    non-streaming replies; by default it counts one token per chunk.
    """

    chunks: Sequence[str] = ("Hello", " from", " the", " scripted", " server.")
    tool_calls: Sequence[ScriptedToolCall] = ()
    finish_reason: str | None = None
    first_token_delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    status: int = 200
    error_message: str = "scripted error"
    retry_after_ms: int | None = None
    hang: bool = False
    hold: threading.Event | None = None
    arrived: threading.Event | None = None
    drop_after: int | None = None
    stall_after: int | None = None
    error_event_after: int | None = None
    usage: tuple[int, int] | None = None

    @classmethod
    def error(
        cls, status: int, message: str = "scripted error", *, retry_after_ms: int | None = 1
    ) -> Reply:
        return cls(status=status, error_message=message, retry_after_ms=retry_after_ms)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the parsed JSON body, None without one
    raw_body: bytes = field(repr=False, default=b"")


class ScriptedOpenAIServer:
    """Use as a context manager; ``base_url`` ends in ``/v1`` (what the SDK wants)."""

    def __init__(
        self,
        *,
        default: Reply | None = None,
        models: Sequence[str] = ("scripted-model",),
        host: str = "127.0.0.1",
        port: int = 0,  # 0: any free port; a fixed one brings a stopped upstream back
    ) -> None:
        self.default = default or Reply()
        self.models = list(models)
        self.reject: set[str] = set()
        self.reject_status = 400
        self.reject_message: str | None = None  # None: "unsupported parameter: <feature>"
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.scripted = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging and stalled handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- scripting -------------------------------------------------------------------
    def enqueue(self, reply: Reply, *, times: int = 1) -> None:
        with self._lock:
            self._queue.extend([reply] * times)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST .../chat/completions`` requests, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    scripted: ScriptedOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- routing ---------------------------------------------------------------------
    def do_GET(self) -> None:
        scripted = self.server.scripted
        scripted._record(self._recorded(b""))
        if self.path.rstrip("/") == "/v1/models":
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                for m in scripted.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(404, "not found", "not_found")

    def do_POST(self) -> None:
        scripted = self.server.scripted
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        scripted._record(self._recorded(raw))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_error(404, "not found", "not_found")
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_error(400, "body is not JSON", "invalid_request_error")
            return
        rejected = _features(body) & scripted.reject
        if rejected:
            message = scripted.reject_message or f"unsupported parameter: {sorted(rejected)[0]}"
            # A 5xx is retried by the SDK: ask it to wait 1 ms, which keeps the tests fast.
            self._send_error(scripted.reject_status, message, headers={"retry-after-ms": "1"})
            return
        reply = scripted._next_reply()
        if reply.arrived is not None:
            reply.arrived.set()
        if reply.hang:
            scripted._stopping.wait()
            self.close_connection = True
            return
        while reply.hold is not None and not reply.hold.wait(0.05):
            if scripted._stopping.is_set():
                self.close_connection = True
                return
        if reply.status != 200:
            headers = {}
            if reply.retry_after_ms is not None:
                headers["retry-after-ms"] = str(reply.retry_after_ms)
            self._send_error(reply.status, reply.error_message, headers=headers)
            return
        if body.get("stream"):
            self._stream(body, reply)
        else:
            self._complete(body, reply)

    # -- replies ---------------------------------------------------------------------
    def _complete(self, body: dict[str, Any], reply: Reply) -> None:
        if reply.first_token_delay_s:
            time.sleep(reply.first_token_delay_s)
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.chunks)}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ]
        prompt, completion = _usage(reply)
        self._send_json(
            200,
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
                "usage": _usage_body(prompt, completion),
            },
        )

    def _stream(self, body: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", ""),
        }
        stopping = self.server.scripted._stopping
        try:
            self._event({**base, "choices": [_choice({"role": "assistant", "content": ""})]})
            deltas = list(_content_deltas(reply))
            for position in range(len(deltas) + 1):
                if position == reply.error_event_after:
                    error = {"message": reply.error_message, "type": "server_error", "code": 502}
                    self._event({"error": error})
                    self._write_chunk(b"data: [DONE]\n\n")
                    self._write_chunk(b"")
                    return
                if position in (reply.drop_after, reply.stall_after):
                    if position == reply.stall_after:
                        stopping.wait()
                    self._drop()
                    return
                if position == len(deltas):
                    break
                pause = reply.first_token_delay_s if position == 0 else reply.chunk_delay_s
                if pause and stopping.wait(pause):
                    self._drop()
                    return
                self._event({**base, "choices": [_choice(deltas[position])]})
            self._event({**base, "choices": [_choice({}, _finish(reply))]})
            if (body.get("stream_options") or {}).get("include_usage"):
                prompt, completion = _usage(reply)
                self._event({**base, "choices": [], "usage": _usage_body(prompt, completion)})
            self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- plumbing --------------------------------------------------------------------
    def _event(self, payload: dict[str, Any]) -> None:
        self._write_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error(
        self,
        status: int,
        message: str,
        kind: str = "scripted_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        error = {"error": {"message": message, "type": kind, "code": str(status)}}
        self._send_json(status, error, headers)

    def _recorded(self, raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        return RecordedRequest(self.command, self.path, headers, body, raw)


def _features(body: dict[str, Any]) -> set[str]:
    found = set()
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") in (
        "json_schema",
        "json_object",
    ):
        found.add(str(response_format["type"]))
        if "schema" in response_format and response_format["type"] == "json_object":
            found.add("json_object_schema")  # llama-cpp-python's schema beside JSON mode
    if "stream_options" in body:
        found.add("stream_options")
    if body.get("tools"):
        found.add("tools")
    found.update(name for name in _SAMPLING if name in body)
    return found


_SAMPLING = ("top_k", "min_p", "seed", "logit_bias", "top_p", "frequency_penalty")


def _content_deltas(reply: Reply) -> Iterator[dict[str, Any]]:
    for text in reply.chunks:
        yield {"content": text}
    for index, call in enumerate(reply.tool_calls):
        half = len(call.arguments) // 2
        head = {"index": index, "id": call.id, "type": "function"}
        yield {"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}
        for piece in (call.arguments[:half], call.arguments[half:]):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "finish_reason": finish_reason}


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(reply: Reply) -> tuple[int, int]:
    return reply.usage or (7, len(reply.chunks) + len(reply.tool_calls))


def _usage_body(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
