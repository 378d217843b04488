from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from backend.clock import FixedClock
from backend.config import MemorySettings
from backend.longterm.memory import LongTermMemory
from backend.memory.entities import EntityEdit, edit_entity
from backend.memory.hybrid import lexical_tokens
from backend.memory.types import About, Candidate, Emotion, Memory, Namespace
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.lexical_index import IndexedVectorStore, InMemoryLexicalIndex
from backend.stores.vector_port import VectorStore, VectorStoreUnavailable

from .fakes import BagOfWordsEmbedder

NS = Namespace("alice", "companion")
OTHER = Namespace("bob", "companion")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def ltm() -> LongTermMemory:
    counter = iter(range(1, 10_000))
    return LongTermMemory(
        InMemoryVectorStore(),
        BagOfWordsEmbedder(),
        FixedClock(T0),
        id_factory=lambda: f"m{next(counter):04d}",
    )


def fact(content: str, **kw: object) -> Candidate:
    fields: dict[str, object] = {"importance": 0.8, "confidence": 0.9, "category": "personal_fact"}
    fields.update(kw)
    return Candidate(content=content, **fields)  # type: ignore[arg-type]


def test_write_reinforce_reject_supersede(ltm: LongTermMemory) -> None:
    out = ltm.write(
        NS, [fact("The user lives in Guangzhou"), fact("The user said hi", importance=0.1)]
    )
    assert [o.action for o in out] == ["write", "reject"]
    assert out[1].reason == "importance 0.10 < 0.40"
    written = out[0].memory_id
    # Same words again: a near-duplicate reinforces instead of writing twice.
    again = ltm.write(NS, [fact("the user lives in Guangzhou!", importance=0.9)])
    assert (again[0].action, again[0].memory_id) == ("reinforce", written)
    stored = ltm.get(NS, written)
    assert stored is not None and (stored.access_count, stored.importance) == (1, 0.9)
    # An update supersedes; both versions are kept and linked both ways.
    upd = ltm.write(
        NS, [fact("The user moved to Hangzhou", supersedes="The user lives in Guangzhou")]
    )
    assert (upd[0].action, upd[0].target_id) == ("supersede", written)
    chain = ltm.version_chain(NS, written)
    assert [m.content for m in chain] == [
        "The user lives in Guangzhou",
        "The user moved to Hangzhou",
    ]
    assert chain[0].superseded_by == chain[1].id and chain[1].supersedes == chain[0].id


def test_echo_of_recalled_memory_reinforces(ltm: LongTermMemory) -> None:
    ltm.write(NS, [fact("The user has a hamster named Bean")])
    activation = ltm.activate(NS, "how is my hamster Bean doing")
    recalled = activation.memories
    assert [m.content for m in recalled] == ["The user has a hamster named Bean"]
    out = ltm.write(NS, [fact("User has a hamster named Bean")], recalled=recalled)
    assert (out[0].action, out[0].reason) == ("reinforce", "echo of a memory recalled this turn")
    assert ltm.store.count(NS) == 1


def test_activation_hides_superseded_and_stays_in_namespace(ltm: LongTermMemory) -> None:
    ltm.write(NS, [fact("The user's wedding is in October")])
    ltm.write(NS, [fact("The user's wedding moved to December", supersedes="wedding in October")])
    ltm.write(OTHER, [fact("Bob's wedding is in June")])
    contents = [m.content for m in ltm.activate(NS, "when is my wedding").memories]
    assert contents == ["The user's wedding moved to December"]
    assert [m.content for m in ltm.activate(OTHER, "wedding").memories] == [
        "Bob's wedding is in June"
    ]


def test_activation_breakdown_and_timings(ltm: LongTermMemory) -> None:
    ltm.write(NS, [fact("The user drinks coffee every morning", emotion=Emotion("joy", 0.8))])
    activation = ltm.activate(NS, "coffee this morning", target_emotion="happy")
    item = activation.retrieval.items[0]
    assert item.score.cosine is not None and item.score.relevance > 0
    assert item.score.emotion == pytest.approx(0.5 + 0.2)
    assert activation.embed_ms >= 0 and activation.search_ms >= 0 and activation.degraded is None


