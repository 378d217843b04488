"""Importing character cards as personas and resetting a persona's memories, over HTTP
(REST and the UI's fragments), against the harness with a temporary persona directory."""

from __future__ import annotations

import base64
import json
import shutil
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.memory.types import Namespace
from backend.web.ui_support import COOKIE, csrf_token
from tests.web.harness import REPO, AppHarness

ALICE, BOB = "alice-key", "bob-key"
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Captain Mira",
        "description": "{{char}} is a retired starship captain who tells {{user}} stories.",
        "personality": "dry humour, patient",
        "scenario": "A quiet bar on a space station.",
        "first_mes": "Pull up a stool, {{user}}.",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Evening.",
    },
}


def png_card(card: dict[str, Any]) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    text = b"chara\x00" + base64.b64encode(json.dumps(card).encode())
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"tEXt", text)
        + chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00"))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    directory = tmp_path / "personas"
    shutil.copytree(REPO / "personas", directory)
    config = {"server": {"personas_dir": str(directory), "api_keys": {ALICE: "alice", BOB: "bob"}}}
    with AppHarness(tmp_path, config=config) as harness:
        yield harness


def api(h: AppHarness, key: str = ALICE) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.Client(base_url=h.base_url, headers=headers, timeout=10)


def remember(h: AppHarness, user: str, persona: str, content: str) -> None:
    long_term = h.services.long_term
    long_term.create(Namespace(user, persona), long_term.new_memory(content))


def test_import_json_card(h: AppHarness) -> None:
    directory = Path(h.settings.server.personas_dir)
    with api(h) as c:
        r = c.post(
            "/api/personas/import",
            files={"file": ("mira.json", json.dumps(CARD), "application/json")},
        )
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["id"] == "captain-mira" and body["name"] == "Captain Mira"
        assert body["greeting"] == "Pull up a stool, you."
        assert "retired starship captain" in body["system_prompt"]
        assert (directory / "captain-mira.json").is_file()
        # served at once: listed, usable as a model
        ids = [p["id"] for p in c.get("/api/personas").json()["items"]]
        assert "captain-mira" in ids
        assert h.services.engine.personas.get("captain-mira") is not None
        # a second import of the same id is refused unless asked
        again = c.post("/api/personas/import", content=json.dumps(CARD))
        assert again.status_code == 409 and again.json()["error"]["code"] == "persona_exists"
        replaced = c.post("/api/personas/import?overwrite=true", content=json.dumps(CARD))
        assert replaced.status_code == 201


def test_import_png_card_saves_the_avatar(h: AppHarness) -> None:
    directory = Path(h.settings.server.personas_dir)
    with api(h) as c:
        r = c.post(
            "/api/personas/import", files={"file": ("mira.png", png_card(CARD), "image/png")}
        )
    assert r.status_code == 201, r.text
    avatar = directory / "avatars" / "captain-mira.png"
    assert avatar.read_bytes().startswith(b"\x89PNG") and b"chara" not in avatar.read_bytes()
    assert h.services.personas.get("captain-mira").avatar == "avatars/captain-mira.png"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"not a card", "not a character card"),
        (b"{oops", "not valid JSON"),
        (json.dumps({"spec": "chara_card_v2", "data": {"name": ""}}).encode(), "name: is required"),
        (png_card(CARD)[:40], "truncated PNG"),
    ],
)
def test_import_refuses_broken_cards(h: AppHarness, body: bytes, expected: str) -> None:
    with api(h) as c:
        r = c.post("/api/personas/import", files={"file": ("card", body)})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_card"
    assert expected in r.json()["error"]["message"]
    assert sorted(p.name for p in Path(h.settings.server.personas_dir).glob("*.json")) == [
        "coach.json",
        "companion.json",
        "tutor.json",
    ]


def test_import_needs_a_key(h: AppHarness) -> None:
    with httpx.Client(base_url=h.base_url, timeout=10) as c:
        assert c.post("/api/personas/import", content=json.dumps(CARD)).status_code == 401


