"""``limbic-memory mcp`` (stdio) through the server (docs/reliability.md, "One owner per
data directory"): a JSON-RPC relay to the server's own MCP endpoint (``/mcp``), one line
from stdin POSTed there and its answer written back as one line."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

import httpx

from backend.cli.remote_http import error_message, http_client, persona_of, sse_data, unreachable

_PARSE_ERROR = -32700
_INTERNAL_ERROR = -32603


def check_persona(url: str, headers: dict[str, str], persona: str | None) -> None:
    """Raises ``RemoteError`` (code 2) when the server does not know ``persona``."""
    if persona is None:
        return
    with http_client(url, headers, 30.0) as client:
        try:
            persona_of(client, persona)
        except httpx.HTTPError as exc:
            raise unreachable(url, exc) from None


def mcp_relay(
    url: str,
    headers: dict[str, str],
    persona: str | None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
) -> int:
    """The MCP stdio transport relayed to the server's ``/mcp``: one JSON-RPC message per
    line in, its answer (if any) as one line out, until stdin closes."""
    source = stdin or sys.stdin.buffer
    sink = stdout or sys.stdout.buffer
    base = {
        **headers,
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if persona:
        base["X-Persona"] = persona
    protocol: str | None = None

    def write(message: Any) -> None:
        sink.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        sink.flush()

    with http_client(url, base, 300.0) as client:
        for raw in source:
            line = raw.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                write(_rpc_error(None, _PARSE_ERROR, "Parse error"))
                continue
            request_id = _request_id(message)
            extra = {"mcp-protocol-version": protocol} if protocol else {}
            try:
                r = client.post("/mcp", content=line, headers=extra)
            except httpx.HTTPError as exc:
                if request_id is not None:
                    write(_rpc_error(request_id, _INTERNAL_ERROR, str(unreachable(url, exc))))
                continue
            for answer in _answers(r):
                if isinstance(answer, dict) and "jsonrpc" in answer:
                    if r.status_code >= 400 and request_id is not None:
                        answer["id"] = request_id  # the SDK's transport errors carry no id
                    result = answer.get("result")
                    if isinstance(result, dict) and "protocolVersion" in result:
                        protocol = str(result["protocolVersion"])
                    write(answer)
                elif request_id is not None:  # the app's own error body (401, 404, 503)
                    write(_rpc_error(request_id, _INTERNAL_ERROR, error_message(r)))
    return 0


def _request_id(message: Any) -> Any:
    if isinstance(message, dict) and "method" in message and "id" in message:
        return message["id"]
    return None


def _rpc_error(request_id: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def _answers(response: httpx.Response) -> list[Any]:
    if not response.content:
        return []  # 202: a notification or a response, accepted
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return [json.loads(data) for data in sse_data(response.text.splitlines()) if data]
    try:
        body = response.json()
    except ValueError:
        return [{"error": response.text[:300]}]
    return body if isinstance(body, list) else [body]
