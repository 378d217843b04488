"""Switching the embedder re-embeds the store in the background (issue 27, item 2).

A store made with one (fake) embedder, the app restarted with another: recall works
throughout (with the old vectors), every memory gets a vector from the new embedder and
keeps everything else, writes made meanwhile are carried over, progress is reported on
/healthz and by doctor, and an interrupted run resumes without embedding again what it
already did.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from backend.cli import doctor
from backend.embeddings.port import Embedder, EmbedderUnavailable
from backend.engine.embedding_switch import (
    NEXT_DIR,
    STORE_DIR,
    configured_model,
    plan,
    recorded_embedder,
)
from backend.engine.services import Services, build_services
from backend.llm.fake import FakeChatModel
from backend.longterm.reembed import EmbeddingRecord, read_record, write_record
from backend.memory.keywords import extract_keywords
from backend.memory.types import Memory, Namespace
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.switching_store import SwitchingVectorStore
from backend.web.health import check_dependencies
from tests.engine.wiring import fake_settings
from tests.stores.fakes import BagOfWordsEmbedder

NS = Namespace("alice", "companion")
FACTS = [f"The user's friend number {i} plays the {w}" for i, w in enumerate(
    ["violin", "drums", "cello", "flute", "piano", "harp", "oboe", "banjo", "tuba", "lute"]
)]  # fmt: skip


class OtherEmbedder:
    """A second vector space: keywords hashed with another salt into 48 dimensions.
    ``fail_after``: the call after which it goes down (an interrupted run)."""

    model = "test-other-48"
    dim = 48

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.texts = 0
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise EmbedderUnavailable("the new embedder went down")
        self.calls += 1
        self.texts += len(texts)
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in extract_keywords(text) or ["empty"]:
                rows[i, hashlib.sha256(b"salt" + word.encode()).digest()[0] % self.dim] += 1.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def build(data_dir: Path, embedder: Embedder, **kwargs: object) -> Services:
    return build_services(
        fake_settings(data_dir),
        command="test",
        chat=FakeChatModel("c"),
        hippocampus=FakeChatModel("h"),
        embedder=embedder,
        old_embedder=lambda model: (
            BagOfWordsEmbedder() if model == BagOfWordsEmbedder.model else None
        ),
        **kwargs,  # type: ignore[arg-type]
    )


def recalled(services: Services, text: str) -> list[str]:
    return [m.content for m in services.long_term.activate(NS, text).memories]


def seed(data_dir: Path) -> None:
    """A store of the bag-of-words embedder's vectors (the data directory's own Chroma)."""
    services = build(data_dir, BagOfWordsEmbedder())
    try:
        ltm = services.long_term
        for fact in FACTS:
            ltm.create(NS, ltm.new_memory(fact, importance=0.6))
        assert services.embedding is not None and services.embedding.job is None
    finally:
        services.close()
    record = read_record(data_dir)
    assert record is not None and record.model == BagOfWordsEmbedder.model


def test_a_new_embedder_re_embeds_in_the_background_and_resumes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data)

    # Restarted with another embedder, which goes down after two batches of three.
    failing = OtherEmbedder(fail_after=2)
    services = build(data, failing)
    try:
        plan = services.embedding
        assert plan is not None and plan.job is not None
        assert isinstance(services.store, SwitchingVectorStore)
        # Searchable at once, with the old vectors and the old embedder.
        assert services.embedder is not None and services.embedder.model == BagOfWordsEmbedder.model
        assert "The user's friend number 2 plays the cello" in recalled(
            services, "who plays the cello?"
        )
        plan.job.batch = 3  # small batches, so that the run stops midway
        with pytest.raises(EmbedderUnavailable):
            plan.job.run()
        progress = check_dependencies(services)["embedding"]
        assert progress["reembedding"]["state"] == "paused"
        assert (
            progress["reembedding"]["memories_done"] == 6
            and progress["reembedding"]["memories"] == 10
        )
        assert "6 of 10" in progress["note"]
        # Still searchable, still the old embedder, and a write made now is kept.
        assert "The user's friend number 4 plays the piano" in recalled(services, "piano")
        services.long_term.create(NS, services.long_term.new_memory("The user adopted a parrot"))
    finally:
        services.close()

    # doctor reads the progress the server recorded (the data directory is free now).
    out = io.StringIO()
    doctor.run(fake_settings(data), as_json=True, out=out)
    report = json.loads(out.getvalue())["checks"]["embedding"]
    assert report["status"] == "warning" and report["reembedding"]["memories_done"] == 6
    assert report["recorded"] == BagOfWordsEmbedder.model
    assert "6 of 10 memories (60%), paused" in " ".join(report["notes"])

    # The next start resumes: what was embedded is not embedded again.
    resumed = OtherEmbedder()
    services = build(data, resumed)
    try:
        job = services.embedding.job if services.embedding else None
        assert job is not None
        assert job.run() is True
        assert resumed.texts == 11 - 6  # the parrot and the four facts not done before
        assert services.embedder is resumed  # switched over
        assert check_dependencies(services)["embedding"]["model"] == "test-other-48"
        assert "The user adopted a parrot" in recalled(services, "parrot")
        assert "The user's friend number 9 plays the lute" in recalled(
            services, "who plays the lute?"
        )
        stored = list(services.store.iter_all(NS))
        assert len(stored) == 11
        for memory in stored:  # every vector is the new embedder's
            np.testing.assert_allclose(
                memory.embedding, OtherEmbedder().embed([memory.content])[0], atol=1e-6
            )
    finally:
        services.close()

    record = read_record(data)
    assert record is not None and record.model == "test-other-48" and record.store_dir == NEXT_DIR
    # The start after moves the new store in place and keeps the old one.
    services = build(data, OtherEmbedder())
    try:
        assert services.embedding is not None and services.embedding.job is None
        assert len(list(services.store.iter_all(NS))) == 11
        assert "The user adopted a parrot" in recalled(services, "parrot")
    finally:
        services.close()
    assert not (data / NEXT_DIR).exists() and (data / STORE_DIR).is_dir()
    assert (data / f"{STORE_DIR}.before-{BagOfWordsEmbedder.model}").is_dir()


def test_writes_during_the_copy_are_carried_over_and_nothing_is_lost(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = InMemoryVectorStore()
    services = build(data, BagOfWordsEmbedder(), store=store)
    ltm = services.long_term
    made = [ltm.create(NS, ltm.new_memory(fact)) for fact in FACTS]
    services.close()

    class Writing(OtherEmbedder):
        """Writes through the app while the job embeds its first batch."""

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            if self.calls == 0:
                app = services.long_term
                app.create(NS, app.new_memory("The user learned to sail"))
                app.update(NS, made[0].id, content="The user's friend number 0 plays the viola")
                app.delete(NS, made[1].id)
            return super().embed(texts)

    services = build(data, Writing(), store=store)
    try:
        assert services.embedding is not None and services.embedding.job is not None
        assert services.embedding.job.run(threading.Event()) is True
        contents = sorted(m.content for m in services.store.iter_all(NS))
        assert "The user learned to sail" in contents
        assert "The user's friend number 0 plays the viola" in contents
        assert not any("drums" in c for c in contents) and len(contents) == 10
        assert "The user learned to sail" in recalled(services, "sailing, did I learn to sail?")
    finally:
        services.close()


def test_the_same_embedder_changes_nothing_and_an_old_store_is_recorded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    services = build(data, BagOfWordsEmbedder())
    try:
        assert services.embedding is not None and services.embedding.job is None
        assert not isinstance(services.store, SwitchingVectorStore)
        assert "reembedding" not in check_dependencies(services)["embedding"]
    finally:
        services.close()
    # A store from before the record: its vectors are the embedded provider's MiniLM.
    (data / "embedding.json").unlink()
    services = build(data, BagOfWordsEmbedder())
    services.long_term.create(NS, services.long_term.new_memory("The user likes tea"))
    services.close()
    (data / "embedding.json").unlink()
    services = build(data, BagOfWordsEmbedder())
    try:
        job = services.embedding.job if services.embedding else None
        assert job is not None and job.progress()["source"] == "all-MiniLM-L6-v2-onnx-int8"
        assert job.run() is True
        assert "The user likes tea" in recalled(services, "tea")
    finally:
        services.close()


def test_a_store_that_cannot_be_copied_stays_on_the_recorded_embedder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = InMemoryVectorStore()
    build(data, BagOfWordsEmbedder(), store=store).close()
    settings = fake_settings(data)
    when = datetime(2026, 5, 1, tzinfo=UTC)
    tea = Memory("m1", "The user likes tea", "preference", 0.6, when, when)
    store.upsert(NS, [replace(tea, embedding=BagOfWordsEmbedder().embed([tea.content])[0])])
    result = plan(
        settings, store, OtherEmbedder(), None, old_embedder=lambda model: BagOfWordsEmbedder()
    )
    assert result.job is None and result.target is None and result.store is store
    assert result.embedder is not None and result.embedder.model == BagOfWordsEmbedder.model
    assert result.note is not None and "not supported for this store" in result.note
    assert result.status()["note"] == result.note
    # Without the old model, recall goes by the memories' words, and the note says so.
    keywords_only = plan(settings, store, OtherEmbedder(), None, old_embedder=lambda model: None)
    assert keywords_only.embedder is None and "words only" in (keywords_only.note or "")


def test_doctor_repairs_with_the_embedder_of_the_stores_vectors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    e5 = fake_settings(data, embedding={"model": "e5-small-v2"})
    write_record(data, EmbeddingRecord("all-MiniLM-L6-v2-onnx-int8"))
    old = recorded_embedder(e5)  # a switch to e5 still to run: MiniLM's vectors
    assert old is not None and old.model == "all-MiniLM-L6-v2-onnx-int8"
    write_record(data, EmbeddingRecord("e5-small-v2-onnx-int8-qp-centred"))
    assert recorded_embedder(e5) is None  # the configured one
    # e5's first form (``query: `` on every text) cannot be made again.
    write_record(data, EmbeddingRecord("e5-small-v2-onnx-int8-centred"))
    with pytest.raises(EmbedderUnavailable, match="cannot be loaded"):
        recorded_embedder(e5)
    write_record(data, EmbeddingRecord(BagOfWordsEmbedder.model))
    with pytest.raises(EmbedderUnavailable, match="cannot be loaded"):
        recorded_embedder(e5)


def test_the_app_runs_the_re_embedding_in_the_background(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from backend.web.app import create_app

    data = tmp_path / "data"
    seed(data)
    services = build(data, OtherEmbedder())
    app = create_app(fake_settings(data), services, own_services=True)
    with TestClient(app) as client:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            embedding = client.get("/healthz").json()["dependencies"]["embedding"]
            if embedding.get("reembedding", {}).get("state") == "done":
                break
            time.sleep(0.05)
        assert embedding["model"] == "test-other-48"
        assert embedding["reembedding"]["memories_done"] == len(FACTS)
        assert "The user's friend number 3 plays the flute" in recalled(services, "flute")


def test_the_default_is_the_two_part_embedder_and_a_minilm_store_moves_to_it(
    tmp_path: Path,
) -> None:
    # The default changed from MiniLM to minilm-use (2026-12-06): a store MiniLM made is
    # re-embedded at the next start and searched with MiniLM until then.
    data = tmp_path / "data"
    data.mkdir()
    settings = fake_settings(data)
    assert settings.embedding.provider == "embedded" and settings.embedding.model is None
    space = configured_model(settings)
    assert space == "all-MiniLM-L6-v2-onnx-int8+use-multilingual-v3-numpy@0.7-split"
    write_record(data, EmbeddingRecord("all-MiniLM-L6-v2-onnx-int8"))
    old = recorded_embedder(settings)
    assert old is not None and old.model == "all-MiniLM-L6-v2-onnx-int8"
    write_record(data, EmbeddingRecord(space))
    assert recorded_embedder(settings) is None