def test_embedder_down_costs_the_vector_not_the_write(ltm: LongTermMemory) -> None:
    embedder = ltm.embedder
    assert isinstance(embedder, BagOfWordsEmbedder)
    embedder.down = True
    out = ltm.write(NS, [fact("The user is allergic to peanuts")])
    assert out[0].action == "write" and not out[0].has_vector
    memory = ltm.get(NS, out[0].memory_id or "")
    assert memory is not None and memory.embedding is None
    # Keyword-only activation still finds it.
    activation = ltm.activate(NS, "any peanuts in this recipe?")
    assert activation.degraded == "no query vector: keywords only"
    assert [m.id for m in activation.memories] == [memory.id]
    # Identical text is still deduplicated without vectors.
    assert ltm.write(NS, [fact("The user is allergic to peanuts")])[0].action == "reinforce"
    # Back up: the backfill gives it a vector.
    embedder.down = False
    assert ltm.backfill(NS) == 1
    refreshed = ltm.get(NS, memory.id)
    assert refreshed is not None and refreshed.embedding is not None
    assert ltm.backfill(NS) == 0


def test_reinforce_marks_use(ltm: LongTermMemory) -> None:
    out = ltm.write(NS, [fact("The user plays piano")])
    assert ltm.reinforce(NS, [out[0].memory_id or "", "missing"]) == 1
    memory = ltm.get(NS, out[0].memory_id or "")
    assert memory is not None and memory.access_count == 1


def test_update_reembeds_on_content_edit(ltm: LongTermMemory) -> None:
    out = ltm.write(NS, [fact("The user plays piano")])
    mid = out[0].memory_id or ""
    before = ltm.get(NS, mid)
    edited = ltm.update(NS, mid, content="The user plays the violin", importance=2.0, pinned=True)
    assert edited.importance == 1.0 and edited.pinned
    assert before is not None and before.embedding is not None and edited.embedding is not None
    assert float(before.embedding @ edited.embedding) < 0.99
    with pytest.raises(KeyError):
        ltm.update(NS, "nope", importance=0.5)


def test_decay_pass_fades_old_unpinned_memories(ltm: LongTermMemory) -> None:
    weak = ltm.write(
        NS, [fact("The user tried a new cafe", importance=0.45, category="experience")]
    )
    strong = ltm.write(NS, [fact("The user's father is called Jun", importance=0.9)])
    pinned = ltm.write(
        NS, [fact("The user went to a concert", importance=0.45, category="experience")]
    )
    ltm.update(NS, pinned[0].memory_id or "", pinned=True)
    clock = ltm.clock
    assert isinstance(clock, FixedClock)
    clock.advance(days=400)
    report = ltm.decay_pass(NS)
    assert (report.checked, report.faded, report.pinned_kept) == (3, 1, 1)
    assert ltm.get(NS, weak[0].memory_id or "") is None
    assert ltm.get(NS, strong[0].memory_id or "") is not None


def test_export_import_round_trip_loses_nothing(ltm: LongTermMemory) -> None:
    ltm.write(
        NS, [fact("The user loves 拿铁", emotion=Emotion("joy", 0.7), keywords=("拿铁", "coffee"))]
    )
    ltm.write(NS, [fact("The user's wedding is in October")])
    ltm.write(NS, [fact("The wedding moved to December", supersedes="wedding in October")])
    sister = About("Mei", "sister")
    ltm.write(NS, [fact("Mei lives in Osaka", about=(sister,))])
    lines = list(ltm.export_jsonl(NS))
    assert len(lines) == 4 and all(line.endswith("\n") for line in lines)
    target = Namespace("alice", "tutor")
    report = ltm.import_jsonl(target, [*lines, "not json\n", json.dumps({"id": "x"}) + "\n"])
    assert (report.written, report.duplicates, report.invalid) == (4, 0, 2)
    assert list(ltm.export_jsonl(target)) == lines
    (mei,) = [m for m in ltm.store.list(target, limit=10) if m.content == "Mei lives in Osaka"]
    assert mei.about == (sister,)  # whom it is about travels with it
    again = ltm.import_jsonl(target, lines)
    assert (again.written, again.duplicates) == (0, 4)


