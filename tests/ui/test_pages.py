"""The UI's HTML over HTTP (no browser): escaping, sign-in, CSRF, the fragments, vendor check."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from backend.memory.entities import EntityEdit
from backend.memory.types import Namespace
from backend.web import ui_turns
from backend.web.ui import mount_ui, vendor_problem
from backend.web.ui_support import COOKIE, CSP, csrf_token, make_markdown
from tests.llm.scripted_server import Reply
from tests.ui.conftest import API_KEY, OTHER_KEY, client, hippocampus_reply, store_memory
from tests.web.harness import AppHarness

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'
RAW_TAGS = re.compile(r"<script>alert|<img src=x", re.IGNORECASE)
NS = Namespace("local", "companion")


def new_session(c: httpx.Client, persona: str = "companion", **kwargs: object) -> str:
    response = c.post("/ui/sessions", data={"persona": persona}, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == 303, response.text
    return response.headers["location"].split("session=")[1]


def run_turn(c: httpx.Client, session: str, text: str) -> tuple[str, list[tuple[str, str]]]:
    """Post a message and read its stream: (the post's HTML, [(event, data), ...])."""
    posted = c.post(f"/ui/sessions/{session}/messages", data={"text": text})
    assert posted.status_code == 200, posted.text
    turn = re.search(r'data-stream="([0-9a-f]+)"', posted.text)
    assert turn is not None
    events: list[tuple[str, str]] = []
    with c.stream("GET", f"/ui/sessions/{session}/turns/{turn.group(1)}/stream") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        event, data = "message", []
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                events.append((event, "\n".join(data)))
                event, data = "message", []
    return posted.text, events


# --- pages -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/?new=1", "/memories", "/personas", "/status"])
def test_pages_render_with_security_headers(h: AppHarness, path: str) -> None:
    with client(h) as c:
        new_session(c)
        response = c.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-frame-options"] == "DENY"
    assert "/static/vendor/htmx.min.js" in response.text
    assert "<script>" not in response.text  # no inline scripts at all


def test_static_files_and_vendor_are_served(h: AppHarness) -> None:
    with client(h) as c:
        for path in ("/static/app.css", "/static/app.js", "/static/vendor/htmx.min.js"):
            assert c.get(path).status_code == 200, path
        assert "defineExtension('sse'" in c.get("/static/vendor/htmx-ext-sse.js").text


def test_chat_page_lists_personas_with_description_and_greeting(h: AppHarness) -> None:
    with client(h) as c:
        page = c.get("/").text
    assert "Talk to Companion" in page and "Talk to Poet" in page
    assert "Answers in short verses" in page
    assert "Tell me one small thing you saw today." in page


def test_status_page_shows_models_health_and_counts(h: AppHarness) -> None:
    store_memory(h, "The user plays the cello.")
    with client(h) as c:
        page = c.get("/status").text
    assert "OpenAI-compatible" in page and "scripted" in page
    assert "Session database" in page and "unreachable" not in page
    assert re.search(r"Companion</a></th>\s*<td>1</td>", page)
    assert "upstream-secret" not in page  # provider keys are never shown


def test_unknown_session_is_a_404_page(h: AppHarness) -> None:
    with client(h) as c:
        response = c.get("/?session=nope")
        fragment = c.post("/ui/sessions/nope/messages", data={"text": "hi"})
    assert response.status_code == 404 and "does not exist" in response.text
    assert fragment.status_code == 404 and 'class="error-box"' in fragment.text


def test_message_validation(h: AppHarness) -> None:
    limit = h.settings.server.max_message_chars
    with client(h) as c:
        session = new_session(c)
        empty = c.post(f"/ui/sessions/{session}/messages", data={"text": "   "})
        long = c.post(f"/ui/sessions/{session}/messages", data={"text": "x" * (limit + 1)})
    assert empty.status_code == 400
    assert long.status_code == 413 and str(limit) in long.text
    assert h.services.sessions.transcript(session) == []


# --- chat and the panel ----------------------------------------------------------------------


def test_turn_streams_escaped_tokens_then_rendered_markdown(h: AppHarness) -> None:
    # An opening of three words: the reply guard shows it at once (reply_guard.py).
    h.chat.enqueue(
        Reply(chunks=["Hi there, you ", "<b>x</b> ", "**bold** ", "[l](javascript:alert(1))"])
    )
    with client(h) as c:
        session = new_session(c)
        posted, events = run_turn(c, session, "hello")
    assert [e for e, _ in events] == ["recalled"] + ["token"] * 4 + ["final", "done"]
    assert "No memory was recalled for this reply." in events[0][1]
    assert events[2][1] == "&lt;b&gt;x&lt;/b&gt; "
    final = events[5][1]
    assert "<strong>bold</strong>" in final and "&lt;b&gt;x&lt;/b&gt;" in final
    assert 'href="javascript' not in final and "<a " not in final
    assert f"/ui/sessions/{session}/panel?turn=" in final  # refreshes the memory panel
    assert "hello" in posted and 'sse-connect="' in posted


def test_links_in_replies_open_safely() -> None:
    html = make_markdown().render("[site](https://example.org) <i>raw</i>")
    assert 'rel="noopener noreferrer nofollow"' in html and 'target="_blank"' in html
    assert "&lt;i&gt;raw&lt;/i&gt;" in html


def test_untrusted_text_is_escaped_everywhere(h: AppHarness) -> None:
    store_memory(h, f"Remember {XSS}", importance=0.9)
    h.hippocampus.enqueue(
        Reply(
            chunks=[
                hippocampus_reply(
                    background=f"bg {XSS}",
                    short_term=[{"role": "note", "text": f"note {XSS}"}],
                    content=f"fact {XSS}",
                )
            ]
        )
    )
    h.chat.enqueue(Reply(chunks=[XSS[:10], XSS[10:]]))
    with client(h) as c:
        session = new_session(c)
        posted, events = run_turn(c, session, f"Remember {XSS}")
        c.post(f"/ui/sessions/{session}/rename", data={"title": XSS})
        turn = re.search(r"panel\?turn=([0-9a-f]+)", events[-2][1])
        assert turn is not None
        panel = c.get(f"/ui/sessions/{session}/panel?turn={turn.group(1)}").text
        pages = [c.get(f"/?session={session}").text, c.get("/memories").text, panel, posted]
    pages += [data for _, data in events]
    assert "fact &lt;script&gt;" in panel  # written: shown, escaped
    assert "Remember &lt;script&gt;" in panel  # activated
    for html in pages:
        assert not RAW_TAGS.search(html), html
    assert "&lt;script&gt;" in pages[0] and "&lt;img src=x" in pages[1]


def test_panel_reports_activation_channels_and_missing_cosine(h: AppHarness) -> None:
    # Written without a vector (the embedder was down): the cosine channel is missing.
    h.services.long_term.embedder.down = True  # type: ignore[union-attr]
    store_memory(h, "The user's dog is called Pepper.", importance=0.9)
    h.services.long_term.embedder.down = False  # type: ignore[union-attr]
    with client(h) as c:
        session = new_session(c)
        _, events = run_turn(c, session, "How is my dog Pepper?")
        turn = re.search(r"panel\?turn=([0-9a-f]+)", events[-2][1])
        assert turn is not None
        panel = c.get(f"/ui/sessions/{session}/panel?turn={turn.group(1)}").text
    # The stream's first event: what was recalled, before any token and before the merge.
    event, recalled = events[0]
    assert event == "recalled" and 'id="recalled-section"' in recalled
    assert "The user&#39;s dog is called Pepper." in recalled and ">missing<" in recalled
    assert "The user&#39;s dog is called Pepper." in panel
    for channel in ("recency", "importance", "relevance", "emotion", "cosine", "final"):
        assert f"<dt>{channel}</dt>" in panel
    assert 'class="channel missing"' in panel and ">missing<" in panel
    assert 'Hippocampus: <span class="status status-ok">ok</span>' in panel


def test_panel_shows_weighted_shares_with_recency_unused_in_hybrid_mode(h: AppHarness) -> None:
    # Written a moment ago: its raw recency is ~1, but the default (hybrid) mode gives
    # recency no weight, so the panel shows it as unused instead of a bar.
    store_memory(h, "The user's dog is called Pepper.", importance=0.9)
    with client(h) as c:
        session = new_session(c)
        _, events = run_turn(c, session, "How is my dog Pepper?")
        turn = re.search(r"panel\?turn=([0-9a-f]+)", events[-2][1])
        assert turn is not None
        panel = c.get(f"/ui/sessions/{session}/panel?turn={turn.group(1)}").text
        detail = c.get(f"/api/sessions/{session}").json()
    item = detail["reports"][-1]["report"]["activated"][0]
    assert item["mode"] == "hybrid" and item["unused"] == ["recency", "emotion"]
    assert item["contributions"]["recency"] is None and item["score"]["recency"] > 0.99
    shares = [share for share in item["contributions"].values() if share is not None]
    assert sum(shares) + item["remainder"] == pytest.approx(item["score"]["final"], abs=1e-9)
    assert "in the <strong>hybrid</strong> mode" in panel
    recency = re.search(r'<div class="([^"]*)">\s*<dt>recency</dt>\s*<dd>(.*?)</dd>', panel, re.S)
    assert recency is not None
    assert recency.group(1) == "channel unused" and ">unused<" in recency.group(2)
    assert "<meter" not in recency.group(2) and ">0.00</span>" not in recency.group(2)
    cosine = item["contributions"]["cosine"]
    assert f'<meter min="0" max="1" value="{cosine}"' in panel


def test_compressed_short_term_items_are_marked(h: AppHarness) -> None:
    with client(h) as c:
        session = new_session(c)
        h.services.sessions.save_state(
            session,
            "A background.",
            [
                {"role": "user", "text": "old talk", "compressed": True},
                {"role": "user", "text": "new"},
            ],
            None,
        )
        panel = c.get(f"/ui/sessions/{session}/panel").text
    assert re.search(r'class="st st-user compressed".*?compressed</span>', panel, re.S)
    assert panel.count("compressed</span>") == 1


def test_model_failure_becomes_an_inline_error_with_retry(h: AppHarness) -> None:
    h.chat.enqueue(Reply.error(500, "upstream down"))
    with client(h) as c:
        session = new_session(c)
        _, events = run_turn(c, session, "hello?")
    final = dict(events)["final"]
    assert "upstream down" in final and ">Retry</button>" in final
    assert 'name="text" value="hello?"' in final
    replies = [m for m in h.services.sessions.transcript(session) if m.role == "assistant"]
    assert replies[-1].status == "incomplete"


def test_reconnecting_to_a_finished_stream_replays_the_stored_reply(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["Stored ", "reply."]))
    with client(h) as c:
        session = new_session(c)
        posted, _ = run_turn(c, session, "hi")
        turn = re.search(r'data-stream="([0-9a-f]+)"', posted)
        assert turn is not None
        again = c.get(f"/ui/sessions/{session}/turns/{turn.group(1)}/stream").text
        bubble = c.get(f"/ui/sessions/{session}/turns/{turn.group(1)}").text
    assert "event: final" in again and "Stored reply." in again
    assert "Stored reply." in bubble


