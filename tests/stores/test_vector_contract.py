"""The VectorStore contract, run against every backend (``store`` is parametrised).

In-memory (exact numpy), Chroma persistent (session store in a tmp dir) and Chroma over
HTTP (a real ``chroma run`` server). A few Chroma-only checks sit at the end.
"""

from __future__ import annotations

import math
import signal
import subprocess
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from backend.memory.types import About, Emotion, Memory, Namespace
from backend.stores import memory_codec as codec
from backend.stores.vector_port import (
    EmbeddingDimensionError,
    VectorStore,
    VectorStoreUnavailable,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
DIM = 8


def unit(i: int, dim: int = DIM) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[i] = 1.0
    return v


def at_cosine(c: float) -> np.ndarray:
    """A unit vector whose cosine with ``unit(0)`` is ``c``."""
    return (c * unit(0) + math.sqrt(max(0.0, 1.0 - c * c)) * unit(1)).astype(np.float32)


def mem(
    mid: str,
    content: str = "a fact",
    *,
    vector: np.ndarray | None = None,
    minutes: int = 0,
    **fields: object,
) -> Memory:
    moment = T0 + timedelta(minutes=minutes)
    base: dict[str, object] = {
        "category": "personal_fact",
        "importance": 0.5,
        "created_at": moment,
        "last_accessed": moment,
    }
    base.update(fields)
    return Memory(id=mid, content=content, embedding=vector, **base)  # type: ignore[arg-type]


def ids(memories: list[Memory]) -> list[str]:
    return [m.id for m in memories]


def assert_same(got: Memory, want: Memory) -> None:
    assert got == want  # every field but the embedding (compare=False)
    for moment in (got.created_at, got.last_accessed):
        assert moment.utcoffset() == timedelta(0)
    if want.embedding is None:
        assert got.embedding is None
    else:
        assert got.embedding is not None and got.embedding.dtype == np.float32
        # Chroma's cosine space normalises on insert and rescales on read: <= 1-2 ulp off.
        np.testing.assert_array_max_ulp(got.embedding, want.embedding, maxulp=2)


# --- round trips ----------------------------------------------------------------------


def test_round_trip_every_field(store: VectorStore, ns: Namespace) -> None:
    shanghai = timezone(timedelta(hours=8))
    full = Memory(
        id="m-full",
        content="我的妹妹 Mei 住在大阪 (Osaka)",
        category="relationship",
        importance=0.8125,
        confidence=0.6172839,
        emotion=Emotion("Joy", 0.75),
        keywords=("妹妹", "大阪", "osaka"),
        subject="persona",
        created_at=datetime(2025, 12, 31, 23, 59, 59, 999999, tzinfo=shanghai),
        last_accessed=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        access_count=7,
        embedding=np.linspace(-1, 1, DIM, dtype=np.float32) + 0.01,
        supersedes="m-old",
        superseded_by="m-new",
        pinned=True,
        source_session="session-42",
        about=(About("Mei", "sister"), About(None, "physio")),
    )
    bare = mem("m-bare", "plain", emotion=None, keywords=())
    store.upsert(ns, [full, bare])
    got = store.get(ns, ["m-full", "m-bare"])
    assert ids(got) == ["m-full", "m-bare"]
    assert_same(got[0], full)
    assert_same(got[1], bare)
    assert got[0].created_at == datetime(2025, 12, 31, 15, 59, 59, 999999, tzinfo=UTC)
    assert got[1].emotion is None and got[1].superseded_by is None and not got[1].pinned
    assert got[0].about == full.about and got[1].about == ()


def test_upsert_replaces_the_whole_record(store: VectorStore, ns: Namespace) -> None:
    first = mem(
        "m",
        "old",
        vector=unit(0),
        emotion=Emotion("sad", 0.9),
        superseded_by="x",
        source_session="s",
        keywords=("a",),
        pinned=True,
    )
    store.upsert(ns, [first])
    second = mem("m", "new", vector=unit(1))
    store.upsert(ns, [second])
    [got] = store.get(ns, ["m"])
    assert_same(got, second)
    assert store.count(ns) == 1


def test_last_of_an_id_in_a_batch_wins(store: VectorStore, ns: Namespace) -> None:
    store.upsert(ns, [mem("m", "first", vector=unit(0)), mem("m", "second", vector=unit(1))])
    [got] = store.get(ns, ["m"])
    assert got.content == "second"
    assert store.count(ns) == 1


def test_get_keeps_order_skips_missing_and_duplicates(store: VectorStore, ns: Namespace) -> None:
    store.upsert(ns, [mem("a", vector=unit(0)), mem("b")])
    assert ids(store.get(ns, ["b", "missing", "a", "b"])) == ["b", "a"]
    assert store.get(ns, []) == []


def test_read_embeddings_are_the_callers_own(store: VectorStore, ns: Namespace) -> None:
    vector = unit(2)
    store.upsert(ns, [mem("a", vector=vector)])
    vector[2] = 5.0
    [got] = store.get(ns, ["a"])
    assert got.embedding is not None
    got.embedding[0] = 9.0
    [again] = store.get(ns, ["a"])
    np.testing.assert_array_equal(again.embedding, unit(2))


# --- vectorless memories --------------------------------------------------------------


def test_vectorless_memories_are_kept_but_never_queried(store: VectorStore, ns: Namespace) -> None:
    store.upsert(ns, [mem("v", vector=unit(0)), mem("nv", "no vector yet", minutes=1)])
    assert ids(store.get(ns, ["nv"])) == ["nv"]
    assert store.get(ns, ["nv"])[0].embedding is None
    assert ids(store.list(ns)) == ["v", "nv"]
    assert store.count(ns) == 2
    assert ids(store.missing_vectors(ns, 10)) == ["nv"]
    assert ids([m for m, _ in store.query(ns, unit(0), 10, include_superseded=True)]) == ["v"]

    [pending] = store.missing_vectors(ns, 10)
    store.upsert(ns, [replace(pending, embedding=at_cosine(0.5))])  # backfill
    hits = store.query(ns, unit(0), 10)
    assert ids([m for m, _ in hits]) == ["v", "nv"]
    assert hits[1][1] == pytest.approx(0.5, abs=1e-5)
    assert store.missing_vectors(ns, 10) == []
    assert store.count(ns) == 2
    assert ids(list(store.iter_all(ns))) in (["v", "nv"], ["nv", "v"])


def test_a_memory_upserted_without_vector_loses_it(store: VectorStore, ns: Namespace) -> None:
    store.upsert(ns, [mem("a", vector=unit(0))])
    store.upsert(ns, [mem("a", "now vectorless")])
    assert store.query(ns, unit(0), 5) == []
    assert ids(store.missing_vectors(ns, 5)) == ["a"]
    assert [m.content for m in store.get(ns, ["a"])] == ["now vectorless"]
    assert store.count(ns) == 1
    assert store.missing_vectors(ns, 0) == []


# --- query ----------------------------------------------------------------------------


def test_query_orders_by_cosine_with_similarities(store: VectorStore, ns: Namespace) -> None:
    cosines = {"c90": 0.9, "c50": 0.5, "c10": 0.1, "cneg": -0.3, "c99": 0.99}
    store.upsert(ns, [mem(k, vector=at_cosine(c)) for k, c in cosines.items()])
    hits = store.query(ns, unit(0) * 3.0, 10)  # the query's norm does not matter
    assert [m.id for m, _ in hits] == ["c99", "c90", "c50", "c10", "cneg"]
    for memory, similarity in hits:
        assert similarity == pytest.approx(cosines[memory.id], abs=1e-5)
        np.testing.assert_array_max_ulp(memory.embedding, at_cosine(cosines[memory.id]), 2)
    assert [m.id for m, _ in store.query(ns, unit(0), 2)] == ["c99", "c90"]
    assert store.query(ns, unit(0), 0) == []


def test_query_excludes_superseded_unless_asked(store: VectorStore, ns: Namespace) -> None:
    store.upsert(
        ns,
        [
            mem("old", "lives in Guangzhou", vector=at_cosine(0.95), superseded_by="new"),
            mem("new", "lives in Hangzhou", vector=at_cosine(0.9), supersedes="old"),
        ],
    )
    assert [m.id for m, _ in store.query(ns, unit(0), 5)] == ["new"]
    both = store.query(ns, unit(0), 5, include_superseded=True)
    assert [m.id for m, _ in both] == ["old", "new"]


def test_query_finds_live_memories_behind_many_superseded(
    store: VectorStore, ns: Namespace
) -> None:
    # The 30 nearest are all superseded: an over-fetch of n + margin finds no live hit.
    old = [
        mem(f"old{i:02d}", vector=at_cosine(0.99 - i * 0.001), superseded_by="x") for i in range(30)
    ]
    store.upsert(
        ns, [*old, mem("live1", vector=at_cosine(0.5)), mem("live2", vector=at_cosine(0.4))]
    )
    hits = store.query(ns, unit(0), 2)
    assert [m.id for m, _ in hits] == ["live1", "live2"]
    assert [s for _, s in hits] == pytest.approx([0.5, 0.4], abs=1e-5)
    assert len(store.query(ns, unit(0), 40, include_superseded=True)) == 32


def test_query_on_an_unknown_namespace_is_empty(store: VectorStore, ns: Namespace) -> None:
    assert store.query(ns, unit(0), 5) == []
    assert store.get(ns, ["x"]) == []
    assert store.list(ns) == [] and store.count(ns) == 0
    assert store.missing_vectors(ns, 5) == [] and list(store.iter_all(ns)) == []
    assert store.salient(ns, since=T0, min_importance=0.0, n=5) == []
    assert store.delete(ns, ["x"]) == 0
    assert ns not in store.namespaces()  # reading never creates a namespace


# --- namespaces -----------------------------------------------------------------------


def test_namespaces_never_cross(store: VectorStore, ns: Namespace, other_ns: Namespace) -> None:
    store.upsert(ns, [mem("same", "mine", vector=unit(0), category="work")])
    store.upsert(
        other_ns,
        [
            mem("same", "theirs", vector=unit(0), category="work"),
            mem("only-there", "theirs too", vector=unit(1)),
        ],
    )
    assert [m.content for m in store.get(ns, ["same", "only-there"])] == ["mine"]
    assert [m.content for m, _ in store.query(ns, unit(0), 10)] == ["mine"]
    assert ids(store.list(ns, category="work")) == ["same"]
    assert store.count(ns) == 1 and store.count(other_ns) == 2
    assert store.delete(ns, ["same", "only-there"]) == 1
    assert [m.content for m in store.get(other_ns, ["same"])] == ["theirs"]
    assert {ns, other_ns} & set(store.namespaces()) == {ns, other_ns}


def test_namespaces_lists_readable_owners_and_drop_forgets(store: VectorStore) -> None:
    odd = Namespace("用户 Wang/√::x", "persona:with spaces/and\\slashes")
    plain = Namespace(f"u-{time.time_ns()}", "p")
    store.upsert(odd, [mem("a", vector=unit(0))])
    store.upsert(plain, [mem("b")])
    listed = store.namespaces()
    assert odd in listed and plain in listed
    assert listed == sorted(listed, key=lambda s: (s.user_id, s.persona_id))
    store.drop_namespace(odd)
    assert odd not in store.namespaces() and plain in store.namespaces()
    assert store.get(odd, ["a"]) == [] and store.count(odd) == 0
    store.upsert(odd, [mem("a", vector=unit(0, dim=4))])  # the dimension was forgotten too
    assert store.count(odd) == 1
    store.drop_namespace(odd)
    store.drop_namespace(odd)  # dropping twice is fine
    store.drop_namespace(plain)


# --- list / count ---------------------------------------------------------------------


def test_list_pages_in_created_order(store: VectorStore, ns: Namespace) -> None:
    # Inserted out of order; "b1"/"b2" share a created_at and are ordered by id.
    minutes = {"e": 40, "a": 0, "b2": 10, "d": 30, "b1": 10, "c": 20, "f": 50}
    store.upsert(
        ns,
        [
            mem(k, vector=unit(0) if i % 2 else None, minutes=m)
            for i, (k, m) in enumerate(minutes.items())
        ],
    )
    expected = ["a", "b1", "b2", "c", "d", "e", "f"]
    assert ids(store.list(ns)) == expected
    pages = [ids(store.list(ns, offset=o, limit=3)) for o in (0, 3, 6, 9)]
    assert pages == [expected[:3], expected[3:6], expected[6:], []]
    assert store.list(ns, limit=0) == []
    assert all(m.embedding is not None for m in store.list(ns) if m.id in ("a", "d", "c"))
    with pytest.raises(ValueError):
        store.list(ns, offset=-1)


def test_list_and_count_filter_by_category_and_superseded(
    store: VectorStore, ns: Namespace
) -> None:
    store.upsert(
        ns,
        [
            mem("w1", category="work", minutes=1),
            mem("w2", category="work", minutes=2, superseded_by="w3", vector=unit(0)),
            mem("w3", category="work", minutes=3, supersedes="w2"),
            mem("h1", category="health", minutes=4, vector=unit(1)),
        ],
    )
    assert ids(store.list(ns, category="work")) == ["w1", "w2", "w3"]
    assert ids(store.list(ns, category="work", include_superseded=False)) == ["w1", "w3"]
    assert store.count(ns, category="work") == 3
    assert store.count(ns, include_superseded=False) == 3
    assert store.count(ns, category="nope") == 0 and store.list(ns, category="nope") == []


def test_text_filter_is_case_insensitive_and_unicode(store: VectorStore, ns: Namespace) -> None:
    store.upsert(
        ns,
        [
            mem("osaka", "The user's sister Mei lives in OSAKA", vector=unit(0), minutes=1),
            mem("zh", "我的妹妹住在大阪", minutes=2),
            mem("strasse", "Wohnt in der Hauptstraße", minutes=3, vector=unit(1)),
            mem("pct", "likes 100% dark_chocolate", minutes=4, superseded_by="x"),
        ],
    )
    assert ids(store.list(ns, text="osaka")) == ["osaka"]
    assert ids(store.list(ns, text="mEi LIVES")) == ["osaka"]
    assert ids(store.list(ns, text="大阪")) == ["zh"]
    assert ids(store.list(ns, text="妹")) == ["zh"]
    assert ids(store.list(ns, text="HAUPTSTRASSE")) == ["strasse"]  # casefold: ß == ss
    assert ids(store.list(ns, text="0% DARK_")) == ["pct"]  # no LIKE wildcards
    assert ids(store.list(ns, text="%")) == ["pct"]
    assert store.count(ns, text="in") == 2
    assert store.count(ns, text="dark", include_superseded=False) == 0
    assert store.count(ns, text="") == 4  # empty text is no filter
    assert ids(store.list(ns, text="sister", category="work")) == []


# --- salient --------------------------------------------------------------------------


def test_salient_filters_and_orders(store: VectorStore, ns: Namespace) -> None:
    since = T0 + timedelta(days=1)
    day = 24 * 60
    store.upsert(
        ns,
        [
            mem("old-important", importance=0.95, minutes=0),  # too old
            mem("recent-minor", importance=0.3, minutes=2 * day, vector=unit(0)),  # not important
            mem("gone", importance=0.99, minutes=2 * day, superseded_by="x"),  # superseded
            mem("edge", importance=0.7, minutes=day),  # last_accessed == since: included
            mem("top", importance=0.9, minutes=2 * day, vector=unit(1)),
            mem("top-older", importance=0.9, minutes=day + 5),
            mem("mid", importance=0.8, minutes=3 * day, vector=unit(2)),
        ],
    )
    got = store.salient(ns, since=since, min_importance=0.7, n=10)
    assert ids(got) == ["top", "top-older", "mid", "edge"]
    assert got[0].embedding is not None and got[1].embedding is None
    assert ids(store.salient(ns, since=since, min_importance=0.7, n=2)) == ["top", "top-older"]
    assert store.salient(ns, since=since, min_importance=0.7, n=0) == []


def test_salient_finds_the_top_among_many(store: VectorStore, ns: Namespace) -> None:
    rng = np.random.default_rng(7)
    levels = np.round(rng.uniform(0.5, 1.0, size=450), 1)
    store.upsert(ns, [mem(f"m{i:03d}", importance=float(levels[i]), minutes=i) for i in range(450)])
    reference = sorted((-float(levels[i]), -i, f"m{i:03d}") for i in range(450) if levels[i] >= 0.6)
    got = store.salient(ns, since=T0, min_importance=0.6, n=5)
    assert ids(got) == [r[2] for r in reference[:5]]


def test_salient_with_ties_beyond_a_page(store: VectorStore, ns: Namespace) -> None:
    batch = [mem(f"t{i:03d}", importance=0.9, minutes=i) for i in range(300)]
    batch += [mem(f"z{i}", importance=0.95, minutes=i) for i in range(3)]
    store.upsert(ns, batch)
    got = store.salient(ns, since=T0, min_importance=0.5, n=5)
    assert ids(got[:3]) == ["z2", "z1", "z0"]
    assert [m.importance for m in got[3:]] == [0.9, 0.9]  # which tied ones: unspecified


# --- delete, iterate, errors ----------------------------------------------------------


def test_delete_counts_what_existed(store: VectorStore, ns: Namespace) -> None:
    store.upsert(ns, [mem("a", vector=unit(0)), mem("b"), mem("c", vector=unit(1))])
    assert store.delete(ns, ["a", "b", "missing", "a"]) == 2
    assert ids(store.list(ns)) == ["c"]
    assert [m.id for m, _ in store.query(ns, unit(0), 5)] == ["c"]
    assert store.missing_vectors(ns, 5) == []
    assert store.delete(ns, []) == 0


def test_iter_all_yields_everything_in_batches(store: VectorStore, ns: Namespace) -> None:
    memories = [
        mem(f"m{i:02d}", vector=unit(i % DIM) if i % 3 else None, minutes=i) for i in range(23)
    ]
    store.upsert(ns, memories)
    got = {m.id: m for m in store.iter_all(ns, batch=5)}
    assert sorted(got) == [m.id for m in memories]
    for memory in memories:
        assert_same(got[memory.id], memory)
    with pytest.raises(ValueError):
        list(store.iter_all(ns, batch=0))


def test_one_dimension_per_namespace(
    store: VectorStore, ns: Namespace, other_ns: Namespace
) -> None:
    store.upsert(ns, [mem("a", vector=unit(0))])
    with pytest.raises(EmbeddingDimensionError):
        store.upsert(ns, [mem("b", vector=unit(0, dim=4)), mem("c")])
    assert ids(store.list(ns)) == ["a"]  # nothing of the failed batch was written
    with pytest.raises(ValueError, match="dimension"):
        store.query(ns, unit(0, dim=4), 3)
    with pytest.raises(EmbeddingDimensionError):
        store.upsert(other_ns, [mem("x", vector=unit(0)), mem("y", vector=unit(0, dim=4))])
    store.delete(ns, ["a"])
    with pytest.raises(EmbeddingDimensionError):  # kept after deleting everything
        store.upsert(ns, [mem("b", vector=unit(0, dim=4))])
    store.upsert(other_ns, [mem("x", vector=unit(0, dim=16))])  # other namespaces: free


@pytest.mark.parametrize(
    "bad",
    [np.zeros(DIM), np.full(DIM, np.nan), np.ones((2, DIM)), np.array([]), ["a", "b"]],
    ids=["zero", "nan", "2d", "empty", "text"],
)
def test_invalid_vectors_are_rejected(store: VectorStore, ns: Namespace, bad: object) -> None:
    with pytest.raises(ValueError):
        store.upsert(ns, [mem("a", vector=bad)])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.query(ns, bad, 3)  # type: ignore[arg-type]
    assert store.count(ns) == 0


def test_naive_timestamps_are_rejected(store: VectorStore, ns: Namespace) -> None:
    naive = mem("a", created_at=datetime(2026, 1, 1), last_accessed=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="timezone"):
        store.upsert(ns, [naive])
    with pytest.raises(ValueError, match="timezone"):
        store.salient(ns, since=datetime(2026, 1, 1), min_importance=0.5, n=3)


def test_concurrent_writers(store: VectorStore, ns: Namespace) -> None:
    spaces = [Namespace(ns.user_id, f"p{i}") for i in range(4)]

    def write(space: Namespace) -> None:
        for j in range(5):
            store.upsert(space, [mem(f"m{j}", vector=unit(j % DIM)), mem(f"n{j}")])

    threads = [threading.Thread(target=write, args=(s,)) for s in spaces]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [store.count(s) for s in spaces] == [10, 10, 10, 10]


# --- Chroma only ----------------------------------------------------------------------


def test_chroma_persists_across_reopen(tmp_path: Path) -> None:
    from backend.stores.chroma_store import ChromaVectorStore

    ns = Namespace("u", "p")
    with ChromaVectorStore.persistent(tmp_path) as first:
        first.upsert(ns, [mem("a", vector=unit(0)), mem("b")])
    with ChromaVectorStore.persistent(tmp_path) as second:
        assert ids(second.list(ns)) == ["a", "b"]
        assert second.namespaces() == [ns]


def test_chroma_collections_are_hashed_and_configured(chroma_http_store: VectorStore) -> None:
    ns = Namespace("Ünïcode user", "p")
    chroma_http_store.upsert(ns, [mem("a", vector=unit(0))])
    client = chroma_http_store._client  # type: ignore[attr-defined]
    name = codec.collection_name(ns, codec.ROLE_VECTORS)
    assert name.startswith("lm_") and len(name) == 3 + 32 + 4
    collection = client.get_collection(name, embedding_function=None)
    assert collection.metadata["lm_user_id"] == "Ünïcode user"
    hnsw = collection.configuration_json["hnsw"]
    params = chroma_http_store._hnsw  # type: ignore[attr-defined]
    assert hnsw["space"] == "cosine"
    assert (hnsw["ef_construction"], hnsw["ef_search"], hnsw["max_neighbors"]) == (
        params.ef_construction,
        params.ef_search,
        params.max_neighbors,
    )
    chroma_http_store.drop_namespace(ns)


def test_chroma_stale_handles_are_looked_up_again(chroma_server: tuple[str, int]) -> None:
    from backend.stores.chroma_store import ChromaVectorStore

    ns = Namespace(f"u-{time.time_ns()}", "p")
    with ChromaVectorStore.http(*chroma_server) as a, ChromaVectorStore.http(*chroma_server) as b:
        a.upsert(ns, [mem("x", vector=unit(0))])
        assert b.count(ns) == 1  # b caches the collection handles
        a.drop_namespace(ns)
        a.upsert(ns, [mem("y", vector=unit(1))])  # new collections, new ids
        assert ids(b.list(ns)) == ["y"]
        b.upsert(ns, [mem("z")])
        assert a.count(ns) == 2
        a.drop_namespace(ns)


def test_chroma_unreachable_server_fails_fast(unused_port: int) -> None:
    from backend.stores.chroma_store import ChromaVectorStore

    started = time.monotonic()
    with pytest.raises(VectorStoreUnavailable):
        ChromaVectorStore.http("127.0.0.1", unused_port, timeout_s=2.0)
    assert time.monotonic() - started < 5.0
    with pytest.raises(ValueError):
        ChromaVectorStore(path="/tmp/x", host="localhost")


def test_chroma_outage_raises_unavailable(
    private_chroma_server: tuple[subprocess.Popen[bytes], int],
) -> None:
    from backend.stores.chroma_store import ChromaVectorStore

    proc, port = private_chroma_server
    ns = Namespace("u", "p")
    with ChromaVectorStore.http("127.0.0.1", port, timeout_s=1.0) as store:
        store.upsert(ns, [mem("a", vector=unit(0))])
        proc.send_signal(signal.SIGSTOP)  # a hung server: requests time out
        started = time.monotonic()
        with pytest.raises(VectorStoreUnavailable):
            store.count(ns)
        assert time.monotonic() - started < 5.0
        proc.send_signal(signal.SIGCONT)
        assert store.count(ns) == 1
        proc.kill()  # a dead server: connections are refused
        proc.wait(timeout=10)
        for call in (lambda: store.get(ns, ["a"]), lambda: store.query(ns, unit(0), 3)):
            with pytest.raises(VectorStoreUnavailable):
                call()
        with pytest.raises(VectorStoreUnavailable):
            store.upsert(ns, [mem("b")])