def test_import_drops_vectors_of_another_model(ltm: LongTermMemory) -> None:
    ltm.write(NS, [fact("The user likes tea")])
    line = json.loads(next(ltm.export_jsonl(NS)))
    line["embedding_model"] = "some-other-model"
    line["embedding"] = [0.5] * 7
    report = ltm.import_jsonl(OTHER, [json.dumps(line)])
    assert report.written == 1
    memory = ltm.get(OTHER, line["id"])
    assert memory is not None and memory.embedding is not None and memory.embedding.shape == (64,)


# --- hybrid activation and the lexical index ---------------------------------------------


def _hybrid(store: VectorStore | None = None, **activation: object) -> LongTermMemory:
    counter = iter(range(1, 10_000))
    policy = replace(MemorySettings().activation_policy(), **activation)  # type: ignore[arg-type]
    return LongTermMemory(
        store or InMemoryVectorStore(), BagOfWordsEmbedder(), FixedClock(T0),
        activation=policy, id_factory=lambda: f"h{next(counter):04d}",
    )  # fmt: skip


def test_engine_default_keeps_no_lexical_index(ltm: LongTermMemory) -> None:
    assert ltm.lexical is None and isinstance(ltm.store, InMemoryVectorStore)
    hybrid = _hybrid()
    assert isinstance(hybrid.lexical, InMemoryLexicalIndex)
    assert isinstance(hybrid.store, IndexedVectorStore)


def test_lexical_candidates_reach_beyond_the_ann_pool() -> None:
    ltm = _hybrid(pool=1)  # importance 0.6: below the salient bar
    ltm.write(NS, [fact("The user's cat is called Dumpling", importance=0.6)])
    ltm.write(NS, [fact("The user likes morning walks in the park before work", importance=0.6)])
    ltm.write(NS, [fact("The user's sister studies law in Osaka", importance=0.6)])
    contents = [m.content for m in ltm.activate(NS, "morning walks in the park with Dumpling")
                .memories]  # fmt: skip
    assert "The user's cat is called Dumpling" in contents
    assert "The user likes morning walks in the park before work" in contents
    # Without the lexical index the one ANN neighbour is all there is (plus salient).
    plain = _hybrid(store=ltm.store.inner, pool=1, lexical_pool=0)  # type: ignore[attr-defined]
    assert plain.lexical is None
    assert "The user's cat is called Dumpling" not in [
        m.content for m in plain.activate(NS, "morning walks in the park with Dumpling").memories
    ]


def test_lexical_index_follows_writes_edits_deletes_and_supersession() -> None:
    ltm = _hybrid(pool=1)
    ltm.write(NS, [fact("The user's hamster is called Bean")])
    ltm.activate(NS, "warm up")  # loads the namespace into the index
    out = ltm.write(NS, [fact("The user plays the cello on Sundays")])
    cello = out[0].memory_id or ""
    index = ltm.lexical
    assert index is not None
    assert cello in [i for i, _ in index.search(NS, lexical_tokens("cello"), 5)]
    ltm.update(NS, cello, content="The user plays the viola on Sundays")
    assert index.search(NS, lexical_tokens("cello"), 5) == []
    assert [i for i, _ in index.search(NS, lexical_tokens("viola"), 5)] == [cello]
    ltm.write(NS, [fact("The user switched to the violin", supersedes=cello)])
    assert index.search(NS, lexical_tokens("viola"), 5) == []  # superseded: not a candidate
    assert ltm.delete(NS, cello)
    assert index.stats(NS, ["viola"]).doc_freq == {}
    ltm.store.drop_namespace(NS)
    assert not index.is_loaded(NS)  # type: ignore[attr-defined]