def test_rename_and_delete_sessions(h: AppHarness) -> None:
    with client(h) as c:
        first, second = new_session(c), new_session(c, "poet")
        listing = c.post(f"/ui/sessions/{first}/rename", data={"title": "Morning"}).text
        assert "Morning" in listing
        gone = c.post(
            f"/ui/sessions/{first}/delete",
            headers={"HX-Request": "true", "HX-Current-URL": f"{h.base_url}/?session={second}"},
        )
        assert gone.status_code == 200 and first not in gone.text and second in gone.text
        current = c.post(
            f"/ui/sessions/{second}/delete",
            headers={"HX-Request": "true", "HX-Current-URL": f"{h.base_url}/?session={second}"},
        )
        assert current.headers["hx-redirect"] == "/"
    assert h.services.sessions.list_sessions("local") == []


# --- memories --------------------------------------------------------------------------------


def test_memories_search_filter_and_sort(h: AppHarness) -> None:
    store_memory(h, "The user likes green tea.", category="preference", importance=0.3)
    store_memory(h, "The user works as a nurse.", category="work", importance=0.9)
    with client(h) as c:
        by_importance = c.get("/memories", params={"sort": "importance"}).text
        searched = c.get("/memories", params={"q": "TEA"}).text
        filtered = c.get("/memories", params={"category": "work"}).text
        fragment = c.get("/memories", params={"q": "nurse"}, headers={"HX-Target": "memory-list"})
    assert by_importance.index("nurse") < by_importance.index("green tea")
    assert "green tea" in searched and "nurse" not in searched
    assert "nurse" in filtered and "green tea" not in filtered
    assert "<html" not in fragment.text and "nurse" in fragment.text


