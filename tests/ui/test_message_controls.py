"""The chat page's message controls over HTTP (no browser): regenerate with versions, edit
and continue in a branch, delete a turn; and where memories came from, on the memories
page and through the REST API (issue 30; backend.web.ui_messages, sessions_api)."""

from __future__ import annotations

import json
import re

import httpx

from backend.memory.types import Namespace
from tests.llm.scripted_server import Reply
from tests.ui.conftest import API_KEY, OTHER_KEY, client, hippocampus_reply
from tests.ui.test_pages import new_session, run_turn
from tests.web.harness import AppHarness

NS = Namespace("local", "companion")
PEANUTS = "The user is allergic to peanuts."


def read_stream(c: httpx.Client, session: str, html: str) -> list[tuple[str, str]]:
    turn = re.search(r'data-stream="([0-9a-f]+)"', html)
    assert turn is not None, html
    events: list[tuple[str, str]] = []
    with c.stream("GET", f"/ui/sessions/{session}/turns/{turn.group(1)}/stream") as stream:
        event, data = "message", []
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                events.append((event, "\n".join(data)))
                event, data = "message", []
    return events


def memories(h: AppHarness) -> list[str]:
    return sorted(m.content for m in h.services.long_term.store.iter_all(NS))


def test_regenerate_keeps_versions_and_forms_no_memory_twice(h: AppHarness) -> None:
    h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=PEANUTS)]))
    h.chat.enqueue(Reply(chunks=["Noted, no peanuts for you."]))
    with client(h) as c:
        session = new_session(c)
        run_turn(c, session, "I'm allergic to peanuts")
        h.drain()
        runs = len(h.hippocampus.chat_requests)
        reply = h.services.sessions.transcript(session)[-1]
        answers = ["I will remember that you avoid peanuts.", "Peanuts are off the menu."]
        for count, answer in enumerate(answers, start=2):
            h.chat.enqueue(Reply(chunks=[answer]))
            posted = c.post(f"/ui/sessions/{session}/messages/{reply.id}/regenerate")
            assert posted.status_code == 200, posted.text
            assert 'class="msg user' not in posted.text  # the reply's bubble only
            final = read_stream(c, session, posted.text)[-2][1]
            assert answer in final and f"{count}/{count}" in final
        transcript = h.services.sessions.transcript(session)
        assert [m.content for m in transcript][-1] == "Peanuts are off the menu."
        assert len(transcript) == 2  # replaced in place: no turn added
        assert len(h.hippocampus.chat_requests) == runs  # no second hippocampus run
        assert memories(h) == [PEANUTS]  # and no duplicate memory
        # Flip back to the first version: the transcript and short-term memory show it.
        shown = c.post(f"/ui/sessions/{session}/messages/{reply.id}/versions/1")
        assert shown.status_code == 200 and "1/3" in shown.text
        assert "Noted, no peanuts for you." in shown.text
        h.drain()
        assert h.services.sessions.transcript(session)[-1].content == "Noted, no peanuts for you."
        short = [i["text"] for i in h.services.sessions.load_state(session).short_term]
        assert short[-1] == "Noted, no peanuts for you."
        page = c.get(f"/?session={session}").text
        assert "1/3" in page and "↻ Regenerate" in page
        assert c.post(f"/ui/sessions/{session}/messages/{reply.id}/versions/4").status_code == 404
        # Only the last reply can be regenerated.
        h.chat.enqueue(Reply(chunks=["Anything else on your mind today?"]))
        run_turn(c, session, "thanks")
        h.drain()
        again = c.post(f"/ui/sessions/{session}/messages/{reply.id}/regenerate")
        assert again.status_code == 409


def test_delete_a_turn_forgets_what_only_it_formed(h: AppHarness) -> None:
    address = "The user's ex lives at 12 Elm Street."
    with client(h) as c:
        session = new_session(c)
        h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=PEANUTS)]))
        h.chat.enqueue(Reply(chunks=["Good to know about the peanuts."]))
        run_turn(c, session, "I'm allergic to peanuts")
        h.drain()
        h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=address)]))
        h.chat.enqueue(Reply(chunks=["Thanks for telling me where."]))
        run_turn(c, session, "My ex lives at 12 Elm Street")
        h.drain()
        ex = next(m for m in h.services.sessions.transcript(session) if "Elm" in m.content)
        deleted = c.post(f"/ui/sessions/{session}/messages/{ex.id}/delete")
        assert deleted.status_code == 200, deleted.text
        assert "Elm Street" not in deleted.text.split('id="memory-panel"')[0].split("Forgotten")[0]
        assert (
            "Forgotten" in deleted.text and "formed only from the deleted message" in deleted.text
        )
        assert 'hx-swap-oob="innerHTML"' in deleted.text  # the panel comes with it
        assert memories(h) == [PEANUTS]
        export = c.get("/ui/memories/companion/export").text
        assert "Elm" not in export and "peanuts" in export
        assert all("Elm" not in m.content for m in h.services.sessions.transcript(session))
        page = c.get(f"/?session={session}").text
        assert "12 Elm Street" not in page.split('id="memory-panel"')[0]
        # Unknown message: 404.
        assert c.post(f"/ui/sessions/{session}/messages/999999/delete").status_code == 404
        # The next turn's report is its own: the deletion's is not shown with it.
        h.chat.enqueue(Reply(chunks=["What would you like to talk about?"]))
        run_turn(c, session, "let's talk")
        h.drain()
        assert "Forgotten" not in c.get(f"/ui/sessions/{session}/panel").text
        # The title was made from the first message: deleting it, the title goes too.
        first = h.services.sessions.transcript(session)[0]
        assert h.services.sessions.get_session(session, "local").title == first.content
        deleted = c.post(f"/ui/sessions/{session}/messages/{first.id}/delete")
        assert 'id="session-list"' in deleted.text and "let&#39;s talk" in deleted.text
        assert h.services.sessions.get_session(session, "local").title == "let's talk"
        assert memories(h) == []


