"""Opening a Chroma client (a directory or a server), closing it, and its errors.

What ``ChromaVectorStore`` (``backend.stores.chroma_store``) stands on. Telemetry is off
(``anonymized_telemetry=False``; in chromadb 1.5 the Python product-telemetry client is
a no-op and the Rust bindings carry none). A server must answer its heartbeat within
``timeout_s`` before a client is built, and every request is bounded by it (chromadb
sets no timeout of its own).

Failure policy (docs/architecture.md, "Failure policy"): a path that cannot be opened or
a server that does not answer → ``VectorStoreUnavailable``; later, ``chroma_errors``
turns transport errors and any other Chroma ``InternalError`` into it too (callers
degrade instead of failing), and a vector of the wrong dimension into
``EmbeddingDimensionError`` (a ``ValueError``).
"""

from __future__ import annotations

import http.client
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import chromadb
import httpx  # chromadb's HTTP transport: its errors mean "server unreachable"
from chromadb.api import ClientAPI
from chromadb.config import Settings
from chromadb.errors import InternalError, InvalidArgumentError

from backend.stores.vector_port import EmbeddingDimensionError, VectorStoreUnavailable

logger = logging.getLogger(__name__)


def open_client(
    path: str | Path | None,
    host: str | None,
    port: int,
    ssl: bool,
    allow_reset: bool,
    timeout_s: float,
) -> ClientAPI:
    """A persistent client at ``path``, or an HTTP client of ``host:port`` (exactly one
    given). Raises ``VectorStoreUnavailable`` when it cannot be opened or reached."""
    settings = Settings(anonymized_telemetry=False, allow_reset=allow_reset)
    try:
        if path is not None:
            client = chromadb.PersistentClient(path=str(path), settings=settings)
        else:
            assert host is not None
            _probe(host, port, ssl, timeout_s)
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
            for server in http_servers(client):  # chromadb sets no timeout at all
                server._session.timeout = httpx.Timeout(timeout_s)
    except VectorStoreUnavailable:
        raise
    except Exception as exc:  # bad path, refused connection, incompatible server
        where = path if path is not None else f"{host}:{port}"
        raise VectorStoreUnavailable(f"cannot open Chroma at {where}: {exc}") from exc
    logger.info("chroma store opened (%s)", "persistent" if path is not None else "http")
    return client


def http_servers(client: ClientAPI) -> list[Any]:
    """The HTTP client and its admin client each own an httpx session (private API, looked
    up defensively) that ``Client.close`` leaves open: the caller closes them."""
    admin = getattr(client, "_admin_client", None)
    found = [getattr(client, "_server", None), getattr(admin, "_server", None)]
    return [s for s in found if s is not None and hasattr(s, "_session")]


def close_client(client: ClientAPI) -> None:
    """Release the client (SQLite handles, HTTP connections)."""
    servers = http_servers(client)
    client.close()  # type: ignore[attr-defined]
    for server in servers:
        server._session.close()


@contextmanager
def chroma_errors() -> Iterator[None]:
    """Translate Chroma's errors (module doc, "Failure policy")."""
    try:
        yield
    except httpx.TransportError as exc:
        logger.warning("chroma unreachable: %s", type(exc).__name__)
        raise VectorStoreUnavailable(f"Chroma server unreachable: {exc}") from exc
    except InvalidArgumentError as exc:
        if "dimension" in str(exc):
            raise EmbeddingDimensionError(str(exc)) from exc
        raise
    except InternalError as exc:  # what tolerant reads could not route around
        logger.warning("chroma internal error: %s", exc)
        raise VectorStoreUnavailable(f"Chroma internal error: {exc}") from exc


def _probe(host: str, port: int, ssl: bool, timeout_s: float) -> None:
    """Fail fast unless the server answers its heartbeat within ``timeout_s``."""
    conn_type = http.client.HTTPSConnection if ssl else http.client.HTTPConnection
    conn = conn_type(host, port, timeout=timeout_s)
    try:
        conn.request("GET", "/api/v2/heartbeat")
        status = conn.getresponse().status
    except OSError as exc:
        raise VectorStoreUnavailable(f"Chroma at {host}:{port} unreachable: {exc}") from exc
    finally:
        conn.close()
    if status != 200:
        raise VectorStoreUnavailable(f"Chroma at {host}:{port} heartbeat answered {status}")
