"""The REST API (``/api/...``): personas, memories, sessions, over HTTP against the harness."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from backend.memory.types import CATEGORIES, About, Candidate, Namespace
from backend.personas import Persona, PersonaRegistry
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.vector_port import VectorStoreUnavailable
from backend.web.schemas import Category
from tests.llm.scripted_server import Reply
from tests.web.harness import HIPPOCAMPUS_OK, AppHarness

NS = Namespace("local", "companion")


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path) as harness:
        add_persona(harness, "friend")
        yield harness


@pytest.fixture
def api(h: AppHarness) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=h.base_url, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """One app for the tests that store nothing (refused requests), to keep them fast."""
    with (
        AppHarness(tmp_path_factory.mktemp("shared")) as harness,
        httpx.Client(base_url=harness.base_url, timeout=10) as client,
    ):
        yield client


def add_persona(h: AppHarness, persona_id: str) -> None:
    """A second persona beside the shipped ones (the harness loads ``personas/``)."""
    personas = {p.id: p for p in h.services.personas}
    personas[persona_id] = Persona(
        id=persona_id, name=persona_id.title(), description="", system_prompt="Be kind."
    )
    registry = PersonaRegistry(personas, h.services.personas.default.id)
    h.services.personas = registry
    h.services.engine.personas = registry


def create(api: httpx.Client, content: str, persona: str = "companion", **fields: Any) -> dict:
    r = api.post(f"/api/personas/{persona}/memories", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()


def memories(api: httpx.Client, persona: str = "companion", **params: Any) -> dict:
    r = api.get(f"/api/personas/{persona}/memories", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def contents(page: dict) -> list[str]:
    return [m["content"] for m in page["items"]]


def chat(api: httpx.Client, text: str, session: str | None = None) -> str:
    headers = {"X-Session-Id": session} if session else {}
    r = api.post(
        "/v1/chat/completions",
        json={"model": "companion", "messages": [{"role": "user", "content": text}]},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    return r.headers["x-session-id"]


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["message"] and error["type"]
    if code is not None:
        assert error["code"] == code


# --- personas ----------------------------------------------------------------------------


def test_category_literal_matches_the_engine() -> None:
    assert set(get_args(Category)) == set(CATEGORIES)


def test_personas_list_and_get(api: httpx.Client) -> None:
    items = api.get("/api/personas").json()["items"]
    assert [p["id"] for p in items] == ["coach", "companion", "tutor", "friend"]
    assert [p["default"] for p in items] == [False, True, False, False]
    card = api.get("/api/personas/companion").json()
    assert card["name"] == "Companion" and card["system_prompt"] and "memory" in card
    assert_error(api.get("/api/personas/nobody"), 404, "persona_not_found")
    assert_error(api.get("/api/personas/Not_An_Id"), 400)


# --- memories ----------------------------------------------------------------------------


def test_create_get_and_stored_as_written(h: AppHarness, api: httpx.Client) -> None:
    made = create(api, "  The user's sister is called Mei  ", category="relationship", pinned=True)
    assert made["content"] == "The user's sister is called Mei"
    assert (made["category"], made["importance"], made["pinned"]) == ("relationship", 0.5, True)
    assert made["has_vector"] and made["source_session"] is None
    got = api.get(f"/api/personas/companion/memories/{made['id']}").json()
    assert got["content"] == made["content"] and [v["id"] for v in got["versions"]] == [made["id"]]
    stored = h.services.long_term.get(NS, made["id"])
    assert stored is not None and stored.embedding is not None and stored.pinned
    # A low importance the save gate would reject is stored anyway: the user wrote it.
    assert create(api, "small thing", importance=0.05)["importance"] == 0.05


def test_list_paging_newest_first(api: httpx.Client) -> None:
    for n in range(5):
        create(api, f"fact number {n}")
    first = memories(api, limit=2)
    assert contents(first) == ["fact number 4", "fact number 3"]
    assert (first["total"], first["offset"], first["limit"], first["has_more"]) == (5, 0, 2, True)
    assert contents(memories(api, limit=2, offset=2)) == ["fact number 2", "fact number 1"]
    last = memories(api, limit=2, offset=4)
    assert contents(last) == ["fact number 0"] and not last["has_more"]
    assert memories(api, offset=10)["items"] == []


def test_list_filters_and_search(api: httpx.Client) -> None:
    create(api, "The user drinks green TEA every morning", category="preference")
    create(api, "我喜欢喝茶，尤其是龙井", category="preference")
    create(api, "我的猫叫小白", category="relationship")
    create(api, "The user works as a nurse", category="work")
    assert contents(memories(api, q="猫")) == ["我的猫叫小白"]
    assert contents(memories(api, q="喝茶")) == ["我喜欢喝茶，尤其是龙井"]
    assert contents(memories(api, q="tea")) == ["The user drinks green TEA every morning"]
    prefs = memories(api, category="preference")
    assert prefs["total"] == 2 and {m["category"] for m in prefs["items"]} == {"preference"}
    assert contents(memories(api, category="work", q="nurse")) == ["The user works as a nurse"]
    assert memories(api, q="nothing like this")["total"] == 0


def test_list_sorts(h: AppHarness, api: httpx.Client) -> None:
    low = create(api, "low importance", importance=0.2)
    high = create(api, "high importance", importance=0.9)
    mid = create(api, "middle importance", importance=0.5)
    assert [m["id"] for m in memories(api, sort="importance")["items"]] == [
        high["id"],
        mid["id"],
        low["id"],
    ]
    h.services.long_term.reinforce(NS, [low["id"]])  # recalled just now
    by_recency = memories(api, sort="recency", limit=2)
    assert [m["id"] for m in by_recency["items"]] == [low["id"], mid["id"]]
    assert by_recency["has_more"]
    assert [m["id"] for m in memories(api, sort="created")["items"]] == [
        mid["id"],
        high["id"],
        low["id"],
    ]


def test_version_chain_and_superseded_filter(h: AppHarness, api: httpx.Client) -> None:
    old = create(api, "The user lives in Guangzhou", category="personal_fact", importance=0.8)
    [outcome] = h.services.long_term.write(
        NS,
        [
            Candidate(
                "The user moved to Hangzhou",
                category="personal_fact",
                importance=0.8,
                confidence=0.9,
                supersedes=old["id"],
            )
        ],
    )
    assert outcome.action == "supersede" and outcome.memory_id
    new_id = outcome.memory_id
    for memory_id in (old["id"], new_id):
        got = api.get(f"/api/personas/companion/memories/{memory_id}").json()
        assert [v["id"] for v in got["versions"]] == [old["id"], new_id]
    detail = api.get(f"/api/personas/companion/memories/{old['id']}").json()
    assert detail["superseded_by"] == new_id
    assert contents(memories(api)) == ["The user moved to Hangzhou"]
    both = memories(api, include_superseded=True)
    assert set(contents(both)) == {"The user lives in Guangzhou", "The user moved to Hangzhou"}
    # Deleting the newest version makes the older one live again.
    assert api.delete(f"/api/personas/companion/memories/{new_id}").status_code == 204
    assert contents(memories(api)) == ["The user lives in Guangzhou"]
    revived = api.get(f"/api/personas/companion/memories/{old['id']}").json()
    assert revived["superseded_by"] is None and len(revived["versions"]) == 1


def test_a_memory_says_whom_it_is_about(h: AppHarness, api: httpx.Client) -> None:
    [outcome] = h.services.long_term.write(
        NS,
        [
            Candidate(
                "Tudou runs on his wheel all night",
                category="general",
                importance=0.7,
                confidence=0.9,
                about=(About("Tudou", "hamster"),),
            )
        ],
    )
    path = f"/api/personas/companion/memories/{outcome.memory_id}"
    got = api.get(path).json()
    assert got["about"] == [{"name": "Tudou", "relation": "hamster"}]
    assert create(api, "The user likes tea")["about"] == []
    # An edit that still names Tudou keeps it; one that no longer does drops it.
    kept = api.patch(path, json={"content": "Tudou runs on his wheel until dawn"}).json()
    assert kept["about"] == [{"name": "Tudou", "relation": "hamster"}]
    gone = api.patch(path, json={"content": "Biscuit runs on his wheel until dawn"}).json()
    assert gone["about"] == []


def test_patch_pin_and_reembed(h: AppHarness, api: httpx.Client) -> None:
    made = create(api, "The user likes jazz")
    url = f"/api/personas/companion/memories/{made['id']}"
    before = h.services.long_term.get(NS, made["id"])
    assert before is not None and before.embedding is not None
    r = api.patch(url, json={"pinned": True})
    assert r.status_code == 200 and r.json()["pinned"] and r.json()["content"] == made["content"]
    r = api.patch(url, json={"content": "The user loves cool jazz", "importance": 0.7})
    body = r.json()
    assert (body["content"], body["importance"], body["pinned"]) == (
        "The user loves cool jazz",
        0.7,
        True,
    )
    after = h.services.long_term.get(NS, made["id"])
    assert after is not None and after.embedding is not None
    assert not (after.embedding == before.embedding).all()  # re-embedded
    r = api.patch(url, json={"category": "interest", "pinned": False})
    assert (r.json()["category"], r.json()["pinned"]) == ("interest", False)
    assert api.patch(url, json={}).json()["content"] == "The user loves cool jazz"


def test_delete_memory(api: httpx.Client) -> None:
    made = create(api, "to be forgotten")
    url = f"/api/personas/companion/memories/{made['id']}"
    r = api.delete(url)
    assert r.status_code == 204 and r.content == b""
    assert_error(api.get(url), 404, "memory_not_found")
    assert_error(api.delete(url), 404, "memory_not_found")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/personas/nobody/memories", None),
        ("POST", "/api/personas/nobody/memories", {"content": "x"}),
        ("GET", "/api/personas/nobody/memories/export", None),
        ("GET", "/api/personas/companion/memories/missing", None),
        ("PATCH", "/api/personas/companion/memories/missing", {"pinned": True}),
        ("DELETE", "/api/personas/companion/memories/missing", None),
        ("GET", "/api/sessions/missing", None),
        ("PATCH", "/api/sessions/missing", {"title": "x"}),
        ("DELETE", "/api/sessions/missing", None),
    ],
)
def test_not_found(shared: httpx.Client, method: str, path: str, body: dict | None) -> None:
    assert_error(shared.request(method, path, json=body), 404)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/personas/companion/memories", {"content": "x", "importance": 1.5}),
        ("POST", "/api/personas/companion/memories", {"content": "x", "importance": -0.1}),
        ("POST", "/api/personas/companion/memories", {"content": "   "}),
        ("POST", "/api/personas/companion/memories", {"content": ""}),
        ("POST", "/api/personas/companion/memories", {"importance": 0.5}),
        ("POST", "/api/personas/companion/memories", {"content": "x", "category": "gossip"}),
        ("POST", "/api/personas/companion/memories", {"content": "x", "source_session": "s"}),
        ("POST", "/api/personas/companion/memories", {"content": "x" * 4001}),
        ("PATCH", "/api/personas/companion/memories/some-id", {"importance": 2}),
        ("PATCH", "/api/personas/companion/memories/some-id", {"content": " "}),
        ("PATCH", "/api/personas/companion/memories/some-id", {"supersedes": "y"}),
        ("GET", "/api/personas/companion/memories/a\\b", None),
        ("GET", "/api/personas/companion/memories/" + "x" * 129, None),
        ("GET", "/api/personas/companion/memories?limit=0", None),
        ("GET", "/api/personas/companion/memories?limit=201", None),
        ("GET", "/api/personas/companion/memories?offset=-1", None),
        ("GET", "/api/personas/companion/memories?sort=random", None),
        ("GET", "/api/personas/companion/memories?category=gossip", None),
        ("GET", "/api/personas/..%5C..%5Cetc/memories", None),
        ("GET", "/api/sessions?persona_id=../x", None),
        ("GET", "/api/sessions?offset=99999999999999999999999", None),
        ("GET", "/api/sessions/a\\b", None),
        ("PATCH", "/api/sessions/some-id", {"title": "x", "persona_id": "y"}),
        ("PATCH", "/api/sessions/some-id", {"title": "x" * 201}),
    ],
)
def test_bad_input_is_400(shared: httpx.Client, method: str, path: str, body: dict | None) -> None:
    assert_error(shared.request(method, path, json=body), 400)
    assert shared.get("/api/personas/companion/memories").json()["total"] == 0


def test_invalid_json_body_is_400(shared: httpx.Client) -> None:
    r = shared.post(
        "/api/personas/companion/memories",
        content=b"{nope",
        headers={"content-type": "application/json"},
    )
    assert_error(r, 400)


# --- export / import ---------------------------------------------------------------------


def test_export_import_round_trip_into_another_persona(h: AppHarness, api: httpx.Client) -> None:
    old = create(api, "The user lives in Guangzhou", importance=0.8)
    h.services.long_term.write(
        NS,
        [
            Candidate(
                "The user moved to Hangzhou", importance=0.8, confidence=0.9, supersedes=old["id"]
            )
        ],
    )
    create(api, "我的猫叫小白\u2028（白色的）", category="relationship", pinned=True)
    with api.stream("GET", "/api/personas/companion/memories/export") as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/x-ndjson")
        assert r.headers["content-disposition"] == 'attachment; filename="memories-companion.jsonl"'
        exported = r.read()
    lines = exported.decode().split("\n")
    assert lines[-1] == "" and len(lines) == 4
    assert {json.loads(line)["id"] for line in lines[:-1]} == {
        m["id"] for m in memories(api, include_superseded=True)["items"]
    }

    url = "/api/personas/friend/memories/import"
    assert memories(api, "friend")["total"] == 0
    r = api.post(url, files={"file": ("memories.jsonl", exported, "application/x-ndjson")})
    assert r.status_code == 200 and r.json() == {
        "written": 3,
        "duplicates": 0,
        "invalid": 0,
        "errors": [],
        "entity_edits": 0,  # no people edits here: tests/web/test_entities_api.py
    }
    mine = memories(api, include_superseded=True)["items"]
    theirs = memories(api, "friend", include_superseded=True)["items"]
    assert theirs == mine  # every field, version links and pins included

    # Again, as a raw body, with a broken line and an incomplete record: duplicates, invalid.
    extra = b'{"broken\n{"id": "x1", "content": "no importance"}\n'
    r = api.post(url, content=exported + extra, headers={"content-type": "application/x-ndjson"})
    report = r.json()
    assert (report["written"], report["duplicates"], report["invalid"]) == (0, 3, 2)
    assert report["errors"][0].startswith("line 4:") and report["errors"][1].startswith("line 5:")
    # The companion namespace is untouched by the import into "friend".
    assert len(memories(api, include_superseded=True)["items"]) == 3


def test_import_rejects_bad_uploads(api: httpx.Client) -> None:
    url = "/api/personas/companion/memories/import"
    assert_error(api.post(url, content=b"\xff\xfe\x00garbage"), 400, "invalid_encoding")
    assert_error(api.post(url, files={"other": ("m.jsonl", b"")}), 400, "missing_file")
    assert api.post(url, content=b"").json() == {
        "written": 0,
        "duplicates": 0,
        "invalid": 0,
        "errors": [],
        "entity_edits": 0,
    }
    big = b'{"id": "x"}\n' * 100_000  # over the default 1 MiB body limit
    assert_error(api.post(url, content=big), 413, "request_too_large")


def test_export_of_an_empty_namespace(api: httpx.Client) -> None:
    r = api.get("/api/personas/friend/memories/export")
    assert r.status_code == 200 and r.content == b""


# --- sessions ----------------------------------------------------------------------------


def test_sessions_list_get_rename(h: AppHarness, api: httpx.Client) -> None:
    first = chat(api, "hello")
    second = chat(api, "another chat")
    wait_for_reports(api, second, 1)  # a merge in flight would touch the session again
    chat(api, "more", session=first)  # first is now the most recently active
    detail = wait_for_reports(api, first, 2)
    page = api.get("/api/sessions").json()
    assert [s["id"] for s in page["items"]] == [first, second] and not page["has_more"]
    one = api.get("/api/sessions", params={"limit": 1}).json()
    assert [s["id"] for s in one["items"]] == [first] and one["has_more"]
    assert [s["id"] for s in api.get("/api/sessions?limit=1&offset=1").json()["items"]] == [second]
    assert api.get("/api/sessions", params={"persona_id": "friend"}).json()["items"] == []
    assert len(api.get("/api/sessions", params={"persona_id": "companion"}).json()["items"]) == 2

    assert [(m["role"], m["content"], m["status"]) for m in detail["transcript"]] == [
        ("user", "hello", "complete"),
        ("assistant", "Hello there!", "complete"),
        ("user", "more", "complete"),
        ("assistant", "Hello there!", "complete"),
    ]
    assert all(m["turn_id"] and m["created_at"] for m in detail["transcript"])
    assert detail["persona_id"] == "companion" and detail["background"] == ""
    assert [t["text"] for t in detail["short_term"]][-2:] == ["more", "Hello there!"]
    assert "user_emotion" in detail
    turns = [m["turn_id"] for m in detail["transcript"][::2]]
    assert [r["turn_id"] for r in detail["reports"]] == turns
    assert {"activated", "written", "hippocampus"} <= set(detail["reports"][0]["report"])

    r = api.patch(f"/api/sessions/{first}", json={"title": "Evening talk"})
    assert r.status_code == 200 and r.json()["title"] == "Evening talk"
    assert api.get(f"/api/sessions/{first}").json()["title"] == "Evening talk"
    assert api.patch(f"/api/sessions/{first}", json={"title": "  "}).json()["title"] is None


def test_a_session_shows_the_turns_its_memory_has_not_merged_yet(
    h: AppHarness, api: httpx.Client
) -> None:
    merge = threading.Event()
    h.hippocampus.enqueue(Reply(chunks=[HIPPOCAMPUS_OK], hold=merge))
    session = chat(api, "I'm allergic to peanuts, by the way")
    detail = api.get(f"/api/sessions/{session}").json()
    # The hippocampus has not answered: the turn is queued, and shown as such.
    assert detail["merged_through"] == 0 and detail["reports"] == []
    assert [(m["role"], m["seq"]) for m in detail["unmerged"]] == [("user", 1), ("assistant", 2)]
    merge.set()
    detail = wait_for_reports(api, session, 1)
    assert detail["merged_through"] == 2 and detail["unmerged"] == []


def wait_for_reports(api: httpx.Client, session: str, n: int) -> dict:
    """The session once ``n`` turn reports are in (merges finish after the reply)."""
    deadline = time.monotonic() + 10
    while True:
        detail = api.get(f"/api/sessions/{session}").json()
        if len(detail["reports"]) >= n or time.monotonic() > deadline:
            return detail
        time.sleep(0.02)


def test_delete_session_keeps_memories_by_default(h: AppHarness, api: httpx.Client) -> None:
    session = chat(api, "hello")
    wait_for_reports(api, session, 1)
    h.services.long_term.write(
        NS,
        [Candidate("The user plays chess", importance=0.8, confidence=0.9)],
        source_session=session,
    )
    r = api.delete(f"/api/sessions/{session}")
    assert r.status_code == 200 and r.json() == {
        "id": session,
        "deleted": True,
        "memories_deleted": 0,
    }
    assert_error(api.get(f"/api/sessions/{session}"), 404, "session_not_found")
    assert h.services.sessions.transcript(session) == []
    assert contents(memories(api)) == ["The user plays chess"]


def test_delete_session_forgetting_its_memories(h: AppHarness, api: httpx.Client) -> None:
    session = chat(api, "hello")
    other = chat(api, "another")
    wait_for_reports(api, session, 1)
    wait_for_reports(api, other, 1)
    kept = create(api, "The user lives in Guangzhou", importance=0.8)
    ltm = h.services.long_term
    ltm.write(
        NS, [Candidate("The user has a dog", importance=0.8, confidence=0.9)], source_session=other
    )
    ltm.write(
        NS,
        [
            Candidate("The user plays chess", importance=0.8, confidence=0.9),
            Candidate(
                "The user moved to Hangzhou", importance=0.8, confidence=0.9, supersedes=kept["id"]
            ),
        ],
        source_session=session,
    )
    assert set(contents(memories(api))) == {
        "The user has a dog",
        "The user plays chess",
        "The user moved to Hangzhou",
    }
    r = api.delete(f"/api/sessions/{session}", params={"forget_memories": "true"})
    assert r.status_code == 200 and r.json()["memories_deleted"] == 2
    # The session's memories are gone; the fact it had updated is live again.
    assert set(contents(memories(api))) == {"The user has a dog", "The user lives in Guangzhou"}
    assert memories(api, include_superseded=True)["total"] == 2
    assert api.get(f"/api/sessions/{other}").status_code == 200


# --- the long-term store down ------------------------------------------------------------


VALID_LINE = (
    b'{"id": "m1", "content": "The user likes tea", "importance": 0.6,'
    b' "created_at": "2025-01-01T00:00:00+00:00", "last_accessed": "2025-01-01T00:00:00+00:00"}\n'
)


class SwitchableStore:
    """An in-memory store that raises ``VectorStoreUnavailable`` while ``down``."""

    def __init__(self) -> None:
        self.inner = InMemoryVectorStore()
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise VectorStoreUnavailable("connection refused")
            return attribute(*args, **kwargs)

        return call


def test_store_down_is_a_503_and_nothing_half_done(tmp_path: Path) -> None:
    store = SwitchableStore()
    with AppHarness(tmp_path, store=store) as h, httpx.Client(base_url=h.base_url) as api:  # type: ignore[arg-type]
        made = create(api, "The user likes tea")
        session = chat(api, "hello")
        wait_for_reports(api, session, 1)
        store.down = True
        memory_url = f"/api/personas/companion/memories/{made['id']}"
        for r in (
            api.get("/api/personas/companion/memories"),
            api.get("/api/personas/companion/memories", params={"sort": "importance"}),
            api.post("/api/personas/companion/memories", json={"content": "x"}),
            api.get(memory_url),
            api.patch(memory_url, json={"pinned": True}),
            api.delete(memory_url),
            api.get("/api/personas/companion/memories/export"),
            api.post("/api/personas/companion/memories/import", content=VALID_LINE),
            api.delete(f"/api/sessions/{session}", params={"forget_memories": "true"}),
        ):
            assert_error(r, 503, "store_unavailable")
        # Sessions do not need the long-term store.
        assert api.get(f"/api/sessions/{session}").status_code == 200
        store.down = False
        assert contents(memories(api)) == ["The user likes tea"]
        assert api.delete(f"/api/sessions/{session}?forget_memories=true").status_code == 200


def test_entities_are_read_from_the_memories_that_name_them(api: httpx.Client) -> None:
    assert api.get("/api/personas/companion/entities").json() == {"items": []}
    one = create(api, "The user's older sister Xiaoyu is getting married in Chengdu.")
    two = create(api, "The user's sister teaches math in a middle school.")
    create(api, "The user lives in Guangzhou.")
    create(api, "The user has a hamster called Tudou.", persona="tutor")
    body = api.get("/api/personas/companion/entities").json()
    assert body == {
        "items": [
            {
                "key": "xiaoyu",
                "name": "Xiaoyu",
                "aliases": [],
                "relation": "sister",
                "kind": "person",
                "described_as": ["sister"],
                "facts": [
                    {"id": one["id"], "content": one["content"]},
                    {"id": two["id"], "content": two["content"]},
                ],
            }
        ]
    }
    # Per persona, and the table follows the memories: deleting one drops its fact.
    assert [e["name"] for e in api.get("/api/personas/tutor/entities").json()["items"]] == ["Tudou"]
    assert api.delete(f"/api/personas/companion/memories/{two['id']}").status_code == 204
    facts = api.get("/api/personas/companion/entities").json()["items"][0]["facts"]
    assert [f["id"] for f in facts] == [one["id"]]
    assert_error(api.get("/api/personas/nobody/entities"), 404)
