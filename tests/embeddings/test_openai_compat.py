"""OpenAICompatEmbedder against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from backend.embeddings import Embedder, EmbedderUnavailable, aembed, build_embedder
from backend.embeddings.openai_compat import OpenAICompatEmbedder
from tests.embeddings.fake_openai_server import FakeEmbeddingServer, fake_vector

MakeEmbedder = Callable[..., OpenAICompatEmbedder]


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dim=16) as running:
        yield running


@pytest.fixture
def make_embedder(server: FakeEmbeddingServer) -> Iterator[MakeEmbedder]:
    built: list[OpenAICompatEmbedder] = []

    def make(**options: Any) -> OpenAICompatEmbedder:
        settings: dict[str, Any] = {
            "base_url": server.base_url,
            "model": "fake-embed",
            "api_key": "sk-test",
            "max_retries": 0,
        }
        settings.update(options)
        embedder = OpenAICompatEmbedder(**settings)
        built.append(embedder)
        return embedder

    yield make
    for embedder in built:  # before the server stops, so keep-alive connections end
        embedder.close()


def expected(texts: list[str], dim: int = 16) -> np.ndarray:
    rows = np.asarray([fake_vector(text, dim) for text in texts], dtype=np.float64)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


TEXTS = ["my cat is called Snowy", "I live in Berlin", "我的猫叫小白", "", "tea, not coffee"]


def test_vectors_are_unit_length_and_in_input_order(make_embedder: MakeEmbedder) -> None:
    vectors = make_embedder().embed(TEXTS)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)  # server lists them reversed


def test_requests_are_batched(server: FakeEmbeddingServer, make_embedder: MakeEmbedder) -> None:
    texts = [f"memory number {i}" for i in range(10)]
    vectors = make_embedder(batch_size=4).embed(texts)
    assert [len(body["input"]) for body in server.requests] == [4, 4, 2]
    assert [text for body in server.requests for text in body["input"]] == texts
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    body = server.requests[0]
    assert body["model"] == "fake-embed"
    assert body["encoding_format"] == "float"
    assert "dimensions" not in body


def test_api_key_is_sent(server: FakeEmbeddingServer, make_embedder: MakeEmbedder) -> None:
    make_embedder().embed(["hello"])
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def test_dimensions_are_passed_and_fix_dim(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    embedder = make_embedder(dimensions=8)
    assert embedder.dim == 8
    assert server.requests == []  # known without asking
    vectors = embedder.embed(["a", "b"])
    assert server.requests[0]["dimensions"] == 8
    assert vectors.shape == (2, 8)
    np.testing.assert_allclose(vectors, expected(["a", "b"], dim=8), atol=1e-6)


def test_dim_is_learned_from_the_first_response(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    embedder = make_embedder()
    embedder.embed(["hello"])
    assert embedder.dim == 16
    assert len(server.requests) == 1


def test_reading_dim_first_sends_one_probe(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    embedder = make_embedder()
    assert embedder.dim == 16
    assert embedder.dim == 16
    assert len(server.requests) == 1


def test_empty_input_sends_nothing(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    assert make_embedder(dimensions=8).embed([]).shape == (0, 8)
    assert server.requests == []


def test_a_bare_string_is_refused(make_embedder: MakeEmbedder) -> None:
    embedder = make_embedder()
    with pytest.raises(TypeError):
        embedder.embed("not a list")
    with pytest.raises(TypeError):
        asyncio.run(aembed(embedder, "not a list"))


@pytest.mark.parametrize("status", [500, 503, 401, 404, 429])
def test_http_errors_raise_unavailable(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder, status: int
) -> None:
    server.enqueue(f"status:{status}")
    with pytest.raises(EmbedderUnavailable, match=f"HTTP {status}"):
        make_embedder().embed(["hello"])


def test_sdk_retries_a_server_error_then_succeeds(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    server.enqueue("status:503")
    vectors = make_embedder(max_retries=1).embed(["hello"])
    assert len(server.requests) == 2
    np.testing.assert_allclose(vectors, expected(["hello"]), atol=1e-6)


def test_timeout_raises_unavailable(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    server.enqueue("hang")
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable, match="timed out"):
        make_embedder(timeout=0.3).embed(["hello"])
    assert time.monotonic() - started < 3.0


def test_dropped_connection_raises_unavailable(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    server.enqueue("close")
    with pytest.raises(EmbedderUnavailable, match="cannot reach"):
        make_embedder().embed(["hello"])


def test_refused_connection_raises_unavailable(make_embedder: MakeEmbedder) -> None:
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = make_embedder(base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EmbedderUnavailable, match="cannot reach"):
        embedder.embed(["hello"])


def test_zero_vectors_are_never_returned(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    server.enqueue("zero")
    with pytest.raises(EmbedderUnavailable, match="zero"):
        make_embedder().embed(["hello"])


def test_missing_vectors_raise_unavailable(
    server: FakeEmbeddingServer, make_embedder: MakeEmbedder
) -> None:
    server.enqueue("short")
    with pytest.raises(EmbedderUnavailable, match="1 vectors for 2"):
        make_embedder().embed(["a", "b"])


def test_aembed_runs_from_the_event_loop(make_embedder: MakeEmbedder) -> None:
    embedder = make_embedder()
    vectors = asyncio.run(aembed(embedder, ["hello", "world"]))
    np.testing.assert_allclose(vectors, expected(["hello", "world"]), atol=1e-6)


def test_factory_builds_an_embedder(server: FakeEmbeddingServer) -> None:
    embedder: Embedder = build_embedder("openai", base_url=server.base_url, model="fake-embed")
    try:
        assert embedder.model == "fake-embed"
        assert embedder.embed(["x"]).shape == (1, 16)
        assert len(server.requests) == 1
    finally:
        assert isinstance(embedder, OpenAICompatEmbedder)
        embedder.close()


def test_bad_configuration_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="unknown embedder kind"):
        build_embedder("cloud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="base_url"):
        OpenAICompatEmbedder(base_url="", model="m")
    with pytest.raises(ValueError, match="dimensions"):
        OpenAICompatEmbedder(base_url="http://127.0.0.1:9/v1", model="m", dimensions=0)
