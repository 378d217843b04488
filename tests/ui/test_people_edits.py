"""The memories page's People & pets controls (no browser): edit, merge and delete an
entry through htmx forms, stored as the REST API stores them."""

from __future__ import annotations

import re

import httpx

from backend.memory.types import Namespace
from tests.ui.conftest import client, store_memory
from tests.web.harness import AppHarness

NS = Namespace("local", "companion")
HTMX = {"HX-Request": "true"}


def people(c: httpx.Client) -> str:
    page = c.get("/memories").text
    start = page.index('id="people"')
    return page[start : page.index('id="memory-list"')]


def test_people_can_be_edited_merged_and_deleted_from_the_page(h: AppHarness) -> None:
    tom = store_memory(h, "Tom, the user's friend, plays the bass.")
    store_memory(h, "The user's friend Tommy is moving to Berlin.")
    both = store_memory(h, "The user's friend Tom and the user's dog Pixel went to the beach.")
    with client(h) as c:
        section = people(c)
        # Every entry has labelled controls: a form to edit, one to merge, one to delete.
        for field in ("Name", "Relation to you", "Kind", "Also called", "The same one as"):
            assert f">{field}" in section
        assert 'hx-post="/ui/people/companion/tom"' in section
        confirm = re.search(r'hx-confirm="(Delete Tom\?[^"]*)"', section)
        assert confirm is not None and "1 memory about Tom alone will be forgotten" in confirm[1]
        assert "memories that also name someone else are kept" in confirm[1]

        merged = c.post("/ui/people/companion/tom/merge", data={"other": "tommy"}, headers=HTMX)
        assert merged.status_code == 200, merged.text
        assert "(also Tommy)" in merged.text and "Merged into Tom." in merged.text
        assert 'data-entity="tommy"' not in merged.text

        edited = c.post(
            "/ui/people/companion/tom",
            data={
                "name": "Thomas",
                "relation": "brother",
                "kind": "person",
                "aliases": "Tommy，汤姆",
            },
            headers=HTMX,
        )
        assert edited.status_code == 200, edited.text
        assert "Saved Thomas." in edited.text
        assert "(also Tom, Tommy, 汤姆)" in edited.text and "brother" in edited.text
        (edit,) = h.services.sessions.entity_edits("local", "companion")
        assert (edit.name, edit.relation) == ("Thomas", "brother")

        refused = c.post(
            "/ui/people/companion/tom",
            data={"relation": "brother", "kind": "person", "aliases": "Pixel"},
            headers=HTMX,
        )
        assert refused.status_code == 409 and "merge the two instead" in refused.text
        missing = c.post("/ui/people/companion/nobody/delete", headers=HTMX)
        assert missing.status_code == 404

        deleted = c.post("/ui/people/companion/tom/delete", headers=HTMX)
        assert deleted.status_code == 200, deleted.text
        assert deleted.headers["hx-trigger"] == "memories-changed"
        assert "memories forgotten" in deleted.text and 'data-entity="tom"' not in deleted.text
        assert 'data-entity="pixel"' in deleted.text
    left = {m.id for m in h.services.long_term.store.list(NS, offset=0, limit=50)}
    assert tom not in left and both in left


def test_people_edits_need_the_apps_own_pages(h: AppHarness) -> None:
    store_memory(h, "Tom, the user's friend, plays the bass.")
    with httpx.Client(base_url=h.base_url, headers={"Origin": "https://evil.example"}) as c:
        r = c.post("/ui/people/companion/tom/delete", headers=HTMX)
    assert r.status_code == 403
    assert h.services.sessions.entity_edits("local", "companion") == []