def test_memory_edit_pin_versions_and_delete(h: AppHarness) -> None:
    old = store_memory(h, "The user lives in Lyon.")
    new = store_memory(h, "The user lives in Paris.")
    store = h.services.long_term.store
    older, newer = store.get(NS, [old, new])
    store.upsert(NS, [replace(older, superseded_by=new), replace(newer, supersedes=old)])
    with client(h) as c:
        edited = c.post(
            f"/ui/memories/companion/{new}",
            data={"content": "The user lives in Paris, France.", "importance": "0.85"},
        )
        assert edited.status_code == 200 and "Paris, France" in edited.text
        assert (
            c.post(f"/ui/memories/companion/{new}/pin", data={"pinned": "true"}).status_code == 200
        )
        versions = c.get(f"/ui/memories/companion/{new}/versions").text
        assert versions.index("Lyon") < versions.index("Paris, France")
        form = c.get(f"/ui/memories/companion/{new}", params={"edit": "true"}).text
        assert "<textarea" in form and "Paris, France.</textarea>" in form
        deleted = c.post(f"/ui/memories/companion/{new}/delete")
        assert deleted.status_code == 200 and deleted.headers["hx-trigger"] == "memories-changed"
        missing = c.post(f"/ui/memories/companion/{new}/pin", data={"pinned": "false"})
        assert missing.status_code == 404
    memory = h.services.long_term.get(NS, old)
    assert memory is not None and memory.superseded_by is None  # the chain was spliced


