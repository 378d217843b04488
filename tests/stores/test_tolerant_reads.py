"""Tolerant reads: an embedded Chroma directory whose index disagrees with its records
never fails a read; the store answers with what it can read and says it needs repair.

Two real ways to get there, both on a real ``ChromaVectorStore.persistent``:

- ``write_from_another_process``: what was measured (issue 16). A second process opens
  the same directory with its own ``PersistentClient`` and writes; the first one's cached
  index does not know those ids, and every ``get`` that asks for their vectors raises
  ``InternalError: Error finding id`` (until a restart).
- ``break_on_disk``: a damaged directory, as a fresh process finds it. Deleting the
  write-ahead-log rows of some ids (``embeddings_queue``: where chromadb 1.5 keeps the
  vectors of a collection whose HNSW index has not been flushed yet) leaves records whose
  vector cannot be read (``Error finding id``); deleting the ``embedding_metadata`` rows of
  an id leaves a record the index lists but whose text is gone.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
from chromadb.errors import InternalError

from backend.longterm.memory import LongTermMemory
from backend.memory.types import Memory, Namespace
from backend.stores.chroma_store import ChromaVectorStore
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.lazy_store import LazyVectorStore
from backend.stores.lexical_index import IndexedVectorStore, InMemoryLexicalIndex
from backend.stores.memory_codec import ROLE_VECTORS, collection_name
from backend.stores.vector_port import VectorStoreUnavailable
from backend.web import health
from tests.stores.fakes import BagOfWordsEmbedder
from tests.web.harness import REPO, AppHarness

NS = Namespace("local", "companion")  # the harness's user and default persona
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
WORDS = ("tea", "bicycle", "garden", "violin", "harbour", "winter", "poetry", "lantern")


def make_memory(i: int, *, vector: bool = True) -> Memory:
    """Memory ``m<i>`` created at T0 + i minutes, with a bag-of-words vector (64-d)."""
    content = f"the user likes {WORDS[i % len(WORDS)]} number {i}"
    at = T0 + timedelta(minutes=i)
    embedding = BagOfWordsEmbedder().embed([content])[0] if vector else None
    return Memory(
        id=f"m{i:03d}",
        content=content,
        category="preference",
        importance=0.6,
        created_at=at,
        last_accessed=at,
        embedding=embedding,
    )


def seed(path: Path, n: int = 12, without_vector: Sequence[int] = (90, 91)) -> list[Memory]:
    """A persistent store at ``path`` with ``n`` memories with a vector and a few without."""
    memories = [make_memory(i) for i in range(n)]
    memories += [make_memory(i, vector=False) for i in without_vector]
    with ChromaVectorStore.persistent(path) as store:
        store.upsert(NS, memories)
    return memories


def break_on_disk(
    path: Path, *, lose_vectors: Sequence[str] = (), lose_records: Sequence[str] = ()
) -> None:
    """Damage a CLOSED store directory (module doc): vectors and whole records lost."""
    conn = sqlite3.connect(path / "chroma.sqlite3")
    try:
        marks = ",".join("?" * len(lose_vectors))
        conn.execute(f"DELETE FROM embeddings_queue WHERE id IN ({marks})", list(lose_vectors))
        marks = ",".join("?" * len(lose_records))
        conn.execute(
            "DELETE FROM embedding_metadata WHERE id IN "
            f"(SELECT id FROM embeddings WHERE embedding_id IN ({marks}))",
            list(lose_records),
        )
        conn.commit()
    finally:
        conn.close()


def write_from_another_process(path: Path, memories: Sequence[Memory]) -> None:
    """Upsert ``memories`` into ``path`` from a second process (its own PersistentClient)."""
    rows = [
        {
            "id": m.id,
            "content": m.content,
            "at": m.created_at.isoformat(),
            "vec": m.embedding is not None,
        }
        for m in memories
    ]
    code = textwrap.dedent(
        f"""
        import json
        from datetime import datetime
        from backend.memory.types import Memory, Namespace
        from backend.stores.chroma_store import ChromaVectorStore
        from tests.stores.fakes import BagOfWordsEmbedder
        rows = json.loads({json.dumps(json.dumps(rows))})
        embedder = BagOfWordsEmbedder()
        with ChromaVectorStore.persistent({str(path)!r}) as store:
            store.upsert(Namespace({NS.user_id!r}, {NS.persona_id!r}), [
                Memory(id=r["id"], content=r["content"], category="preference",
                       importance=0.6, created_at=datetime.fromisoformat(r["at"]),
                       last_accessed=datetime.fromisoformat(r["at"]),
                       embedding=embedder.embed([r["content"]])[0] if r["vec"] else None)
                for r in rows
            ])
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


