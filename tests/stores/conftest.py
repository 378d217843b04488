"""Fixtures of the store tests: the three vector-store backends and a real Chroma server.

The server is ``chroma run`` from the installed package (the executable next to
``sys.executable``), started once per session on a free loopback port and killed at
teardown. The persistent store is also session-scoped; tests isolate themselves with a
unique namespace each (``ns``), which keeps the whole suite to seconds.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from backend.memory.types import Namespace
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.vector_port import VectorStore
from tests.chroma_server import ChromaServer, free_port

BACKENDS = ("memory", "chroma-persistent", "chroma-http")


@pytest.fixture(scope="session")
def no_chroma_embedding_function() -> Iterator[None]:
    """Fail loudly if Chroma's default embedding function (a model download) ever runs."""
    from chromadb.api.types import DefaultEmbeddingFunction

    def forbidden(self: object, input: object) -> object:
        raise AssertionError("Chroma's default embedding function must never run")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DefaultEmbeddingFunction, "__call__", forbidden)
        yield


@contextmanager
def running_chroma_server(data: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A ``chroma run`` child process on a free loopback port, stopped on exit."""
    server = ChromaServer(data)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        assert server.proc is not None
        yield server.proc, server.port
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """``(host, port)`` of a ``chroma run`` server shared by this test session."""
    with running_chroma_server(tmp_path_factory.mktemp("chroma-server")) as (_, port):
        yield ("127.0.0.1", port)


@pytest.fixture
def private_chroma_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A server of one test's own, which the test may stop or kill (outage tests)."""
    with running_chroma_server(tmp_path) as running:
        yield running


@pytest.fixture(scope="session")
def chroma_persistent_store(
    tmp_path_factory: pytest.TempPathFactory, no_chroma_embedding_function: None
) -> Iterator[VectorStore]:
    from backend.stores.chroma_store import ChromaVectorStore

    store = ChromaVectorStore.persistent(tmp_path_factory.mktemp("chroma-persistent"))
    yield store
    store.close()


@pytest.fixture(scope="session")
def chroma_http_store(
    chroma_server: tuple[str, int], no_chroma_embedding_function: None
) -> Iterator[VectorStore]:
    from backend.stores.chroma_store import ChromaVectorStore

    host, port = chroma_server
    store = ChromaVectorStore.http(host, port)
    yield store
    store.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> VectorStore:
    """Each contract test runs against every backend."""
    if request.param == "memory":
        return InMemoryVectorStore()
    name = (
        "chroma_persistent_store" if request.param == "chroma-persistent" else "chroma_http_store"
    )
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture
def unused_port() -> int:
    """A loopback port with no server behind it."""
    return free_port()


@pytest.fixture
def ns() -> Namespace:
    """A namespace no other test uses (the Chroma stores are shared by the session)."""
    return Namespace(f"user-{uuid.uuid4().hex[:12]}", "persona")


@pytest.fixture
def other_ns(ns: Namespace) -> Namespace:
    """A second namespace of the same user (isolation tests)."""
    return Namespace(ns.user_id, "other-persona")