def test_edit_continues_in_a_branch_and_revises_memory(h: AppHarness) -> None:
    shellfish = "The user is allergic to shellfish."
    with client(h) as c:
        session = new_session(c)
        h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=PEANUTS)]))
        h.chat.enqueue(Reply(chunks=["Good to know about the peanuts."]))
        run_turn(c, session, "I'm allergic to peanuts")
        h.drain()
        first = h.services.sessions.transcript(session)[0]
        h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=shellfish)]))
        h.chat.enqueue(Reply(chunks=["Shellfish it is, I will keep that in mind."]))
        edited = c.post(
            f"/ui/sessions/{session}/messages/{first.id}/edit",
            data={"text": "I'm allergic to shellfish"},
            headers={"HX-Request": "true"},
        )
        assert edited.status_code == 204, edited.text
        target = edited.headers["HX-Redirect"]
        branch = re.search(r"session=([^&]+)", target).group(1)  # type: ignore[union-attr]
        assert branch.startswith(session + "~")
        page = c.get(target).text  # the branch page streams the reply
        assert "I&#39;m allergic to shellfish" in page and 'sse-connect="' in page
        events = read_stream(c, branch, page)
        assert "Shellfish it is" in events[-2][1]
        h.drain()
        assert memories(h) == [shellfish]
        panel = c.get(f"/ui/sessions/{branch}/panel").text
        assert "Forgotten" in panel and "peanuts" in panel and "before your edit" in panel
        listed = c.get("/").text
        assert "(edited)" in listed  # the branch is in the conversation list
        # The original conversation is as it was.
        assert h.services.sessions.transcript(session)[0].content == "I'm allergic to peanuts"
        # The next answer about food is prompted with the edit: asked about both, the
        # notes recalled for it hold the shellfish allergy and no peanut one.
        h.chat.enqueue(Reply(chunks=["Shellfish is the one to avoid, as you told me."]))
        run_turn(c, branch, "Am I allergic to peanuts or to shellfish?")
        sent = h.chat.chat_requests[-1].body["messages"]
        notes = json.dumps([m["content"] for m in sent if m["role"] == "system"])
        assert "allergic to shellfish" in notes and "peanut" not in notes.lower()


def test_the_memories_page_says_where_a_memory_came_from(h: AppHarness) -> None:
    with client(h) as c:
        session = new_session(c)
        h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=PEANUTS)]))
        h.chat.enqueue(Reply(chunks=["Good to know about the peanuts."]))
        run_turn(c, session, "I'm allergic to peanuts")
        h.drain()
        h.services.long_term.create(NS, h.services.long_term.new_memory("The user likes tea."))
        page = c.get("/memories").text
        said_id = h.services.sessions.transcript(session)[0].id
        assert f'href="/?session={session}#msg-{said_id}"' in page
        assert "from:" in page and "“I&#39;m allergic to peanuts”" in page
        assert page.count('class="memory-source"') == 1  # the tea memory has no source
        assert f'id="msg-{said_id}"' in c.get(f"/?session={session}").text