def test_memory_export_and_import_round_trip(h: AppHarness, tmp_path: Path) -> None:
    store_memory(h, "The user was born in April.")
    with client(h) as c:
        exported = c.get("/ui/memories/companion/export")
        assert exported.status_code == 200
        assert "attachment" in exported.headers["content-disposition"]
        lines = exported.text.splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["content"] == "The user was born in April."
        imported = c.post(
            "/ui/memories/poet/import",
            files={"file": ("memories.jsonl", exported.content + b"not json\n")},
        )
    assert imported.status_code == 200
    assert "<strong>1</strong> written" in imported.text and "1 unreadable" in imported.text
    assert "Your edits of" not in imported.text
    assert h.services.long_term.store.count(Namespace("local", "poet")) == 1


def test_the_pages_export_and_import_carry_the_people_edits(h: AppHarness) -> None:
    store_memory(h, "The user's friend Tommy is moving to Berlin.")
    h.services.sessions.change_entity_edits(
        "local", "companion", lambda _: [EntityEdit("tommy", relation="brother")]
    )
    with client(h) as c:
        exported = c.get("/ui/memories/companion/export")
        assert '"entity_edits"' in exported.text.splitlines()[-1]
        imported = c.post(
            "/ui/memories/poet/import", files={"file": ("memories.jsonl", exported.content)}
        )
    assert "Your edits of 1 person or pet applied." in imported.text
    assert h.services.sessions.entity_edits("local", "poet") == [
        EntityEdit("tommy", relation="brother")
    ]


def test_unknown_persona_or_memory(h: AppHarness) -> None:
    with client(h) as c:
        assert c.get("/memories", params={"persona": "nobody"}).status_code == 404
        assert c.get("/ui/memories/companion/nope").status_code == 404
        assert c.post("/ui/sessions", data={"persona": "nobody"}).status_code == 404


# --- sign-in and cross-site requests ---------------------------------------------------------


