"""An oversized request body gets its 413 even while the client is still sending it: the
server reads the rest (bounded) instead of closing on it, so the client never sees a
connection reset. Raw sockets, as a client that writes the whole body before reading."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.web.harness import AppHarness

EIGHT_MIB = 8 * 1024 * 1024
PIECE = 64 * 1024


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path) as harness:
        yield harness


def exchange(h: AppHarness, head: bytes, pieces: Iterator[bytes]) -> bytes:
    """Send the request completely, then read the whole response."""
    with socket.create_connection(("127.0.0.1", h.port), timeout=30) as sock:
        sock.sendall(head)
        for piece in pieces:
            sock.sendall(piece)  # a reset here would raise ConnectionResetError
        sock.shutdown(socket.SHUT_WR)
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    return response


def body_pieces(size: int) -> Iterator[bytes]:
    prefix = b'{"messages": [{"role": "user", "content": "'
    yield prefix
    left = size - len(prefix) - 4
    while left > 0:
        yield b"x" * min(PIECE, left)
        left -= PIECE
    yield b'"}]}'


def test_eight_mib_with_a_content_length_reads_a_413(h: AppHarness) -> None:
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(EIGHT_MIB).encode() + b"\r\n\r\n"
    )
    response = exchange(h, head, body_pieces(EIGHT_MIB))
    assert response.startswith(b"HTTP/1.1 413")
    assert b'"code": "request_too_large"' in response


def test_eight_mib_chunked_reads_a_413(h: AppHarness) -> None:
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )

    def chunked() -> Iterator[bytes]:
        for piece in body_pieces(EIGHT_MIB):
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        yield b"0\r\n\r\n"

    response = exchange(h, head, chunked())
    assert response.startswith(b"HTTP/1.1 413")


def test_a_body_within_the_limit_reaches_the_route(h: AppHarness) -> None:
    body = {"messages": [{"role": "user", "content": "y" * 1000}]}
    r = httpx.post(h.base_url + "/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