def test_rest_api_sources_delete_and_edit(h: AppHarness) -> None:
    with client(h) as c:
        session = new_session(c)
        h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=PEANUTS)]))
        h.chat.enqueue(Reply(chunks=["Good to know about the peanuts."]))
        run_turn(c, session, "I'm allergic to peanuts")
        h.drain()
        (memory,) = h.services.long_term.store.iter_all(NS)
        sources = c.get(f"/api/personas/companion/memories/{memory.id}/sources").json()
        assert [(s["session_id"], s["seq"], s["content"]) for s in sources] == [
            (session, 1, "I'm allergic to peanuts")
        ]
        h.hippocampus.enqueue(
            Reply(chunks=[hippocampus_reply(content="The user is allergic to shellfish.")])
        )
        h.chat.enqueue(Reply(chunks=["Shellfish, noted for the future."]))
        edited = c.post(
            f"/api/sessions/{session}/messages/1/edit",
            json={"content": "I'm allergic to shellfish"},
        )
        assert edited.status_code == 200, edited.text
        body = edited.json()
        assert body["session_id"].startswith(session + "~") and "Shellfish" in body["reply"]
        assert [r["content"] for r in body["removed"]] == [PEANUTS]
        h.drain()
        assert memories(h) == ["The user is allergic to shellfish."]
        branch = body["session_id"]
        assert c.get(f"/api/sessions/{branch}").json()["transcript"][0]["content"] == (
            "I'm allergic to shellfish"
        )
        gone = c.delete(f"/api/sessions/{branch}/messages/1")
        assert gone.status_code == 200, gone.text
        assert gone.json()["deleted"] == [1, 2]
        assert [r["content"] for r in gone.json()["removed"]] == [
            "The user is allergic to shellfish."
        ]
        assert memories(h) == []
        assert c.delete(f"/api/sessions/{branch}/messages/1").status_code == 404
        assert (
            c.post(f"/api/sessions/{session}/messages/2/edit", json={"content": "x"}).status_code
            == 400
        )


def test_a_stateless_clients_edit_is_a_branch_that_deletes_nothing(h: AppHarness) -> None:
    """Through ``/v1`` the server cannot tell an edit from another branch being explored:
    the parent's memories stay (docs/api.md)."""

    def ask(messages: list[dict[str, str]]) -> str:
        body = {"model": "companion", "messages": messages}
        answer = httpx.post(h.base_url + "/v1/chat/completions", json=body, timeout=10)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["choices"][0]["message"]["content"])

    h.chat.enqueue(Reply(chunks=["Hello! How are you today?"]))
    first = ask([{"role": "user", "content": "hello there"}])
    h.drain()  # its hippocampus run has had its (default) answer
    h.hippocampus.enqueue(Reply(chunks=[hippocampus_reply(content=PEANUTS)]))
    h.chat.enqueue(Reply(chunks=["Noted, no peanuts for you."]))
    history = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": first}]
    ask([*history, {"role": "user", "content": "I'm allergic to peanuts"}])
    h.drain()
    h.hippocampus.enqueue(
        Reply(chunks=[hippocampus_reply(content="The user is allergic to shellfish.")])
    )
    h.chat.enqueue(Reply(chunks=["Shellfish, I will remember."]))
    ask([*history, {"role": "user", "content": "I'm allergic to shellfish"}])
    h.drain()
    assert memories(h) == ["The user is allergic to peanuts.", "The user is allergic to shellfish."]
    assert len(h.services.sessions.list_sessions("local")) == 2  # the parent and its branch


def test_another_users_messages_cannot_be_touched(auth_h: AppHarness) -> None:
    alice = {"Authorization": f"Bearer {API_KEY}"}
    bob = {"Authorization": f"Bearer {OTHER_KEY}"}
    with httpx.Client(base_url=auth_h.base_url, timeout=10) as c:
        created = c.post("/ui/sessions", data={"persona": "companion"}, headers=alice)
        session = created.headers["location"].split("session=")[1]
        auth_h.chat.enqueue(Reply(chunks=["Hello, nice to meet you!"]))
        answer = c.post(
            "/v1/chat/completions",
            json={"model": "companion", "messages": [{"role": "user", "content": "hi"}]},
            headers={**alice, "X-Session-Id": session},
        )
        assert answer.status_code == 200, answer.text
        auth_h.drain()
        said, reply = auth_h.services.sessions.transcript(session)
        base = f"/ui/sessions/{session}/messages"
        for path in (f"{said.id}/delete", f"{reply.id}/regenerate", f"{reply.id}/versions/1"):
            assert c.post(f"{base}/{path}", headers=bob).status_code == 404
        edit = c.post(f"{base}/{said.id}/edit", data={"text": "x"}, headers=bob)
        assert edit.status_code == 404
        assert c.delete(f"/api/sessions/{session}/messages/1", headers=bob).status_code == 404
        assert len(auth_h.services.sessions.transcript(session)) == 2


def test_regenerating_a_failed_reply_keeps_no_empty_version(h: AppHarness) -> None:
    h.chat.enqueue(Reply.error(500, "upstream down"))
    with client(h) as c:
        session = new_session(c)
        _, events = run_turn(c, session, "hello?")
        assert "↻ Regenerate" in dict(events)["final"]  # offered on a failed reply too
        h.drain()
        failed = h.services.sessions.transcript(session)[-1]
        assert (failed.status, failed.content) == ("incomplete", "")
        h.chat.enqueue(Reply(chunks=["Hello! Sorry about that, I am here now."]))
        posted = c.post(f"/ui/sessions/{session}/messages/{failed.id}/regenerate")
        final = read_stream(c, session, posted.text)[-2][1]
        assert "I am here now." in final and "version-count" not in final
        stored = h.services.sessions.transcript(session)
        assert len(stored) == 2 and stored[-1].status == "complete"
        assert h.services.sessions.version_texts(failed.id) == [stored[-1].content]
