"""The user's edits of the people and pets of their life over REST: merge, rename,
relation, kind, aliases and delete (``backend.web.entities_api``), stored in the session
store and read by recall."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.memory.types import Namespace
from tests.web.harness import AppHarness
from tests.web.test_rest_api import add_persona, assert_error, create

NS = Namespace("local", "companion")
URL = "/api/personas/companion/entities"


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path) as harness:
        add_persona(harness, "friend")
        yield harness


@pytest.fixture
def api(h: AppHarness) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=h.base_url, timeout=10) as client:
        yield client


def table(api: httpx.Client, persona: str = "companion") -> dict[str, dict]:
    r = api.get(f"/api/personas/{persona}/entities")
    assert r.status_code == 200, r.text
    return {e["key"]: e for e in r.json()["items"]}


def test_merge_makes_two_names_one_entity_and_recall_reads_it(
    h: AppHarness, api: httpx.Client
) -> None:
    tom = create(api, "Tom, the user's friend, plays the bass.")
    tommy = create(api, "The user's friend Tommy is moving to Berlin.")
    assert set(table(api)) == {"tom", "tommy"}
    r = api.post(f"{URL}/merge", json={"into": "tom", "entities": ["Tommy"]})
    assert r.status_code == 200, r.text
    merged = r.json()
    assert (merged["key"], merged["name"], merged["aliases"]) == ("tom", "Tom", ["Tommy"])
    assert [f["id"] for f in merged["facts"]] == [tom["id"], tommy["id"]]
    assert list(table(api)) == ["tom"]
    assert table(api, "friend") == {}  # per persona
    # Kept in the session store, and what recall lays over the table.
    (edit,) = h.services.sessions.entity_edits("local", "companion")
    assert edit.merged == ("tommy",)
    activation = h.services.long_term.activate(NS, "how is my friend doing?", embed_query=False)
    assert [(e.name, e.aliases) for e in activation.entities] == [("Tom", ["Tommy"])]


def test_chinese_and_english_names_meet_and_grandma_reaches_them(
    h: AppHarness, api: httpx.Client
) -> None:
    create(api, "The user's friend Nainai grows tomatoes on the balcony.")
    mooncakes = create(api, "奶奶每年秋天都做月饼。")
    r = api.patch(f"{URL}/nainai", json={"relation": "奶奶", "aliases": ["奶奶"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["relation"], body["kind"], body["aliases"]) == ("grandma", "person", ["奶奶"])
    assert mooncakes["id"] in [f["id"] for f in body["facts"]]
    recalled = h.services.long_term.activate(NS, "how's my grandma?", embed_query=False)
    assert mooncakes["content"] in [m.content for m in recalled.memories]


def test_keys_in_either_script_and_without_a_name(api: httpx.Client) -> None:
    create(api, "用户的柯基叫豆豆，特别能吃。")
    create(api, "The user's dog Pixel hates the vacuum cleaner.")
    create(api, "The user's physio says no running on consecutive days.")
    assert set(table(api)) == {"豆豆", "pixel", "~physio"}
    r = api.patch(f"{URL}/豆豆", json={"aliases": ["Doudou"]})
    assert r.status_code == 200 and r.json()["aliases"] == ["Doudou"]
    r = api.patch(f"{URL}/~physio", json={"name": "Dr Lee"})
    assert r.status_code == 200 and (r.json()["key"], r.json()["name"]) == ("~physio", "Dr Lee")
    r = api.post(f"{URL}/merge", json={"into": "Doudou", "entities": ["pixel"]})
    assert r.status_code == 200 and set(r.json()["aliases"]) == {"Doudou", "Pixel"}
    assert set(table(api)) == {"豆豆", "~physio"}


def test_rename_keeps_the_key_and_the_old_name_and_kind_can_be_set(api: httpx.Client) -> None:
    create(api, "The user's dog Pixel hates the vacuum cleaner.")
    r = api.patch(f"{URL}/pixel", json={"name": "Pixel the Pug"})
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["aliases"]) == ("Pixel the Pug", ["Pixel"])
    r = api.patch(f"{URL}/Pixel%20the%20Pug", json={"kind": "person"})  # by a name, too
    assert r.status_code == 200 and r.json()["key"] == "pixel" and r.json()["kind"] == "person"


def test_delete_forgets_the_memories_about_it_alone_and_hides_it(
    h: AppHarness, api: httpx.Client
) -> None:
    alone = create(api, "Tom, the user's friend, plays the bass.")
    shared = create(api, "The user's friend Tom and the user's dog Pixel went to the beach.")
    other = create(api, "The user lives in Guangzhou.")
    # An older version of the fact about Tom alone goes with it.
    newer = h.services.long_term.update(
        NS, alone["id"], content="Tom, the user's friend, plays jazz bass."
    )
    r = api.delete(f"{URL}/tom")
    assert r.status_code == 200, r.text
    assert r.json()["key"] == "tom" and r.json()["forgotten"] >= 1
    left = {m.id for m in h.services.long_term.store.list(NS, offset=0, limit=50)}
    assert newer.id not in left and alone["id"] not in left
    assert {shared["id"], other["id"]} <= left
    assert list(table(api)) == ["pixel"]
    assert_error(api.delete(f"{URL}/tom"), 404, "entity_not_found")
    activation = h.services.long_term.activate(NS, "how is my friend?", embed_query=False)
    assert all(e.name != "Tom" for e in activation.entities)


def test_edits_are_validated_at_the_boundary(api: httpx.Client) -> None:
    create(api, "Tom, the user's friend, plays the bass.")
    create(api, "The user's friend Tommy is moving to Berlin.")
    assert_error(api.patch(f"{URL}/nobody", json={"kind": "pet"}), 404, "entity_not_found")
    assert_error(api.patch(f"{URL}/tom", json={}), 400, "empty")
    assert_error(api.patch(f"{URL}/tom", json={"kind": "robot"}), 400, "invalid_request")
    assert_error(api.patch(f"{URL}/tom", json={"name": "  "}), 400, "invalid_request")
    assert_error(api.patch(f"{URL}/tom", json={"name": "x" * 61}), 400, "invalid_request")
    assert_error(api.patch(f"{URL}/tom", json={"colour": "red"}), 400, "invalid_request")
    assert_error(api.patch(f"{URL}/tom", json={"aliases": ["TOMMY"]}), 409, "entity_name_taken")
    assert_error(api.post(f"{URL}/merge", json={"into": "tom", "entities": []}), 400)
    assert_error(api.post(f"{URL}/merge", json={"into": "tom", "entities": ["tom"]}), 400, "empty")
    assert_error(
        api.post(f"{URL}/merge", json={"into": "tom", "entities": ["ghost"]}),
        404,
        "entity_not_found",
    )
    assert_error(api.patch("/api/personas/nobody/entities/tom", json={"kind": "pet"}), 404)
    assert set(table(api)) == {"tom", "tommy"}  # nothing refused was stored
    assert table(api)["tom"]["kind"] == "person"


def test_a_persona_reset_drops_its_entity_edits(h: AppHarness, api: httpx.Client) -> None:
    create(api, "Tom, the user's friend, plays the bass.")
    assert api.patch(f"{URL}/tom", json={"relation": "brother"}).status_code == 200
    assert h.services.sessions.entity_edits("local", "companion") != []
    r = api.delete("/api/personas/companion/memories")
    assert r.status_code == 200, r.text
    assert h.services.sessions.entity_edits("local", "companion") == []


def test_export_and_import_carry_the_edits(h: AppHarness, api: httpx.Client) -> None:
    create(api, "Tom, the user's friend, plays the bass.")
    create(api, "The user's friend Tommy is moving to Berlin.")
    create(api, "The user's friend Nainai grows tomatoes on the balcony.")
    assert api.post(f"{URL}/merge", json={"into": "tom", "entities": ["tommy"]}).is_success
    assert api.patch(f"{URL}/nainai", json={"relation": "奶奶", "aliases": ["奶奶"]}).is_success
    export = api.get("/api/personas/companion/memories/export")
    assert export.status_code == 200, export.text
    lines = export.text.splitlines()
    assert len(lines) == 4 and '"entity_edits"' in lines[-1]  # the memories, then the edits
    # Into another persona, which has an edit of its own for a key the file also edits.
    create(api, "Tom, the user's friend, plays the bass.", persona="friend")
    friend = "/api/personas/friend/entities"
    assert api.patch(f"{friend}/tom", json={"relation": "brother"}).is_success
    r = api.post(
        "/api/personas/friend/memories/import",
        content=export.content,
        headers={"content-type": "application/x-ndjson"},
    )
    assert r.status_code == 200, r.text
    assert r.json() | {"errors": []} == {
        "written": 3, "duplicates": 0, "invalid": 0, "errors": [], "entity_edits": 2,
    }  # fmt: skip
    entities = table(api, "friend")
    assert set(entities) == {"tom", "nainai"}  # Tommy merged into Tom, as exported
    assert entities["tom"]["aliases"] == ["Tommy"] and entities["tom"]["relation"] == "friend"
    assert entities["nainai"]["relation"] == "grandma" and entities["nainai"]["aliases"] == ["奶奶"]


def test_an_unreadable_edits_line_is_counted_and_the_memories_still_come_in(
    h: AppHarness, api: httpx.Client
) -> None:
    create(api, "Tom, the user's friend, plays the bass.")
    memory_line = api.get("/api/personas/companion/memories/export").text.splitlines()[0]
    body = memory_line + '\n{"entity_edits": [{"key": "tom", "kind": "dragon"}]}\n'
    r = api.post(
        "/api/personas/friend/memories/import",
        content=body.encode(),
        headers={"content-type": "application/x-ndjson"},
    )
    assert r.status_code == 200, r.text
    result = r.json()
    assert (result["written"], result["invalid"], result["entity_edits"]) == (1, 1, 0)
    assert result["errors"][0].startswith("line 2: entity_edits.0.kind")
    assert h.services.sessions.entity_edits("local", "friend") == []
