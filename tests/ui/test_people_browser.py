"""People & pets in a real browser: merge, edit and delete an entry with the keyboard
(headless Chromium; skipped without it, as tests/ui/test_browser.py)."""

from __future__ import annotations

from typing import Any

import pytest

from backend.memory.types import Namespace
from tests.ui.conftest import store_memory
from tests.web.harness import AppHarness

pytestmark = pytest.mark.browser
NS = Namespace("local", "companion")


def test_merge_edit_and_delete_people_with_the_keyboard(page: Any, h: AppHarness) -> None:
    tom = store_memory(h, "Tom, the user's friend, plays the bass.")
    store_memory(h, "The user's friend Tommy is moving to Berlin.")
    store_memory(h, "The user's dog Pixel hates the vacuum cleaner.")
    page.goto(h.base_url + "/memories")
    entry = page.locator('[data-entity="tom"]')
    entry.locator("summary").focus()
    page.keyboard.press("Enter")  # opens the entry
    entry.get_by_label("The same one as").select_option("tommy")
    entry.get_by_role("button", name="Merge into Tom").focus()
    page.keyboard.press("Enter")
    page.locator('[data-entity="tom"] .entity-aliases', has_text="Tommy").wait_for()
    assert page.locator('[data-entity="tommy"]').count() == 0
    assert page.locator("#people-status").inner_text() == "Merged into Tom."

    entry = page.locator('[data-entity="tom"]')  # swapped in afresh, left open
    entry.get_by_label("Relation to you").fill("brother")
    entry.get_by_label("Relation to you").press("Enter")  # submits its form
    page.locator("#people-status", has_text="Saved Tom.").wait_for()
    (edit,) = h.services.sessions.entity_edits("local", "companion")
    assert edit.relation == "brother" and edit.merged == ("tommy",)

    messages: list[str] = []
    page.once("dialog", lambda dialog: (messages.append(dialog.message), dialog.accept()))
    page.locator('[data-entity="tom"]').get_by_role("button", name="Delete Tom").click()
    page.locator('[data-entity="tom"]').wait_for(state="detached")
    assert "about Tom alone will be forgotten" in messages[0]
    assert h.services.long_term.get(NS, tom) is None
    assert page.locator('[data-entity="pixel"]').count() == 1