def test_auth_redirects_to_login_and_sets_a_strict_httponly_cookie(auth_h: AppHarness) -> None:
    with client(auth_h) as c:
        page = c.get("/memories?q=x")
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=%2Fmemories%3Fq%3Dx"
        htmx = c.get("/ui/sessions/x/panel", headers={"HX-Request": "true"})
        assert htmx.status_code == 401 and htmx.headers["hx-redirect"].startswith("/login")
        assert c.get("/login").status_code == 200
        assert c.post("/login", data={"key": "wrong"}).status_code == 401
        login = c.post("/login", data={"key": API_KEY, "next": "//evil.example/"})
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert c.get("/memories").status_code == 200


def test_writes_need_the_csrf_token_when_auth_is_on(auth_h: AppHarness) -> None:
    with client(auth_h, cookies={COOKIE: API_KEY}) as c:
        page = c.get("/").text
        token = csrf_token(API_KEY)
        assert token in page  # in hx-headers and in the plain forms
        assert c.post("/ui/sessions", data={"persona": "companion"}).status_code == 403
        wrong = c.post("/ui/sessions", data={"persona": "companion", "csrf_token": "x" * 64})
        assert wrong.status_code == 403
        ok = c.post("/ui/sessions", data={"persona": "companion", "csrf_token": token})
        assert ok.status_code == 303
        via_header = c.post(
            "/ui/sessions", data={"persona": "poet"}, headers={"X-CSRF-Token": token}
        )
        assert via_header.status_code == 303
        # Another user's token is not this user's.
        other = c.post(
            "/ui/sessions",
            data={"persona": "poet"},
            headers={"X-CSRF-Token": csrf_token(OTHER_KEY)},
        )
        assert other.status_code == 403
    assert len(auth_h.services.sessions.list_sessions("alice")) == 2


def test_cross_site_writes_are_refused_even_with_a_token(auth_h: AppHarness) -> None:
    token = csrf_token(API_KEY)
    with client(auth_h, cookies={COOKIE: API_KEY}) as c:
        evil = c.post(
            "/ui/sessions",
            data={"persona": "companion", "csrf_token": token},
            headers={"Origin": "http://evil.example"},
        )
        fetch = c.post(
            "/ui/sessions",
            data={"persona": "companion", "csrf_token": token},
            headers={"Sec-Fetch-Site": "cross-site"},
        )
    assert evil.status_code == 403 and fetch.status_code == 403
    assert "did not come from this app" in evil.text
    assert auth_h.services.sessions.list_sessions("alice") == []


def test_cross_site_writes_are_refused_without_auth_too(h: AppHarness) -> None:
    with client(h, headers={"Origin": "http://evil.example"}) as c:
        assert c.post("/ui/sessions", data={"persona": "companion"}).status_code == 403
    with client(h, headers={"Sec-Fetch-Site": "same-site"}) as c:
        assert c.post("/ui/sessions", data={"persona": "companion"}).status_code == 403
    assert h.services.sessions.list_sessions("local") == []


def test_bearer_key_works_without_csrf_and_users_are_isolated(auth_h: AppHarness) -> None:
    alice = {"Authorization": f"Bearer {API_KEY}"}
    bob = {"Authorization": f"Bearer {OTHER_KEY}"}
    store_memory(auth_h, "Alice's secret garden.", user="alice")
    with httpx.Client(base_url=auth_h.base_url, timeout=10) as c:
        created = c.post("/ui/sessions", data={"persona": "companion"}, headers=alice)
        assert created.status_code == 303
        session = created.headers["location"].split("session=")[1]
        assert c.get(f"/?session={session}", headers=alice).status_code == 200
        assert c.get(f"/?session={session}", headers=bob).status_code == 404
        assert "secret garden" in c.get("/memories", headers=alice).text
        assert "secret garden" not in c.get("/memories", headers=bob).text
        logout = c.post("/logout", headers=alice)
        assert logout.status_code == 303 and COOKIE in logout.headers["set-cookie"]


def test_login_page_redirects_home_when_auth_is_off(h: AppHarness) -> None:
    with client(h) as c:
        assert c.get("/login").headers["location"] == "/"


# --- vendor files ----------------------------------------------------------------------------


