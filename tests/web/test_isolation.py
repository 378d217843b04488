"""Auth and isolation with API keys configured: every route needs a key, and a user never
sees, changes or learns about another user's sessions and memories."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.memory.types import Namespace
from tests.web.harness import AppHarness

KEYS = {"key-a": "alice", "key-b": "bob"}
ALICE = {"Authorization": "Bearer key-a"}
BOB = {"Authorization": "Bearer key-b"}
BOB_NS = Namespace("bob", "companion")
# Path prefixes that must be authenticated; other paths (health, docs, and what the
# WebSocket/MCP/UI helpers mount) are not this test's business.
GUARDED = ("/api/", "/v1/", "/chat/")
# Routes the schema does not list but that exist (the NeMo UI's alias).
UNLISTED = [("POST", "/chat/stream")]


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path, config={"server": {"api_keys": KEYS}}) as harness:
        yield harness


@pytest.fixture
def api(h: AppHarness) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=h.base_url, timeout=10) as client:
        yield client


def guarded_routes(api: httpx.Client) -> list[tuple[str, str]]:
    """Every (method, path) of the OpenAPI schema under a guarded prefix, with its path
    parameters filled in (a persona that exists, so auth is the only thing that can fail)."""
    schema = api.get("/openapi.json").json()
    routes = []
    for template, operations in schema["paths"].items():
        if not template.startswith(GUARDED):
            continue
        path = template.replace("{persona_id}", "companion")
        path = re.sub(r"\{[^}]+\}", "some-id", path)
        routes += [(method.upper(), path) for method in operations if method != "parameters"]
    return routes + UNLISTED


def test_the_route_list_is_not_vacuous(api: httpx.Client) -> None:
    routes = set(guarded_routes(api))
    assert {
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
        ("GET", "/api/personas"),
        ("GET", "/api/personas/companion"),
        ("GET", "/api/personas/companion/memories"),
        ("POST", "/api/personas/companion/memories"),
        ("GET", "/api/personas/companion/memories/export"),
        ("POST", "/api/personas/companion/memories/import"),
        ("GET", "/api/personas/companion/memories/some-id"),
        ("PATCH", "/api/personas/companion/memories/some-id"),
        ("DELETE", "/api/personas/companion/memories/some-id"),
        ("GET", "/api/sessions"),
        ("GET", "/api/sessions/some-id"),
        ("PATCH", "/api/sessions/some-id"),
        ("DELETE", "/api/sessions/some-id"),
    } <= routes


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "key-a"},
        {"Authorization": "Basic a2V5LWE6"},
        {"Authorization": "Bearer"},
        {"Authorization": "bearer KEY-A"},
    ],
    ids=["missing", "wrong", "no-scheme", "basic", "empty", "key-case"],
)
def test_every_route_needs_a_valid_key(
    h: AppHarness, api: httpx.Client, headers: dict[str, str]
) -> None:
    for method, path in guarded_routes(api):
        body = {"messages": [{"role": "user", "content": "hi"}]} if method == "POST" else None
        r = api.request(method, path, json=body, headers=headers)
        assert r.status_code == 401, (method, path, r.status_code, r.text)
        error = r.json()["error"]
        assert (error["type"], error["code"]) == ("authentication_error", "invalid_api_key")
        assert r.headers["www-authenticate"] == "Bearer"
    assert h.services.sessions.list_sessions("alice") == []
    assert h.chat.chat_requests == []  # nothing reached a model


def bob_chats(api: httpx.Client, text: str = "my secret is 42") -> str:
    r = api.post(
        "/v1/chat/completions",
        json={"model": "companion", "messages": [{"role": "user", "content": text}]},
        headers=BOB,
    )
    assert r.status_code == 200, r.text
    session = r.headers["x-session-id"]
    deadline = time.monotonic() + 10
    while not api.get(f"/api/sessions/{session}", headers=BOB).json()["reports"]:
        assert time.monotonic() < deadline, "the merge did not finish"
        time.sleep(0.02)
    return session


def bob_remembers(api: httpx.Client, content: str = "Bob's PIN is 1234") -> str:
    r = api.post("/api/personas/companion/memories", json={"content": content}, headers=BOB)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_alice_cannot_reach_bobs_sessions(h: AppHarness, api: httpx.Client) -> None:
    session = bob_chats(api)
    before = h.services.sessions.transcript(session)
    assert api.get("/api/sessions", headers=ALICE).json()["items"] == []
    assert api.get("/api/sessions?persona_id=companion", headers=ALICE).json()["items"] == []
    url = f"/api/sessions/{session}"
    for r in (
        api.get(url, headers=ALICE),
        api.patch(url, json={"title": "mine now"}, headers=ALICE),
        api.delete(url, headers=ALICE),
        api.delete(url, params={"forget_memories": "true"}, headers=ALICE),
    ):
        assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    mine = api.get(url, headers=BOB).json()
    assert mine["title"] is None and len(mine["transcript"]) == 2
    assert h.services.sessions.transcript(session) == before


@pytest.mark.parametrize("how", ["X-Session-Id", "Conversation-Id", "user"])
def test_alice_cannot_chat_in_bobs_session(h: AppHarness, api: httpx.Client, how: str) -> None:
    session = bob_chats(api)
    before = h.services.sessions.transcript(session)
    body: dict = {"model": "companion", "messages": [{"role": "user", "content": "hijack"}]}
    headers = dict(ALICE)
    if how == "user":
        body["user"] = session
    else:
        headers[how] = session
    calls = len(h.chat.chat_requests)
    r = api.post("/v1/chat/completions", json=body, headers=headers)
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    assert h.services.sessions.transcript(session) == before
    assert len(h.chat.chat_requests) == calls
    assert api.get("/api/sessions", headers=ALICE).json()["items"] == []


def test_alice_cannot_reach_bobs_memories(h: AppHarness, api: httpx.Client) -> None:
    memory_id = bob_remembers(api)
    base = "/api/personas/companion/memories"
    page = api.get(base, headers=ALICE).json()
    assert (page["items"], page["total"]) == ([], 0)
    assert api.get(base, params={"q": "PIN"}, headers=ALICE).json()["items"] == []
    assert api.get(base, params={"include_superseded": "true"}, headers=ALICE).json()["total"] == 0
    url = f"{base}/{memory_id}"
    for r in (
        api.get(url, headers=ALICE),
        api.patch(url, json={"content": "hacked", "pinned": True}, headers=ALICE),
        api.delete(url, headers=ALICE),
    ):
        assert r.status_code == 404 and r.json()["error"]["code"] == "memory_not_found"
    export = api.get(f"{base}/export", headers=ALICE)
    assert export.status_code == 200 and export.content == b""
    stored = h.services.long_term.get(BOB_NS, memory_id)
    assert stored is not None and stored.content == "Bob's PIN is 1234" and not stored.pinned


def test_alice_importing_bobs_ids_writes_only_her_own(h: AppHarness, api: httpx.Client) -> None:
    memory_id = bob_remembers(api)
    exported = api.get("/api/personas/companion/memories/export", headers=BOB).content
    forged = exported.replace(b"Bob's PIN is 1234", b"overwritten by alice")
    r = api.post("/api/personas/companion/memories/import", content=forged, headers=ALICE)
    assert r.status_code == 200 and r.json()["written"] == 1  # into alice's namespace
    stored = h.services.long_term.get(BOB_NS, memory_id)
    assert stored is not None and stored.content == "Bob's PIN is 1234"
    alice = api.get(f"/api/personas/companion/memories/{memory_id}", headers=ALICE).json()
    assert alice["content"] == "overwritten by alice"
    bob = api.get(f"/api/personas/companion/memories/{memory_id}", headers=BOB).json()
    assert bob["content"] == "Bob's PIN is 1234"


def test_forgetting_a_session_stays_in_its_namespace(h: AppHarness, api: httpx.Client) -> None:
    from backend.memory.types import Candidate

    session = bob_chats(api)
    h.services.long_term.write(
        BOB_NS,
        [Candidate("Bob collects stamps", importance=0.8, confidence=0.9)],
        source_session=session,
    )
    # Alice has a memory claiming to come from bob's session: bob's deletion leaves it.
    line = (
        b'{"id": "a1", "content": "Alice likes tea", "importance": 0.6, "source_session": "'
        + session.encode()
        + b'", "created_at": "2025-01-01T00:00:00+00:00",'
        b' "last_accessed": "2025-01-01T00:00:00+00:00"}\n'
    )
    r = api.post("/api/personas/companion/memories/import", content=line, headers=ALICE)
    assert r.json()["written"] == 1
    r = api.delete(f"/api/sessions/{session}?forget_memories=true", headers=BOB)
    assert r.status_code == 200 and r.json()["memories_deleted"] == 1
    assert api.get("/api/personas/companion/memories", headers=BOB).json()["total"] == 0
    alice = api.get("/api/personas/companion/memories", headers=ALICE).json()
    assert [m["content"] for m in alice["items"]] == ["Alice likes tea"]


def test_public_paths_stay_public(api: httpx.Client) -> None:
    assert api.get("/healthz").status_code == 200
    assert api.get("/openapi.json").status_code == 200