def test_lexical_index_loads_a_namespace_from_the_store_lazily() -> None:
    raw = InMemoryVectorStore()
    writer = LongTermMemory(raw, BagOfWordsEmbedder(), FixedClock(T0))  # no index
    writer.write(NS, [fact("The user's tortoise is called Socrates")])
    writer.write(NS, [fact("The user works night shifts at the hospital")])
    ltm = _hybrid(store=raw, pool=1)
    assert ltm.lexical is not None and not ltm.lexical.is_loaded(NS)  # type: ignore[attr-defined]
    contents = [m.content for m in ltm.activate(NS, "night shifts and Socrates").memories]
    assert "The user's tortoise is called Socrates" in contents
    assert ltm.lexical.size(NS) == 2  # type: ignore[attr-defined]


def test_writes_during_a_load_are_replayed() -> None:
    index = InMemoryLexicalIndex()
    stored = [_mem("a", "The user keeps bees"), _mem("b", "The user owns a boat")]

    def load() -> Iterator[Memory]:
        yield stored[0]
        # Another thread writes while the load is half way: queued, then replayed.
        index.upsert(NS, [_mem("c", "The user bought a kayak")])
        index.delete(NS, ["b"])
        yield stored[1]

    index.ensure(NS, load)
    assert index.size(NS) == 2
    assert [i for i, _ in index.search(NS, lexical_tokens("kayak boat bees"), 5)] == ["a", "c"]
    index.ensure(NS, lambda: pytest.fail("loaded twice"))


def test_index_salient_matches_the_store() -> None:
    rng = np.random.default_rng(3)
    store = InMemoryVectorStore()
    index = InMemoryLexicalIndex()
    memories = [
        _mem(
            f"m{i:03d}",
            f"memory number {i}",
            importance=float(rng.choice([0.5, 0.7, 0.8, 0.9])),
            days_ago=float(rng.uniform(0, 60)),
            superseded=bool(rng.uniform() < 0.1),
        )
        for i in range(200)
    ]
    store.upsert(NS, memories)
    index.ensure(NS, lambda: store.iter_all(NS))
    for days, floor, n in [(30, 0.7, 5), (10, 0.8, 50), (60, 0.0, 300), (1, 0.95, 5), (30, 0.7, 0)]:
        since = T0 - timedelta(days=days)
        expected = [m.id for m in store.salient(NS, since=since, min_importance=floor, n=n)]
        assert index.salient(NS, since=since, min_importance=floor, n=n) == expected
    assert index.salient(OTHER, since=T0, min_importance=0.0, n=5) is None  # not loaded


def test_activation_degrades_when_the_store_is_down() -> None:
    class DownStore(InMemoryVectorStore):
        def iter_all(self, ns: Namespace, batch: int = 500) -> Iterator[Memory]:
            raise VectorStoreUnavailable("down")

    ltm = _hybrid(store=DownStore())
    activation = ltm.activate(NS, "anything")
    assert activation.memories == [] and (activation.degraded or "").startswith("store unavailable")


def test_hybrid_activation_collapses_restatements() -> None:
    ltm = _hybrid()
    store = ltm.store
    vectors = np.eye(64, dtype=np.float32)
    restatements = [
        _mem(f"r{i}", text, importance=0.8, vector=vectors[0] + 0.05 * vectors[i + 1],
             keywords=("dumpling", "cat"))
        for i, text in enumerate([
            "The user's cat is called Dumpling", "Dumpling is the user's ginger cat",
            "The user has a ginger cat named Dumpling",
        ])
    ]  # fmt: skip
    # A distinct fact the query still speaks for (cosine 0.6), so that the relevance floor
    # keeps it: the collapse must leave it alone.
    near = 0.6 * vectors[0] + 0.8 * vectors[10]
    other = _mem("o", "The user's sister lives in Osaka", vector=near, importance=0.8)
    store.upsert(NS, [*restatements, other])
    activation = ltm.activate(NS, "how is Dumpling the cat", query_vector=vectors[0])
    ids = [m.id for m in activation.memories]
    assert sum(i.startswith("r") for i in ids) == 1 and "o" in ids
    assert len(activation.retrieval.collapsed) == 2


