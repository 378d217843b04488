"""The chat's message controls in a real browser (headless Chromium; skipped without it,
as tests/ui/test_browser.py): regenerate twice and flip between the versions from the
keyboard, edit a message and see the memory change on the memories page, delete a message
and see its memory gone, copy a reply; a regeneration never duplicates a memory (issue 30).
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from backend.memory.types import Namespace
from tests.llm.scripted_server import Reply
from tests.ui.conftest import hippocampus_reply
from tests.ui.test_browser import last_reply, open_new_conversation, send
from tests.web.harness import AppHarness

pytestmark = pytest.mark.browser
NS = Namespace("local", "companion")
PEANUTS = "The user is allergic to peanuts."
SHELLFISH = "The user is allergic to shellfish."


def memories(h: AppHarness) -> list[str]:
    return sorted(m.content for m in h.services.long_term.store.iter_all(NS))


def say_peanuts(page: Any, h: AppHarness) -> None:
    h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=PEANUTS)]))
    h.chat.enqueue(Reply(chunks=["Thanks for telling me, ", "no peanuts then."]))
    send(page, "I'm allergic to peanuts")
    last_reply(page).locator(".body", has_text="no peanuts then.").wait_for()
    page.locator("#memory-panel .outcomes.written", has_text="peanuts").wait_for()
    h.drain()


def test_regenerate_twice_and_flip_between_the_versions(page: Any, h: AppHarness) -> None:
    open_new_conversation(page, h)
    say_peanuts(page, h)
    runs = len(h.hippocampus.chat_requests)
    for answer in ["I will keep peanuts away from you.", "Peanuts are off the menu."]:
        h.chat.enqueue(Reply(chunks=[answer[:10], answer[10:]], chunk_delay_s=0.05))
        button = last_reply(page).get_by_role("button", name="Regenerate")
        button.focus()
        page.keyboard.press("Enter")
        last_reply(page).locator(".body", has_text=answer).wait_for()
    reply = last_reply(page)
    assert reply.locator(".version-count").inner_text() == "3/3"
    # Back with the keyboard alone: ‹ twice (the focus stays on it), then › once. (Polled
    # by Playwright's own assertion: a wait_for_function string is evaluated in the page,
    # which the app's Content-Security-Policy forbids with playwright 1.65.3.)
    reply.get_by_role("button", name="Previous version").focus()
    page.keyboard.press("Enter")
    last_reply(page).locator(".version-count", has_text="2/3").wait_for()
    expect(last_reply(page).get_by_role("button", name="Previous version")).to_be_focused()
    page.keyboard.press("Enter")
    last_reply(page).locator(".version-count", has_text="1/3").wait_for()
    assert "no peanuts then." in last_reply(page).locator(".body").inner_text()
    assert last_reply(page).get_by_role("button", name="Previous version").is_disabled()
    # ‹ is disabled now: the focus is on ›
    expect(last_reply(page).get_by_role("button", name="Next version")).to_be_focused()
    page.keyboard.press("Enter")
    last_reply(page).locator(".body", has_text="I will keep peanuts away").wait_for()
    # The one shown is the one in the transcript, after a reload too.
    session = page.url.split("session=")[1]
    h.drain()
    stored = h.services.sessions.transcript(session)
    assert stored[-1].content == "I will keep peanuts away from you." and len(stored) == 2
    page.reload()
    assert last_reply(page).locator(".version-count").inner_text() == "2/3"
    # No second hippocampus run, no duplicate memory.
    assert len(h.hippocampus.chat_requests) == runs
    assert memories(h) == [PEANUTS]


def test_edit_a_message_and_the_memories_page_follows(page: Any, h: AppHarness) -> None:
    open_new_conversation(page, h)
    say_peanuts(page, h)
    user = page.locator("#messages article.msg.user").last
    user.locator("summary", has_text="Edit").click()
    box = user.get_by_label("Your message, edited")
    box.fill("I'm allergic to shellfish")
    h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=SHELLFISH)]))
    h.chat.enqueue(Reply(chunks=["Shellfish, got it: ", "I will remember."]))
    user.get_by_role("button", name="Save and continue").click()
    page.wait_for_url(lambda url: "~" in url)  # the branch
    last_reply(page).locator(".body", has_text="I will remember.").wait_for()
    assert "shellfish" in page.locator("#messages article.msg.user").last.inner_text()
    page.locator("#memory-panel .outcomes.removed", has_text="peanuts").wait_for()
    assert page.locator("#session-list .session.current").inner_text().find("(edited)") >= 0
    h.drain()
    page.goto(h.base_url + "/memories")
    cards = page.locator(".memory-card .memory-content").all_inner_texts()
    assert cards == [SHELLFISH]
    source = page.locator(".memory-source a").first
    assert "I'm allergic to shellfish" in source.inner_text()
    source.click()  # the link leads to the message, in its conversation, marked
    page.locator("#messages article.msg.user.linked", has_text="shellfish").wait_for()


def test_delete_a_message_and_its_memory_is_gone(page: Any, h: AppHarness) -> None:
    open_new_conversation(page, h)
    say_peanuts(page, h)
    address = "The user's ex lives at 12 Elm Street in Leeds."
    h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=address)]))
    h.chat.enqueue(Reply(chunks=["I see, thank you ", "for sharing that."]))
    send(page, "My ex lives at 12 Elm Street in Leeds")
    last_reply(page).locator(".body", has_text="for sharing that.").wait_for()
    page.locator("#memory-panel .outcomes.written", has_text="Elm Street").wait_for()
    h.drain()
    messages: list[str] = []
    page.once("dialog", lambda dialog: (messages.append(dialog.message), dialog.accept()))
    user = page.locator("#messages article.msg.user", has_text="Elm Street")
    user.get_by_role("button", name="Delete").click()
    user.wait_for(state="detached")
    assert "forgotten" in messages[0]
    page.locator(".revision-note", has_text="Forgotten").wait_for()
    page.locator("#memory-panel .outcomes.removed", has_text="Elm Street").wait_for()
    assert page.locator("#messages article.msg.user").count() == 1  # the peanuts turn
    assert memories(h) == [PEANUTS]
    page.goto(h.base_url + "/memories")
    assert page.locator(".memory-card .memory-content").all_inner_texts() == [PEANUTS]


def test_copy_a_reply(browser: Any, h: AppHarness) -> None:
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        open_new_conversation(page, h)
        h.chat.enqueue(Reply(chunks=["Here is **bold** advice: ", "drink water."]))
        send(page, "Any advice?")
        last_reply(page).locator("strong", has_text="bold").wait_for()
        button = last_reply(page).get_by_role("button", name="Copy")
        button.focus()
        page.keyboard.press("Enter")
        last_reply(page).get_by_role("button", name="Copied").wait_for()
        # The reply as written (its markdown), not the rendered page.
        assert page.evaluate("navigator.clipboard.readText()") == (
            "Here is **bold** advice: drink water."
        )
    finally:
        context.close()