def raw_vec_get(store: ChromaVectorStore, ids: list[str]) -> None:
    """The plain Chroma read that the app used to do (raises on an inconsistent index)."""
    coll = store._client.get_collection(collection_name(NS, ROLE_VECTORS))
    coll.get(ids=ids, include=["metadatas", "embeddings"])


@pytest.fixture
def broken(tmp_path: Path) -> Iterator[tuple[ChromaVectorStore, list[Memory]]]:
    """A reopened store with m003/m007's vectors and m005's record lost on disk."""
    path = tmp_path / "chroma"
    memories = seed(path)
    break_on_disk(path, lose_vectors=["m003", "m007"], lose_records=["m005"])
    with ChromaVectorStore.persistent(path) as store:
        yield store, memories


def test_a_second_process_writing_the_directory_no_longer_fails_reads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "chroma"
    seed(path, n=6, without_vector=())
    with ChromaVectorStore.persistent(path) as store:
        assert len(store.list(NS)) == 6  # the index is cached now
        intruders = [make_memory(i) for i in range(40, 44)]
        write_from_another_process(path, intruders)
        with pytest.raises(InternalError, match="Error finding id"):  # the measured failure
            raw_vec_get(store, [m.id for m in intruders])

        caplog.set_level(logging.WARNING, "backend.stores.chroma_reads")
        listed = store.list(NS, limit=100)
        assert [m.id for m in listed] == [f"m{i:03d}" for i in (*range(6), *range(40, 44))]
        by_id = {m.id: m for m in listed}
        assert all(by_id[m.id].embedding is None for m in intruders)  # text yes, vector no
        assert by_id["m000"].embedding is not None
        assert {m.id for m in store.iter_all(NS)} == set(by_id)
        assert [m.id for m in store.get(NS, ["m041", "m001"])] == ["m041", "m001"]
        assert store.count(NS) == 10

        assert store.needs_repair
        assert store.unreadable == [m.id for m in intruders]
        assert store.repair_state() == {
            "needs_repair": True,
            "unreadable": 4,
            "vectors_unreadable": 4,
        }
        warned = [r for r in caplog.records if "cannot be read" in r.getMessage()]
        assert len(warned) == 1 and "m040 (vector)" in warned[0].getMessage()
        store.list(NS, limit=100)
        assert len([r for r in caplog.records if "cannot be read" in r.getMessage()]) == 1


def test_a_damaged_directory_reads_what_it_can(
    broken: tuple[ChromaVectorStore, list[Memory]],
) -> None:
    store, memories = broken
    with pytest.raises(InternalError, match="Error finding id"):
        raw_vec_get(store, ["m003"])
    readable = [m.id for m in memories if m.id != "m005"]

    listed = store.list(NS, limit=100)
    assert [m.id for m in listed] == readable  # (created_at, id) order, m005 skipped
    lost = {m.id for m in listed if m.embedding is None}
    assert lost == {"m003", "m007", "m090", "m091"}
    assert [m.content for m in listed if m.id == "m003"] == [memories[3].content]
    assert [m.id for m in store.list(NS, offset=2, limit=3)] == readable[2:5]
    assert [m.id for m in store.list(NS, text="violin")] == ["m003", "m011", "m091"]
    assert {m.id for m in store.iter_all(NS, batch=4)} == set(readable)
    assert [m.id for m in store.get(NS, ["m005", "m007", "m001"])] == ["m007", "m001"]
    hits = store.query(NS, memories[0].embedding, 50)
    assert {m.id for m, _ in hits} <= set(readable) - {"m090", "m091"}
    salient = store.salient(NS, since=T0, min_importance=0.0, n=50)
    assert {m.id for m in salient} == set(readable)
    assert {m.id for m in store.missing_vectors(NS, 10)} == {"m090", "m091"}

    assert store.repair_state() == {"needs_repair": True, "unreadable": 3, "vectors_unreadable": 2}
    assert store.unreadable == ["m003", "m005", "m007"]