def _mem(
    memory_id: str,
    content: str,
    *,
    importance: float = 0.6,
    days_ago: float = 0.0,
    superseded: bool = False,
    vector: np.ndarray | None = None,
    keywords: tuple[str, ...] = (),
) -> Memory:
    when = T0 - timedelta(days=days_ago)
    return Memory(
        id=memory_id, content=content, category="general", importance=importance,
        created_at=when, last_accessed=when, keywords=keywords,
        superseded_by="newer" if superseded else None,
        embedding=None if vector is None else vector / np.linalg.norm(vector),
    )  # fmt: skip


@pytest.mark.parametrize("lexical_pool", [50, 0])
def test_a_relation_in_the_message_reaches_the_facts_of_its_entity(lexical_pool: int) -> None:
    ltm = _hybrid(pool=1, lexical_pool=lexical_pool)  # importance 0.6: below the salient bar
    ltm.write(NS, [fact("The user's older sister Xiaoyu lives in Chengdu", importance=0.6)])
    ltm.write(NS, [fact("Xiaoyu moved the wedding to December", importance=0.6)])
    ltm.write(NS, [fact("The user likes morning walks in the park", importance=0.6)])
    wedding = "Xiaoyu moved the wedding to December"
    # "sister" names Xiaoyu, whose fact never says "sister": recalled through her name.
    recalled = [m.content for m in ltm.activate(NS, "how is my sister doing?").memories]
    assert wedding in recalled
    # The same message without the relation does not reach it.
    assert wedding not in [m.content for m in ltm.activate(NS, "how is she doing?").memories]


@pytest.mark.parametrize("lexical_pool", [50, 0])
def test_recall_through_entities_reads_the_users_edits(lexical_pool: int) -> None:
    edits: list[EntityEdit] = []
    ltm = _hybrid(pool=1, lexical_pool=lexical_pool)
    ltm.entity_edits = lambda ns: edits if ns == NS else []
    ltm.write(NS, [fact("The user's friend Nainai grows tomatoes", importance=0.6)])
    ltm.write(NS, [fact("Nainai makes mooncakes every autumn", importance=0.6)])
    ltm.write(NS, [fact("Lao Lao sings opera on Sundays", importance=0.6)])
    ltm.write(NS, [fact("The user likes morning walks in the park", importance=0.6)])

    def recalled(query: str) -> list[str]:
        return [m.content for m in ltm.activate(NS, query).memories]

    assert "Nainai makes mooncakes every autumn" not in recalled("how's my grandma?")
    # The user says Nainai is their grandma, also called Lao Lao.
    edits[:] = edit_entity([], "nainai", relation="grandma", aliases=["Lao Lao"])
    found = recalled("how's my grandma?")
    assert "Nainai makes mooncakes every autumn" in found
    assert "Lao Lao sings opera on Sundays" in found
    assert [e.name for e in ltm.activate(NS, "how's my grandma?").entities] == ["Nainai"]
    # Deleted: no one is reached through her any more.
    edits[:] = edit_entity(edits, "nainai", deleted=True)
    assert "Nainai makes mooncakes every autumn" not in recalled("how's my grandma?")


def test_unreadable_entity_edits_cost_recall_nothing_else() -> None:
    ltm = _hybrid(pool=1)

    def broken(ns: Namespace) -> list[EntityEdit]:
        raise RuntimeError("session database down")

    ltm.entity_edits = broken
    ltm.write(NS, [fact("The user's older sister Xiaoyu lives in Chengdu", importance=0.6)])
    ltm.write(NS, [fact("Xiaoyu moved the wedding to December", importance=0.6)])
    activation = ltm.activate(NS, "how is my sister doing?")
    assert "Xiaoyu moved the wedding to December" in [m.content for m in activation.memories]