def _frontend(tmp_path: Path, manifest: dict[str, str] | None) -> Path:
    frontend = tmp_path / "frontend"
    (frontend / "static" / "vendor").mkdir(parents=True)
    (frontend / "templates").mkdir()
    pins = {"htmx.org": "2.0.11", "htmx-ext-sse": "2.2.4"}
    (frontend / "package.json").write_text(json.dumps({"dependencies": pins}))
    if manifest is not None:
        for name in ("htmx.min.js", "htmx-ext-sse.js"):
            (frontend / "static" / "vendor" / name).write_text("//")
        (frontend / "static" / "vendor" / "manifest.json").write_text(json.dumps(manifest))
    return frontend


def test_the_ui_refuses_to_start_without_its_vendor_files(tmp_path: Path) -> None:
    frontend = _frontend(tmp_path, None)
    problem = vendor_problem(frontend)
    assert problem is not None and "install-vendor.sh" in problem and "htmx.min.js" in problem
    app = FastAPI()
    mount_ui(app, frontend)
    with TestClient(app) as c:
        response = c.get("/")
        assert c.get("/static/app.css").status_code == 404
    assert response.status_code == 503 and "install-vendor.sh" in response.text


def test_stale_vendor_files_are_reported(tmp_path: Path) -> None:
    stale = _frontend(tmp_path, {"htmx.org": "1.9.0", "htmx-ext-sse": "2.2.4"})
    problem = vendor_problem(stale)
    assert problem is not None and "htmx.org 1.9.0 (pinned 2.0.11)" in problem
    assert vendor_problem() is None  # this checkout: installed and pinned


def test_a_stream_never_opened_is_abandoned_and_frees_the_session(
    h: AppHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ui_turns, "UNCLAIMED_S", 0.2)
    with client(h) as c:
        session = new_session(c)
        first = c.post(f"/ui/sessions/{session}/messages", data={"text": "first"})
        assert first.status_code == 200  # ...and its stream is never opened
        h.chat.enqueue(Reply(chunks=["Second ", "answer."]))
        _, events = run_turn(c, session, "second")  # waits for the abandoned turn's merge
    assert "Second answer." in dict(events)["final"]
    replies = [m for m in h.services.sessions.transcript(session) if m.role == "assistant"]
    assert [m.status for m in replies] == ["complete"]


def test_signed_out_fragments_and_streams(auth_h: AppHarness) -> None:
    with client(auth_h) as c:
        fragment = c.get(
            "/ui/sessions/x/panel",
            headers={"HX-Request": "true", "HX-Current-URL": f"{auth_h.base_url}/?session=x"},
        )
        stream = c.get("/ui/sessions/x/turns/y/stream", headers={"Accept": "text/event-stream"})
    assert fragment.headers["hx-redirect"] == "/login?next=%2F%3Fsession%3Dx"
    assert stream.status_code == 204  # an EventSource stops instead of retrying


def test_the_memories_page_shows_people_and_pets_with_their_facts(h: AppHarness) -> None:
    store_memory(h, "The user's pug Pixel snores like a tractor.")
    store_memory(h, "Pixel, the user's dog, hates the vacuum cleaner.")
    store_memory(h, "The user's older sister Anjali lives in Toronto.")
    store_memory(h, "The user works as a nurse.")
    with client(h) as c:
        page = c.get("/memories").text
    people = page[page.index('id="people-title"') : page.index('id="memory-list"')]
    assert "Pixel" in people and "pet · pug, dog · 2 memories" in people
    assert "Anjali" in people and "person · sister · 1 memory" in people
    assert "hates the vacuum cleaner" in people and "nurse" not in people
    assert "q=Pixel" in people
    # A filtered page still shows everyone (read apart from the filtered list).
    with client(h) as c:
        filtered = c.get("/memories", params={"q": "nurse"}).text
    assert "Pixel" in filtered[filtered.index('id="people-title"') :]
    # The list alone (a filter's htmx swap) does not read the people again.
    with client(h) as c:
        fragment = c.get("/memories", params={"q": "pug"}, headers={"HX-Target": "memory-list"})
    assert "Pixel" in fragment.text and 'id="people-title"' not in fragment.text
    # Without a memory that names anyone, there is no such section.
    h.services.long_term.store.drop_namespace(NS)
    with client(h) as c:
        assert 'id="people-title"' not in c.get("/memories").text