def test_writing_an_unreadable_memory_again_clears_it(
    broken: tuple[ChromaVectorStore, list[Memory]],
) -> None:
    store, memories = broken
    store.list(NS, limit=100)
    store.upsert(NS, [memories[3]])  # a new vector for m003 (in place)
    store.delete(NS, ["m005"])
    assert store.unreadable == ["m007"]
    (m003,) = store.get(NS, ["m003"])
    assert m003.embedding is not None
    np.testing.assert_allclose(m003.embedding, memories[3].embedding, atol=1e-6)


def test_long_term_memory_and_the_app_answer_with_the_readable_memories(
    tmp_path: Path, broken: tuple[ChromaVectorStore, list[Memory]]
) -> None:
    store, memories = broken
    readable = {m.id for m in memories} - {"m005"}
    (tmp_path / "app").mkdir()
    with (
        AppHarness(tmp_path / "app", store=store) as h,
        httpx.Client(base_url=h.base_url, timeout=30) as client,
    ):
        health = client.get("/healthz").json()["dependencies"]["vector_store"]
        assert health["ok"] and "needs_repair" not in health  # nothing met yet
        got = client.get("/api/personas/companion/memories", params={"limit": 100})
        assert got.status_code == 200, got.text
        assert {m["id"] for m in got.json()["items"]} == readable
        for sort in ("created", "importance", "recency"):
            page = client.get("/api/personas/companion/memories", params={"sort": sort})
            assert page.status_code == 200
        assert client.get("/api/personas/companion/memories/m003").status_code == 200
        assert client.get("/api/personas/companion/memories/m005").status_code == 404
        page = client.get("/memories", params={"persona": "companion"})
        assert page.status_code == 200
        assert memories[7].content in page.text

        health = client.get("/healthz").json()
        assert health["status"] == "ok"  # the store answers: needs_repair is not an outage
        vector_store = health["dependencies"]["vector_store"]
        assert vector_store["ok"] and vector_store["needs_repair"] is True
        assert vector_store["unreadable"] == 3
        status = client.get("/status")
        assert status.status_code == 200
        assert "needs repair: 3 memories could not be read" in status.text

        long_term: LongTermMemory = h.services.long_term
        assert long_term.get(NS, "m003") is not None
        assert long_term.get(NS, "m005") is None
        assert {json.loads(line)["id"] for line in long_term.export_jsonl(NS)} == readable
        assert long_term.backfill(NS) == 2  # the two stored without a vector; m003 stays


def test_healthz_finds_the_repair_state_through_the_wrappers(
    broken: tuple[ChromaVectorStore, list[Memory]],
) -> None:
    store, _ = broken
    wrapped = IndexedVectorStore(LazyVectorStore(lambda: store), InMemoryLexicalIndex())
    assert health._repair_state(wrapped) == {}  # nothing met yet: the answer is unchanged
    wrapped.list(NS, limit=100)
    assert health._repair_state(wrapped) == {
        "needs_repair": True,
        "unreadable": 3,
        "vectors_unreadable": 2,
    }
    assert health._repair_state(InMemoryVectorStore()) == {}


def test_any_other_internal_error_reads_as_unavailable(
    broken: tuple[ChromaVectorStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = broken

    def fails() -> None:
        raise InternalError("Error executing plan: Internal error: something else")

    monkeypatch.setattr(store._client, "list_collections", fails)
    with pytest.raises(VectorStoreUnavailable, match="something else"):
        store.namespaces()
