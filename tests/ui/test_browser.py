"""The UI in a real browser: Playwright driving Debian's headless Chromium against the app on
a loopback port, with scripted upstream models (tests/web/harness.py).

Skipped without /usr/bin/chromium or playwright, unless LIMBIC_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from backend.memory.types import Namespace
from tests.llm.scripted_server import Reply
from tests.ui.conftest import API_KEY, hippocampus_reply, store_memory
from tests.web.harness import AppHarness

pytestmark = pytest.mark.browser

XSS = "<script>window.__xss='script'</script><img src=x onerror=\"window.__xss='img'\">"

# Records every state of the streaming bubble's text, to see the reply arrive in pieces.
WATCH_STREAM = """() => {
  window.__states = [];
  const record = () => {
    const el = document.querySelector('#messages .stream-text');
    if (el) {
      const text = el.textContent;
      if (window.__states[window.__states.length - 1] !== text) window.__states.push(text);
    }
  };
  new MutationObserver(record).observe(document.getElementById('messages'),
    {subtree: true, childList: true, characterData: true});
}"""


def playwright_expect() -> Any:
    from playwright.sync_api import expect

    return expect


def open_new_conversation(page: Any, h: AppHarness, persona: str = "Companion") -> str:
    page.goto(h.base_url + "/?new=1")
    page.get_by_role("button", name=f"Talk to {persona}").click()
    page.wait_for_url(re.compile(r"\?session="))
    return page.url.split("session=")[1]


def send(page: Any, text: str) -> None:
    page.fill("#composer-text", text)
    page.keyboard.press("Enter")


def last_reply(page: Any) -> Any:
    return page.locator("#messages article.msg.assistant").last


def test_reply_streams_in_pieces_and_renders_markdown(page: Any, h: AppHarness) -> None:
    open_new_conversation(page, h)
    chunks = ["Once ", "upon ", "a ", "time ", "there ", "was ", "a ", "**lamp**", "."]
    h.chat.enqueue(Reply(chunks=chunks, chunk_delay_s=0.12))
    page.evaluate(WATCH_STREAM)
    # Shift+Enter is a new line, not a send.
    page.fill("#composer-text", "Tell me a story")
    page.focus("#composer-text")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("please")
    assert page.input_value("#composer-text") == "Tell me a story\nplease"
    assert len(h.chat.chat_requests) == 0
    page.keyboard.press("Enter")

    reply = last_reply(page)
    reply.locator("strong", has_text="lamp").wait_for()  # the final markdown
    states = page.evaluate("window.__states")
    partial = [s for s in states if s and s != "".join(chunks)]
    assert len(partial) >= 3, states  # seen growing, piece by piece
    assert all("".join(chunks).startswith(s) for s in partial)
    assert reply.locator(".body").inner_text() == "Once upon a time there was a lamp."
    # The user's bubble keeps its line break; the box is empty again; a timestamp is shown.
    user = page.locator("#messages article.msg.user").last
    assert user.locator(".body").inner_text() == "Tell me a story\nplease"
    assert page.input_value("#composer-text") == ""
    assert reply.locator("time").inner_text().strip() != ""
    # The conversation got a title from its first message.
    assert page.locator("#session-list .session.current").inner_text().startswith("Tell me a story")


def test_memory_panel_shows_activated_memories_and_the_report(page: Any, h: AppHarness) -> None:
    store_memory(h, "My sister Anna moved to Berlin in May.", importance=0.8)
    open_new_conversation(page, h)
    h.hippocampus.enqueue(
        Reply(
            chunks=[
                hippocampus_reply(
                    background="The user talks about Anna, their sister in Berlin.",
                    content="The user's sister Anna started a new job in Berlin.",
                )
            ]
        )
    )
    h.chat.enqueue(Reply(chunks=["How ", "exciting ", "for ", "Anna!"], chunk_delay_s=0.05))
    send(page, "My sister Anna in Berlin started a new job")

    panel = page.locator("#memory-panel")
    item = panel.locator(".activated-item").first
    item.wait_for()
    assert "My sister Anna moved to Berlin in May." in item.inner_text()
    channels = item.locator(".channel dt").all_inner_texts()
    # The cross-encoder's row where the reranking stage ran (install.sh installs it).
    reranked = h.services.long_term.reranker is not None
    rerank = ["rerank"] if reranked else []
    assert channels == ["recency", "importance", "relevance", "emotion", "cosine", *rerank, "final"]
    # A bar per weighted channel (cosine is present here) and the final score; the default
    # (hybrid) mode gives recency and emotion no weight: shown as unused, without a bar.
    assert item.locator("meter").count() == 4 + len(rerank)
    assert item.locator(".channel.unused dt").all_inner_texts() == ["recency", "emotion"]
    assert "Anna started a new job" in panel.locator(".outcomes.written").inner_text()
    assert "Anna, their sister in Berlin" in panel.locator(".background").inner_text()
    assert "ok" in panel.locator(".hippocampus").inner_text()
    assert panel.locator(".short-term li").count() == 2


def test_the_panel_shows_what_was_recalled_before_the_memory_merges(
    page: Any, h: AppHarness
) -> None:
    store_memory(h, "My sister Anna moved to Berlin in May.", importance=0.8)
    open_new_conversation(page, h)
    merge = threading.Event()  # the hippocampus answers only when the test lets it
    h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply()], hold=merge))
    h.chat.enqueue(Reply(chunks=["How ", "is ", "Anna ", "doing?"]))
    send(page, "how is my sister Anna in Berlin?")
    panel = page.locator("#memory-panel")
    item = panel.locator("#recalled-section .activated-item").first
    item.wait_for()
    assert "My sister Anna moved to Berlin in May." in item.inner_text()
    assert panel.locator(".report").count() == 0  # no report yet: the merge is held
    merge.set()
    panel.locator(".report .hippocampus").wait_for()
    assert "Anna moved to Berlin" in panel.locator("#recalled-section").inner_text()


def test_edit_pin_and_delete_a_memory(page: Any, h: AppHarness) -> None:
    memory_id = store_memory(h, "The user likes green tea.", importance=0.5)
    other = store_memory(h, "The user has a cat called Miso.", importance=0.6)
    ns = Namespace("local", "companion")
    page.goto(h.base_url + "/memories")
    card = page.locator(f"#memory-{memory_id}")

    card.get_by_role("button", name="Edit").click()
    page.fill(f"#content-{memory_id}", "The user likes jasmine tea.")
    page.fill(f"#importance-{memory_id}", "0.9")
    page.locator(f"#memory-{memory_id}").get_by_role("button", name="Save").click()
    page.locator(f"#memory-{memory_id} .memory-content", has_text="jasmine").wait_for()
    stored = h.services.long_term.get(ns, memory_id)
    assert stored is not None
    assert (stored.content, stored.importance) == ("The user likes jasmine tea.", 0.9)

    page.locator(f"#memory-{memory_id}").get_by_role("button", name="Pin").click()
    page.locator(f"#memory-{memory_id}").get_by_role("button", name="Unpin").wait_for()
    assert "pinned" in page.locator(f"#memory-{memory_id} .memory-meta").inner_text()
    stored = h.services.long_term.get(ns, memory_id)
    assert stored is not None and stored.pinned

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#memory-{other}").get_by_role("button", name="Delete").click()
    page.locator(f"#memory-{other}").wait_for(state="detached")
    assert h.services.long_term.get(ns, other) is None
    page.locator(".list-summary", has_text="1 memory").wait_for()


def test_delete_can_be_cancelled(page: Any, h: AppHarness) -> None:
    memory_id = store_memory(h, "The user runs on Sundays.")
    page.goto(h.base_url + "/memories")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.locator(f"#memory-{memory_id}").get_by_role("button", name="Delete").click()
    page.wait_for_timeout(300)
    assert page.locator(f"#memory-{memory_id}").count() == 1
    assert h.services.long_term.get(Namespace("local", "companion"), memory_id) is not None


def test_switch_persona(page: Any, h: AppHarness) -> None:
    first = open_new_conversation(page, h, "Companion")
    page.get_by_role("link", name="+ New").click()
    picker = page.locator(".persona-card[data-persona=poet]")
    assert "Answers in short verses" in picker.inner_text()
    assert "Tell me one small thing you saw today." in picker.inner_text()
    picker.get_by_role("button", name="Talk to Poet").click()
    page.wait_for_url(re.compile(r"\?session="))
    assert page.url.split("session=")[1] != first
    assert "with Poet" in page.locator(".conv-title").inner_text()
    assert "Tell me one small thing" in page.locator(".msg.greeting").inner_text()
    h.chat.enqueue(Reply(chunks=["A leaf, ", "a light."]))
    send(page, "I saw a red leaf")
    last_reply(page).locator(".body", has_text="a light.").wait_for()
    system = h.chat.chat_requests[-1].body["messages"][0]
    assert system["role"] == "system" and "POET-PROMPT-MARKER" in system["content"]
    # Both conversations are listed, each under its persona.
    assert page.locator("#session-list .persona-tag").all_inner_texts() == ["poet", "companion"]


def test_untrusted_text_is_never_executed(browser: Any, h: AppHarness) -> None:
    # CSP bypassed: the escaping alone must keep the payloads inert (CSP is a second wall).
    context = browser.new_context(bypass_csp=True)
    context.set_default_timeout(10_000)
    try:
        check_untrusted_text(context.new_page(), h)
    finally:
        context.close()


def check_untrusted_text(page: Any, h: AppHarness) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    store_memory(h, f"Remember {XSS} please", importance=0.9)
    open_new_conversation(page, h)
    h.hippocampus.enqueue(
        Reply(chunks=[hippocampus_reply(background=f"bg {XSS}", content=f"fact {XSS}")])
    )
    h.chat.enqueue(Reply(chunks=["Sure ", XSS[:20], XSS[20:], " [x](javascript:alert(1))"]))
    # The message carries the <img> half only: a reply that said the whole message back
    # would be an echo, which the reply guard stops (reply_guard.py).
    send(page, f"Remember {XSS[XSS.index('<img') :]} please")
    last_reply(page).locator(".body", has_text="Sure").wait_for()
    page.locator("#memory-panel .activated-item").first.wait_for()
    page.reload()  # the stored transcript, the panel and the sidebar, rendered by the server
    page.goto(h.base_url + "/memories")
    page.locator(".memory-content", has_text="<script>").first.wait_for()
    page.goto(h.base_url + "/")
    page.locator("#memory-panel .activated-item").first.wait_for()

    assert page.evaluate("window.__xss") is None
    assert dialogs == []
    assert page.locator("#main img").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    bubble = page.locator("#messages article.msg.assistant").last
    assert "<script>window.__xss='script'</script>" in bubble.inner_text()
    assert "<img src=x onerror=" in page.locator("#messages article.msg.user").last.inner_text()
    assert "<script>" in page.locator("#memory-panel .activated-content").first.inner_text()


def test_stop_button_ends_the_reply_and_records_it_incomplete(page: Any, h: AppHarness) -> None:
    session = open_new_conversation(page, h)
    h.chat.enqueue(Reply(chunks=[f"word{i} " for i in range(60)], chunk_delay_s=0.1))
    send(page, "Talk for a long time")
    page.locator("#messages .stream-text", has_text="word2").wait_for()
    page.get_by_role("button", name="Stop").click()
    reply = last_reply(page)
    reply.locator(".msg-error", has_text="Stopped").wait_for()
    text = reply.locator(".body").inner_text()
    assert text.startswith("word0") and "word59" not in text
    stored = [m for m in h.services.sessions.transcript(session) if m.role == "assistant"]
    assert stored[-1].status == "incomplete"
    # The next message works (the session was released).
    h.chat.enqueue(Reply(chunks=["Back again."]))
    send(page, "Still there?")
    last_reply(page).locator(".body", has_text="Back again.").wait_for()


def test_model_failure_is_shown_inline_with_a_retry(page: Any, h: AppHarness) -> None:
    open_new_conversation(page, h)
    h.chat.enqueue(Reply.error(500, "upstream exploded"))
    send(page, "Hello?")
    error = last_reply(page).locator(".msg-error")
    error.wait_for()
    assert "upstream exploded" in error.inner_text()
    h.chat.enqueue(Reply(chunks=["Hello ", "again!"]))
    error.get_by_role("button", name="Retry").click()
    last_reply(page).locator(".body", has_text="Hello again!").wait_for()
    assert h.chat.chat_requests[-1].body["messages"][-1]["content"] == "Hello?"


def test_rename_and_delete_a_conversation(page: Any, h: AppHarness) -> None:
    session = open_new_conversation(page, h)
    item = page.locator(f"#session-list [data-session='{session}']")
    item.locator("summary").click()
    item.locator("input[name=title]").fill("Evening talk")
    item.get_by_role("button", name="Rename").click()
    page.locator("#session-list .session-title", has_text="Evening talk").wait_for()
    assert h.services.sessions.get_session(session, "local").title == "Evening talk"  # type: ignore[union-attr]
    item = page.locator(f"#session-list [data-session='{session}']")
    item.locator("summary").click()
    page.once("dialog", lambda dialog: dialog.accept())
    item.get_by_role("button", name="Delete").click()
    page.wait_for_url(h.base_url + "/")
    assert h.services.sessions.get_session(session, "local") is None


def test_phone_sized_screen(browser: Any, h: AppHarness) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        open_new_conversation(page, h)
        expect = playwright_expect()
        sidebar = page.locator("#sidebar")
        expect(sidebar).not_to_be_in_viewport()  # a drawer, off screen
        page.get_by_role("button", name="Conversations").click()
        expect(sidebar).to_be_in_viewport(ratio=1)
        page.keyboard.press("Escape")
        expect(sidebar).not_to_be_in_viewport()
        h.chat.enqueue(Reply(chunks=["Small ", "screen."]))
        send(page, "hi")
        last_reply(page).locator(".body", has_text="Small screen.").wait_for()
        box = page.locator("#composer-text").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        page.locator("[data-drawer=memory-panel]").click()
        panel = page.locator("#memory-panel")
        expect(panel).to_be_in_viewport(ratio=1)
        panel.get_by_role("button", name="Close the memory panel").click()
        expect(panel).not_to_be_in_viewport()
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= 390  # nothing overflows sideways
    finally:
        context.close()


def test_sign_in_then_chat_with_csrf_protected_forms(page: Any, auth_h: AppHarness) -> None:
    page.goto(auth_h.base_url + "/memories")
    page.wait_for_url(re.compile(r"/login\?next="))
    page.fill("#key", "wrong")
    page.get_by_role("button", name="Sign in").click()
    page.locator(".error-box", has_text="not valid").wait_for()
    page.fill("#key", API_KEY)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(auth_h.base_url + "/memories")
    assert page.evaluate("document.cookie") == ""  # HttpOnly: scripts cannot read the key
    open_new_conversation(page, auth_h)
    auth_h.chat.enqueue(Reply(chunks=["Signed ", "in."]))
    send(page, "hello")
    last_reply(page).locator(".body", has_text="Signed in.").wait_for()
    sessions = auth_h.services.sessions.list_sessions("alice")
    assert len(sessions) == 1
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/login"))


def test_a_banner_says_memory_is_not_being_saved_and_goes_when_it_is(
    page: Any, h: AppHarness
) -> None:
    """Issue 26: the hippocampus's server fails every request; the banner comes with
    the third turn's memory panel, in words, and goes with the first run that works."""
    open_new_conversation(page, h)
    banner = page.locator("#memory-warning")
    assert banner.is_hidden()
    refused = Reply.error(500, "the model process crashed (out of memory)")
    h.hippocampus.enqueue(refused, times=3)
    for number in range(1, 4):
        h.chat.enqueue(Reply(chunks=[f"reply {number}"]))
        send(page, f"message {number}")
        last_reply(page).locator(".body", has_text=f"reply {number}").wait_for()
    playwright_expect()(banner).to_be_visible(timeout=15_000)
    said = banner.inner_text()
    assert said.startswith("Memory is not being saved: the memory model failed: scripted at")
    assert "HTTP 500: the model process crashed (out of memory)" in said
    h.chat.enqueue(Reply(chunks=["reply 4"]))
    send(page, "message 4")  # the hippocampus's default answer is valid again
    playwright_expect()(banner).to_be_hidden(timeout=15_000)