class _QueryFormEmbedder(BagOfWordsEmbedder):
    """Embeds a search query in another form than a stored text, as e5 does, and counts."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        self.queries += texts
        return self.embed(texts)


def test_activation_embeds_the_message_as_a_query_and_writes_as_passages() -> None:
    embedder = _QueryFormEmbedder()
    ltm = LongTermMemory(InMemoryVectorStore(), embedder, FixedClock(T0))
    ltm.write(NS, [fact("The user has a hamster named Bean")])
    assert embedder.queries == []  # the memory and the gate's comparisons: stored form
    activation = ltm.activate(NS, "how is my hamster Bean doing")
    assert embedder.queries == ["how is my hamster Bean doing"]
    assert activation.query_vector is not None


def test_a_question_about_the_user_as_a_whole_recalls_their_most_important_facts() -> None:
    ltm = _hybrid()
    facts = [
        ("The user is Maya", 0.85),
        ("The user moved to Lisbon for a new job as a nurse", 0.8),
        ("The user's cat Biscuit knocks things over", 0.75),
        ("The user grows tomatoes on the balcony", 0.5),  # under the salient bar
    ]
    for content, importance in facts:
        ltm.write(NS, [fact(content, importance=importance)])
    ltm.write(NS, [fact("The companion likes autumn", subject="persona")])
    # A message about something else: the relevance floor keeps few of them, if any...
    assert len(ltm.activate(NS, "tell me a joke").memories) < len(facts)
    # ...but asked what it knows of the user, the companion reads all of theirs, held
    # (shown, not reinforced: asking is no use of a fact).
    activation = ltm.activate(NS, "what do you know about me?")
    recalled = [m.content for m in activation.memories]
    assert sorted(recalled) == sorted(content for content, _ in facts)
    assert set(activation.retrieval.held) == {m.id for m in activation.memories}


def test_the_profile_reads_beyond_the_recent_salient_memories() -> None:
    ltm = _hybrid(pool=1, lexical_pool=0)  # the pool alone would hold one ANN neighbour
    long_ago = T0 - timedelta(days=400)  # outside the salient rule's 30 days
    for content in (
        "The user plays the cello", "The user speaks Portuguese", "The user runs marathons",
        "The user collects stamps", "The user keeps bees", "The user bakes sourdough",
    ):  # fmt: skip
        ltm.write(NS, [fact(content)])
    stored = list(ltm.store.iter_all(NS))
    ltm.store.upsert(NS, [replace(m, last_accessed=long_ago) for m in stored])
    assert len(ltm.activate(NS, "who am I?").memories) == 6  # not just one ANN neighbour


@pytest.mark.parametrize("lexical_pool", [50, 0])
def test_a_message_about_food_recalls_what_the_user_does_not_eat(lexical_pool: int) -> None:
    ltm = _hybrid(pool=1, lexical_pool=lexical_pool)  # importance 0.6: below the salient bar
    ltm.write(NS, [fact("The user is vegetarian", importance=0.6, category="preference")])
    ltm.write(NS, [fact("Ana and Ben are coming over on Saturday", importance=0.6)])
    ltm.write(NS, [fact("The user likes morning walks in the park", importance=0.6)])

    def recalled(query: str) -> list[str]:
        return [m.content for m in ltm.activate(NS, query).memories]

    # No word of the note, and the one ANN neighbour is the visit: found by the diet words.
    cooking = recalled("what should I cook for Ana and Ben on Saturday?")
    assert "The user is vegetarian" in cooking
    assert "Ana and Ben are coming over on Saturday" in cooking
    # A message about something else does not reach it.
    assert "The user is vegetarian" not in recalled("are Ana and Ben coming on Saturday?")