def test_reset_forgets_only_the_callers_namespace(h: AppHarness) -> None:
    remember(h, "alice", "companion", "Alice's sister moved to Lisbon.")
    remember(h, "alice", "companion", "Alice has an exam on Friday.")
    remember(h, "alice", "coach", "Alice is allergic to peanuts.")
    remember(h, "bob", "companion", "Bob plays the cello.")
    with api(h) as c:
        r = c.delete("/api/personas/companion/memories")
        assert r.status_code == 200, r.text
        assert r.json() == {"persona_id": "companion", "forgotten": 2}
        assert c.get("/api/personas/companion/memories").json()["items"] == []
        coach = c.get("/api/personas/coach/memories").json()["items"]
        assert [m["content"] for m in coach] == ["Alice is allergic to peanuts."]
        assert c.delete("/api/personas/companion/memories").json()["forgotten"] == 0
        assert c.delete("/api/personas/nobody/memories").status_code == 404
    with api(h, BOB) as c:
        items = c.get("/api/personas/companion/memories").json()["items"]
        assert [m["content"] for m in items] == ["Bob plays the cello."]
    # the lexical index forgot too: a query finds nothing of alice's
    found = h.services.long_term.lexical_candidates(Namespace("alice", "companion"), "Lisbon exam")
    assert found == []


def test_ui_import_and_reset(h: AppHarness) -> None:
    remember(h, "alice", "companion", "Alice's sister moved to Lisbon.")
    with httpx.Client(
        base_url=h.base_url, headers={"Origin": h.base_url}, cookies={COOKIE: ALICE}, timeout=10
    ) as c:
        page = c.get("/personas")
        assert page.status_code == 200
        assert "/ui/personas/import" in page.text and "/ui/personas/companion/reset" in page.text
        assert csrf_token(ALICE) in page.text
        # without the CSRF token: refused
        refused = c.post("/ui/personas/companion/reset", headers={"HX-Request": "true"})
        assert refused.status_code == 403
        assert h.services.long_term.store.count(Namespace("alice", "companion")) == 1
        done = c.post(
            "/ui/personas/companion/reset",
            data={"csrf_token": csrf_token(ALICE)},
            headers={"HX-Request": "true"},
        )
        assert done.status_code == 200 and "1 memory removed" in done.text
        assert h.services.long_term.store.count(Namespace("alice", "companion")) == 0
        imported = c.post(
            "/ui/personas/import",
            data={"csrf_token": csrf_token(ALICE)},
            files={"file": ("mira.png", png_card(CARD), "image/png")},
            headers={"HX-Request": "true"},
        )
        assert imported.status_code == 200, imported.text
        assert "Captain Mira" in imported.text
        assert "Captain Mira" in c.get("/personas").text
        broken = c.post(
            "/ui/personas/import",
            data={"csrf_token": csrf_token(ALICE)},
            files={"file": ("x.json", b"{}", "application/json")},
            headers={"HX-Request": "true"},
        )
        assert broken.status_code == 400 and "name: is required" in broken.text


def test_turns_use_the_personas_memory_policies(h: AppHarness) -> None:
    """A persona's overrides reach activation (retrieval policy) and the save gate."""
    from tests.llm.scripted_server import Reply

    coach = h.services.personas.get("coach")
    assert coach is not None and coach.retrieval_policy is not None
    assert coach.retrieval_policy.k == 10
    seen: dict[str, Any] = {}
    long_term = h.services.long_term
    activate, write = long_term.activate, long_term.write

    def spy_activate(*args: Any, **kwargs: Any) -> Any:
        seen["policy"] = kwargs.get("policy")
        return activate(*args, **kwargs)

    def spy_write(*args: Any, **kwargs: Any) -> Any:
        seen["gate_policy"] = kwargs.get("gate_policy", "missing")
        return write(*args, **kwargs)

    long_term.activate = spy_activate  # type: ignore[method-assign]
    long_term.write = spy_write  # type: ignore[method-assign]
    candidate = {
        "category": "health",
        "content": "Allergic to peanuts.",
        "importance": 0.95,
        "confidence": 0.95,
        "subject": "user",
        "keywords": ["peanuts"],
    }
    answer = {"background": "", "short_term": [], "long_term": [candidate], "user_emotion": None}
    h.hippocampus.enqueue(Reply(chunks=[json.dumps(answer)]))
    body = {"model": "coach", "messages": [{"role": "user", "content": "I'm allergic to peanuts"}]}
    r = httpx.post(
        h.base_url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {ALICE}"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert seen["policy"] == coach.retrieval_policy
    deadline = time.monotonic() + 10
    while "gate_policy" not in seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen["gate_policy"] is coach.gate_policy  # None: the coach keeps the configured gate
    # the companion has no overrides: the configured policies
    seen.clear()
    body["model"] = "companion"
    r = httpx.post(
        h.base_url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {ALICE}"},
        timeout=10,
    )
    assert r.status_code == 200 and seen["policy"] is None
