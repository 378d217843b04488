"""Open WebUI and SillyTavern, replayed: the requests each client really sends (the
fixtures in tests/web/clients/, each citing the client's source by file and line), against
the app with scripted upstream models. Asserted: what the client would parse, how many
sessions the server keeps, what the chat model was shown, what memory was written.

The fixtures name the model ``limbic``; a real user picks a persona from ``/v1/models``,
so the replay sends the default persona's id instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.llm.scripted_server import Reply
from tests.web.harness import AppHarness

CLIENTS = Path(__file__).parent / "clients"

R1 = (
    "Oh no, not the coffee! Is Mochi at least pretending to be sorry, or is she proudly "
    "supervising the cleanup?"
)
R2 = (
    "A tabby with territorial opinions, a classic. Have you tried giving her her own spot "
    "on the desk, like a folded towel?"
)
FACT = {
    "content": "The user's cat Mochi is a 3 year old tabby",
    "category": "relationship",
    "importance": 0.9,
    "confidence": 0.95,
    "subject": "user",
    "keywords": ["mochi", "tabby"],
}


def test_every_client_fixture_is_replayed() -> None:
    """Each fixture in tests/web/clients is sent to the app by a test here, by its name."""
    source = Path(__file__).read_text(encoding="utf-8")
    missing = [
        f"{path.parent.name}/{path.stem}"
        for path in sorted(CLIENTS.glob("*/*.json"))
        if f'"{path.parent.name}/{path.stem}"' not in source and f'"{path.stem}"' not in source
    ]
    assert missing == []


def hippo(facts: list[dict[str, Any]]) -> Reply:
    body = {"background": "", "short_term": [], "long_term": facts, "user_emotion": None}
    return Reply(chunks=[json.dumps(body)])


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path) as harness:
        # The clients' messages say something: a bare "Hello there!" would be asked again
        # by the reply guard (a bare greeting), and the checks read the first request.
        harness.chat.default = Reply(chunks=["That", " sounds", " like", " a", " lot", "!"])
        yield harness


def fixture(name: str) -> dict[str, Any]:
    data = json.loads((CLIENTS / f"{name}.json").read_text())
    data["body"]["model"] = "companion"
    return data


def send(h: AppHarness, name: str, *, forward_headers: bool = True) -> tuple[httpx.Response, str]:
    """POST a fixture as its client would; the reply text as the client reads it."""
    data = fixture(name)
    headers = {k: v for k, v in data["headers"].items() if not k.startswith("x-openwebui-")}
    if forward_headers and name.startswith("openwebui/"):
        # ENABLE_FORWARD_USER_INFO_HEADERS puts the same chat's headers on every request
        # of it (utils/headers.py:196-199); the fixtures that show them are of one chat.
        forwarded = fixture("openwebui/chat_turn2")["headers"]
        headers |= {k: v for k, v in forwarded.items() if k.startswith("x-openwebui-")}
    body = data["body"]
    url = h.base_url + "/v1/chat/completions"
    if not body.get("stream"):
        r = httpx.post(url, json=body, headers=headers, timeout=30)
        text = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else ""
        return r, text
    parts: list[str] = []
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as r:
        if r.status_code != 200:
            r.read()
            return r, ""
        for line in r.iter_lines():
            if line.startswith("data: {"):
                event = json.loads(line[6:])
                for choice in event.get("choices") or []:
                    parts.append(choice["delta"].get("content") or "")
    return r, "".join(parts)


def sessions(h: AppHarness) -> list[Any]:
    return h.services.sessions.list_sessions("local")


def transcript(h: AppHarness, session_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in h.services.sessions.transcript(session_id)]


def wait_merged(h: AppHarness, session_id: str, reports: int) -> None:
    """Every merge the requests so far started has ended (and a redo's short-term patch):
    the session has exactly ``reports`` turn reports."""
    h.drain()
    assert len(h.services.sessions.turn_reports(session_id)) == reports


def memories(h: AppHarness) -> list[str]:
    r = httpx.get(h.base_url + "/api/personas/companion/memories")
    return [m["content"] for m in r.json()["items"]]


# --- Open WebUI 0.12.4 ----------------------------------------------------------------------


@pytest.mark.parametrize("forward_headers", [False, True])
def test_open_webui_conversation_is_one_session(h: AppHarness, forward_headers: bool) -> None:
    """Turn 1, turn 2 with the whole history, a regeneration, a title, tags and follow-ups
    (the seven-request session of issue 15): one session, each fact written once."""
    h.chat.enqueue(Reply(chunks=[R1]))
    h.hippocampus.enqueue(hippo([]))
    r, text = send(h, "openwebui/chat_turn1", forward_headers=forward_headers)
    assert r.status_code == 200 and text == R1
    first = r.headers["x-session-id"]
    wait_merged(h, first, 1)

    h.chat.enqueue(Reply(chunks=[R2]))
    h.hippocampus.enqueue(hippo([FACT]))
    r, text = send(h, "openwebui/chat_turn2", forward_headers=forward_headers)
    assert r.status_code == 200 and text == R2
    session = r.headers["x-session-id"]
    if not forward_headers:
        assert session == first  # found from the resent history
    wait_merged(h, session, 2)
    assert memories(h) == [FACT["content"]]
    runs = len(h.hippocampus.chat_requests)

    # Regenerate: the same history again. The reply is replaced; nothing is merged twice.
    h.chat.enqueue(Reply(chunks=["A tabby who owns the desk. Classic."]))
    r, text = send(h, "openwebui/regenerate", forward_headers=forward_headers)
    assert r.status_code == 200 and r.headers["x-session-id"] == session
    assert text == "A tabby who owns the desk. Classic."
    h.drain()  # whatever the regeneration started has ended: no merge among it (below)
    assert len(h.hippocampus.chat_requests) == runs
    assert transcript(h, session)[-2:] == [
        ("user", "Supervising, obviously. She's a 3 year old tabby and thinks the desk is hers."),
        ("assistant", "A tabby who owns the desk. Classic."),
    ]
    # The title, tags and follow-ups tasks: plain completions on the background model.
    for task, answer in (
        ("task_title", '{ "title": "Mochi the Desk Cat" }'),
        ("task_tags", '{ "tags": ["Pets"] }'),
        ("task_follow_ups", '{ "follow_ups": ["How old is Mochi?"] }'),
    ):
        h.hippocampus.enqueue(Reply(chunks=[answer]))
        r, text = send(h, f"openwebui/{task}", forward_headers=forward_headers)
        assert r.status_code == 200 and text == answer  # what Open WebUI parses
        assert "x-session-id" not in r.headers
        sent = h.hippocampus.chat_requests[-1].body["messages"]
        assert sent[-1]["content"].startswith("### Task:")  # as sent: no persona, no notes
        assert not any("recalled_notes" in str(m.get("content")) for m in sent)
    assert len(h.hippocampus.chat_requests) == runs + 3  # the tasks only: no merge ran
    assert len(sessions(h)) == 1
    assert memories(h) == [FACT["content"]]
    assert not any("### Task" in m for m in memories(h))
    texts = [text for _, text in transcript(h, session)]
    assert not any("### Task" in t for t in texts)


def test_open_webui_continue_extends_the_stored_reply(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=[R1]))
    session = send(h, "openwebui/chat_turn1")[0].headers["x-session-id"]
    wait_merged(h, session, 1)
    h.chat.enqueue(Reply(chunks=["A tabby with territorial opinions, a classic. Have you tried"]))
    send(h, "openwebui/chat_turn2", forward_headers=False)
    wait_merged(h, session, 2)

    h.chat.enqueue(Reply(chunks=[" a folded towel?"]))
    r, text = send(h, "openwebui/continue")
    assert r.status_code == 200 and r.headers["x-session-id"] == session
    assert text == " a folded towel?"  # Open WebUI appends what it receives
    assert transcript(h, session)[-1] == (
        "assistant",
        "A tabby with territorial opinions, a classic. Have you tried a folded towel?",
    )
    shown = h.chat.chat_requests[-1].body["messages"]
    assert shown[-2] == {
        "role": "assistant",
        "content": "A tabby with territorial opinions, a classic. Have you tried",
    }
    assert shown[-1]["role"] == "system" and "Continue your last message" in shown[-1]["content"]
    assert len(sessions(h)) == 1


def test_open_webui_edit_starts_a_branch_that_shares_memory(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=[R1]))
    h.hippocampus.enqueue(hippo([]))
    session = send(h, "openwebui/chat_turn1")[0].headers["x-session-id"]
    wait_merged(h, session, 1)
    h.chat.enqueue(Reply(chunks=[R2]))
    h.hippocampus.enqueue(hippo([FACT]))
    send(h, "openwebui/chat_turn2")
    wait_merged(h, session, 2)

    # The first message edited ("tea" for "coffee"): a one-message history that matches
    # no transcript, so a session of its own; the parent is left as it was.
    r, _ = send(h, "openwebui/edit_earlier")
    branch = r.headers["x-session-id"]
    assert r.status_code == 200 and branch != session
    assert len(transcript(h, session)) == 4
    assert transcript(h, branch)[0] == (
        "user",
        "Hi Juniper! Mochi knocked my tea off the desk again this morning.",
    )
    # Long-term memory is per user and persona: the branch recalls the parent's facts.
    assert memories(h) == [FACT["content"]]
    shown = json.dumps(h.chat.chat_requests[-1].body["messages"])
    assert "Mochi is a 3 year old tabby" in shown


def test_open_webui_edit_with_its_chat_id_is_a_named_branch(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=[R1]))
    chat = {"x-openwebui-chat-id": "owui-chat-1"}
    body = fixture("openwebui/chat_turn1")["body"]
    r = httpx.post(h.base_url + "/v1/chat/completions", json=body | {"stream": False}, headers=chat)
    assert r.headers["x-session-id"] == "owui-chat-1"
    wait_merged(h, "owui-chat-1", 1)
    edited = fixture("openwebui/edit_earlier")["body"] | {"stream": False}
    r = httpx.post(h.base_url + "/v1/chat/completions", json=edited, headers=chat)
    branch = r.headers["x-session-id"]
    assert branch.startswith("owui-chat-1~")
    # The next turn on the edited branch lands in the branch, not in the original.
    wait_merged(h, branch, 1)
    follow = edited["messages"] + [
        {"role": "assistant", "content": "That sounds like a lot!"},
        {"role": "user", "content": "And then she napped."},
    ]
    r = httpx.post(
        h.base_url + "/v1/chat/completions", json=edited | {"messages": follow}, headers=chat
    )
    assert r.headers["x-session-id"] == branch
    assert len(transcript(h, "owui-chat-1")) == 2


def test_open_webui_image_parts_are_a_clear_400(h: AppHarness) -> None:
    r, _ = send(h, "openwebui/image_part")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "images_not_supported"
    assert sessions(h) == []


def test_open_webui_sampling_parameters_reach_the_model(h: AppHarness) -> None:
    r, _ = send(h, "openwebui/sampling_params")
    assert r.status_code == 200
    sent = h.chat.chat_requests[-1].body
    body = fixture("openwebui/sampling_params")["body"]
    for key in ("stop", "seed", "top_p", "top_k", "min_p", "frequency_penalty",
                "presence_penalty", "logit_bias", "temperature", "max_tokens"):  # fmt: skip
        if key in body:
            assert sent[key] == body[key], key


def owui_turns(h: AppHarness) -> str:
    """Turns 1 and 2 of the Open WebUI chat, merged (the fact written once); the session."""
    h.chat.enqueue(Reply(chunks=[R1]))
    h.hippocampus.enqueue(hippo([]))
    session = send(h, "openwebui/chat_turn1")[0].headers["x-session-id"]
    wait_merged(h, session, 1)
    h.chat.enqueue(Reply(chunks=[R2]))
    h.hippocampus.enqueue(hippo([FACT]))
    assert send(h, "openwebui/chat_turn2")[0].headers["x-session-id"] == session
    wait_merged(h, session, 2)
    return session


def test_open_webui_guided_regeneration_is_a_turn_after_the_old_reply(h: AppHarness) -> None:
    """Guided regeneration ("regenerate with instructions"): the old reply stays in the
    history and the guidance comes as a new user message, so it is the session's next
    turn, merged once."""
    session = owui_turns(h)
    shorter = "Ha, fair. Give her a towel."
    h.chat.enqueue(Reply(chunks=["Ha, fair.", " Give her a towel."]))
    h.hippocampus.enqueue(hippo([]))
    r, text = send(h, "openwebui/regenerate_guided")
    assert r.status_code == 200 and text == shorter  # what Open WebUI shows
    assert r.headers["x-session-id"] == session and len(sessions(h)) == 1
    wait_merged(h, session, 3)
    assert transcript(h, session)[-3:] == [
        ("assistant", R2),  # the reply it was asked to redo is kept, as the client sent it
        ("user", "Shorter please, and less advice-y."),
        ("assistant", shorter),
    ]
    shown = h.chat.chat_requests[-1].body["messages"]
    assert shown[-2:] == [
        {"role": "assistant", "content": R2},
        {"role": "user", "content": "Shorter please, and less advice-y."},
    ]
    assert memories(h) == [FACT["content"]]


def test_open_webui_chat_turn_with_an_empty_task_header_is_a_turn(h: AppHarness) -> None:
    """The connection header ``X-Limbic-Stateless: {{TASK}}`` expands to nothing on a chat
    turn: an explicit "not stateless", so turn 2 goes on turn 1's session."""
    h.chat.enqueue(Reply(chunks=[R1]))
    h.hippocampus.enqueue(hippo([]))
    session = send(h, "openwebui/chat_turn1", forward_headers=False)[0].headers["x-session-id"]
    wait_merged(h, session, 1)
    h.chat.enqueue(Reply(chunks=[R2]))
    h.hippocampus.enqueue(hippo([FACT]))
    r, text = send(h, "openwebui/chat_turn_task_header_empty", forward_headers=False)
    assert r.status_code == 200 and text == R2
    assert "x-limbic-stateless" not in r.headers
    assert r.headers["x-session-id"] == session and len(sessions(h)) == 1
    wait_merged(h, session, 2)
    assert [role for role, _ in transcript(h, session)] == ["user", "assistant"] * 2
    assert memories(h) == [FACT["content"]]


def test_open_webui_rag_template_before_the_question_is_a_chat_turn(h: AppHarness) -> None:
    """A file attached: the RAG template ("### Task:" ... <context>) precedes the user's
    question in their message. A chat turn of the session, not a task."""
    h.chat.enqueue(Reply(chunks=[R1]))
    h.hippocampus.enqueue(hippo([]))
    session = send(h, "openwebui/chat_turn1", forward_headers=False)[0].headers["x-session-id"]
    wait_merged(h, session, 1)
    h.chat.enqueue(Reply(chunks=["Born in March 2022,", " so she is a young tabby."]))
    r, text = send(h, "openwebui/rag_chat_turn", forward_headers=False)
    assert r.status_code == 200 and text == "Born in March 2022, so she is a young tabby."
    assert "x-limbic-stateless" not in r.headers and r.headers["x-session-id"] == session
    shown = h.chat.chat_requests[-1].body["messages"][-1]
    assert shown["role"] == "user" and "mochi_vet_card.txt" in shown["content"]
    assert shown["content"].endswith("What does Mochi's vet card say about her age?")
    wait_merged(h, session, 2)


def test_open_webui_search_queries_before_the_reply_are_stateless(h: AppHarness) -> None:
    h.hippocampus.enqueue(Reply(chunks=['{ "queries": ["tabby cat desk"] }']))
    r, text = send(h, "openwebui/task_queries_web_search")
    assert r.status_code == 200 and json.loads(text) == {"queries": ["tabby cat desk"]}
    assert sessions(h) == [] and h.chat.chat_requests == []


# Open WebUI 0.12.4's other tasks, each with what Open WebUI reads of the answer: a JSON
# field (the text between the first "{" and the last "}"), or the emoji as it is.
TASKS = [
    ("task_title_header", "openwebui:title", '{ "title": "Mochi the Desk Cat" }',
     ("title", "Mochi the Desk Cat")),
    ("task_autocomplete", "openwebui:autocomplete", '{ "text": "keyboard again." }',
     ("text", "keyboard again.")),
    ("task_emoji", "openwebui:emoji", "\U0001f63c", None),
    ("task_image_prompt", "openwebui:image_prompt",
     '{ "prompt": "A tabby cat asleep on a desk beside a spilled coffee mug." }',
     ("prompt", "A tabby cat asleep on a desk beside a spilled coffee mug.")),
    ("task_queries_retrieval", "openwebui:queries", '{ "queries": ["tabby cat desk"] }',
     ("queries", ["tabby cat desk"])),
]  # fmt: skip


@pytest.mark.parametrize(("task", "kind", "answer", "field"), TASKS)
def test_open_webui_tasks_are_answered_statelessly(
    h: AppHarness, task: str, kind: str, answer: str, field: tuple[str, Any] | None
) -> None:
    session = owui_turns(h)
    before = transcript(h, session)
    runs, replies = len(h.hippocampus.chat_requests), len(h.chat.chat_requests)
    h.hippocampus.enqueue(Reply(chunks=[answer]))
    h.hippocampus.default = hippo([FACT | {"content": "Mochi is a tabby"}])  # were it merged
    r, text = send(h, f"openwebui/{task}")
    assert r.status_code == 200 and r.headers["x-limbic-stateless"] == kind
    assert "x-session-id" not in r.headers
    if field is None:
        assert text == answer
    else:
        key, value = field
        assert json.loads(text[text.index("{") : text.rindex("}") + 1])[key] == value
    h.drain()  # a merge the task had started would have run by now
    assert len(h.chat.chat_requests) == replies  # not shown to the persona
    assert len(h.hippocampus.chat_requests) == runs + 1  # the task; no merge
    sent = h.hippocampus.chat_requests[-1].body
    client = fixture(f"openwebui/{task}")["body"]
    assert sent["messages"] == client["messages"]  # as the client sent it
    if "max_tokens" in client:  # the emoji's 4 tokens
        assert sent["max_tokens"] == client["max_tokens"]
    assert len(sessions(h)) == 1 and transcript(h, session) == before
    assert memories(h) == [FACT["content"]]


# --- Open WebUI's task prompts from earlier releases -----------------------------------------

# Each cites its release, file and lines (tests/web/clients/README.md); the same frame, other
# sentences. Issue 28: 0.5's title prompt was answered as a chat turn, opened a session and
# stored the chat's facts a second time.
OLDER_TASKS = [
    ("task_title_v0_4_8", "Mochi the Desk Cat"),
    ("task_tags_v0_4_8", '{ "tags": ["Pets"] }'),
    ("task_emoji_v0_4_8", "\U0001f63c"),
    ("task_title_v0_5_20", '{ "title": "\U0001f431 Mochi the Desk Cat" }'),
    ("task_follow_ups_v0_6_43", '{ "follow_ups": ["How old is Mochi?"] }'),
    ("task_title_v0_9_6", '{ "title": "\U0001f431 Mochi the Desk Cat" }'),
]


@pytest.mark.parametrize(("task", "answer"), OLDER_TASKS)
def test_open_webui_older_task_prompts_are_stateless(h: AppHarness, task: str, answer: str) -> None:
    session = owui_turns(h)
    before = transcript(h, session)
    runs, replies = len(h.hippocampus.chat_requests), len(h.chat.chat_requests)

    # A merge, were one to run, would store the fact again.
    h.hippocampus.enqueue(Reply(chunks=[answer]))
    h.hippocampus.default = hippo([FACT | {"content": "Mochi is a tabby"}])
    r, text = send(h, f"openwebui/{task}")
    assert r.status_code == 200 and text == answer  # what Open WebUI parses
    assert "x-session-id" not in r.headers
    assert r.headers["x-limbic-stateless"].startswith("openwebui:")
    h.drain()  # a merge the task had started would have run by now
    assert len(h.chat.chat_requests) == replies  # not shown to the persona
    assert len(h.hippocampus.chat_requests) == runs + 1  # the task; no merge
    sent = h.hippocampus.chat_requests[-1].body["messages"]
    assert sent == fixture(f"openwebui/{task}")["body"]["messages"]  # as the client sent it
    assert len(sessions(h)) == 1 and transcript(h, session) == before
    assert memories(h) == [FACT["content"]]


def test_open_webui_older_task_before_any_turn_opens_no_session(h: AppHarness) -> None:
    h.hippocampus.enqueue(Reply(chunks=['{ "title": "Mochi" }']))
    r, _ = send(h, "openwebui/task_title_v0_5_20", forward_headers=False)
    assert r.status_code == 200 and "x-session-id" not in r.headers
    assert sessions(h) == [] and h.chat.chat_requests == []
    assert memories(h) == []


# --- SillyTavern 1.12.6 ---------------------------------------------------------------------


def st_turns(h: AppHarness) -> str:
    """Turns 1 and 2 of the SillyTavern chat; the session id."""
    h.chat.enqueue(Reply(chunks=[R1]))
    h.hippocampus.enqueue(hippo([]))
    r, _ = send(h, "sillytavern/chat_turn1")
    session = r.headers["x-session-id"]
    wait_merged(h, session, 1)
    h.chat.enqueue(Reply(chunks=[R2]))
    h.hippocampus.enqueue(hippo([FACT]))
    r, _ = send(h, "sillytavern/chat_turn2")
    assert r.headers["x-session-id"] == session
    wait_merged(h, session, 2)
    return session


def test_sillytavern_chat_is_one_session_and_the_greeting_is_kept(h: AppHarness) -> None:
    session = st_turns(h)
    assert transcript(h, session)[0] == (
        "assistant",
        "*Juniper looks up from her book.* Evening, Alex. How was the day?",
    )
    assert len(sessions(h)) == 1
    # The card's system messages reach the model, after the persona's own prompt.
    system = h.chat.chat_requests[-1].body["messages"][0]
    assert system["role"] == "system" and "[Start a new Chat]" in system["content"]


def test_sillytavern_swipe_replaces_the_reply_without_a_second_merge(h: AppHarness) -> None:
    session = st_turns(h)
    runs = len(h.hippocampus.chat_requests)
    h.chat.enqueue(Reply(chunks=["Desk cats never apologise."]))
    r, text = send(h, "sillytavern/swipe")
    assert r.headers["x-session-id"] == session and text == "Desk cats never apologise."
    h.drain()  # the short-term patch of the swipe has run
    assert transcript(h, session)[-1] == ("assistant", "Desk cats never apologise.")
    assert len(transcript(h, session)) == 5
    assert len(h.hippocampus.chat_requests) == runs
    assert memories(h) == [FACT["content"]]
    # The swipe was prompted as the turn first was: the old reply is not in it.
    assert R2 not in json.dumps(h.chat.chat_requests[-1].body["messages"])
    # Short-term memory holds the new reply, not the old one.
    state = h.services.sessions.load_state(session)
    texts = [item["text"] for item in state.short_term]
    assert "Desk cats never apologise." in texts and R2 not in texts


def test_sillytavern_continue_with_its_nudge(h: AppHarness) -> None:
    session = st_turns(h)
    h.chat.enqueue(Reply(chunks=[" Have you tried a box?"]))
    r, text = send(h, "sillytavern/continue")
    assert r.status_code == 200 and r.headers["x-session-id"] == session
    assert text == " Have you tried a box?"
    assert transcript(h, session)[-1] == (
        "assistant",
        "A tabby with territorial opinions, a classic. Have you tried a box?",
    )
    shown = h.chat.chat_requests[-1].body["messages"]
    assert "[Continue the following message" in shown[-1]["content"]


def test_sillytavern_continue_prefill_ends_with_the_assistant_message(h: AppHarness) -> None:
    session = st_turns(h)
    h.chat.enqueue(Reply(chunks=[" Try a box."]))
    r, _ = send(h, "sillytavern/continue_prefill")
    assert r.status_code == 200 and r.headers["x-session-id"] == session
    assert transcript(h, session)[-1][1].endswith("a classic. Try a box.")


def test_sillytavern_group_nudge_asks_for_the_next_speaker(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["Juniper: Then let her sleep."]))
    r, text = send(h, "sillytavern/group_nudge")
    assert r.status_code == 200 and text == "Juniper: Then let her sleep."
    shown = h.chat.chat_requests[-1].body["messages"]
    assert shown[-1] == {"role": "system", "content": "[Write the next reply only as Juniper.]"}
    session = r.headers["x-session-id"]
    assert transcript(h, session)[-2:] == [
        ("user", "There is! She is asleep on my keyboard right now."),
        ("assistant", "Juniper: Then let her sleep."),
    ]


def test_sillytavern_names_in_content_are_kept_as_sent(h: AppHarness) -> None:
    """names_behavior "Message content": every message starts with its speaker's name. The
    names stay in the transcript and the prompt as sent, and memory still forms."""
    said = "Alex: Hi Juniper! Mochi knocked my coffee off the desk again this morning."
    h.chat.enqueue(Reply(chunks=["Juniper: Oh no,", " not again!"]))
    coffee = FACT | {"content": "Mochi knocked the user's coffee off the desk again",
                     "keywords": ["mochi", "coffee"]}  # fmt: skip
    h.hippocampus.enqueue(hippo([coffee]))
    r, text = send(h, "sillytavern/names_in_content")
    assert r.status_code == 200 and text == "Juniper: Oh no, not again!"
    session = r.headers["x-session-id"]
    wait_merged(h, session, 1)
    assert transcript(h, session) == [
        ("assistant", "Juniper: *Juniper looks up from her book.* Evening, Alex. How was the day?"),
        ("user", said),
        ("assistant", "Juniper: Oh no, not again!"),
    ]
    shown = h.chat.chat_requests[-1].body["messages"]
    assert shown[-1] == {"role": "user", "content": said}
    assert "[Start a new Chat]" in shown[0]["content"]  # the card, after the persona's prompt
    assert memories(h) == [coffee["content"]] and len(sessions(h)) == 1


def test_sillytavern_post_history_instruction_comes_last(h: AppHarness) -> None:
    r, _ = send(h, "sillytavern/post_history")
    assert r.status_code == 200
    shown = h.chat.chat_requests[-1].body["messages"]
    assert shown[-2]["role"] == "user" and shown[-2]["content"].startswith("Supervising")
    assert shown[-1]["role"] == "system" and shown[-1]["content"].startswith("[Stay in character")


def test_sillytavern_example_dialogue_keeps_its_names(h: AppHarness) -> None:
    r, _ = send(h, "sillytavern/example_dialogues")
    assert r.status_code == 200
    shown = h.chat.chat_requests[-1].body["messages"]
    named = [m for m in shown if m.get("name", "").startswith("example_")]
    assert [m["name"] for m in named] == ["example_user", "example_assistant"]
    assert named[0]["content"] == "I had a rough day."
    # History names are kept as the speaker's prefix.
    assert shown[-1]["content"].startswith("Alex: Supervising")


@pytest.mark.parametrize(
    "name",
    [
        "sillytavern/quiet_prompt",
        "sillytavern/summarize",
        "sillytavern/summarize_raw",
        "sillytavern/impersonate",
    ],
)
def test_sillytavern_quiet_prompts_are_stateless(h: AppHarness, name: str) -> None:
    session = st_turns(h)
    before = transcript(h, session)
    runs = len(h.hippocampus.chat_requests)
    h.hippocampus.enqueue(Reply(chunks=["Alex and Juniper talk about Mochi."]))
    r, text = send(h, name)
    assert r.status_code == 200 and text == "Alex and Juniper talk about Mochi."
    assert "x-session-id" not in r.headers
    assert transcript(h, session) == before and len(sessions(h)) == 1
    assert len(h.hippocampus.chat_requests) == runs + 1  # the completion; no merge
    assert memories(h) == [FACT["content"]]


def test_sillytavern_sampling_parameters(h: AppHarness) -> None:
    data = fixture("sillytavern/sampling_params")
    r = httpx.post(h.base_url + "/v1/chat/completions", json=data["body"], headers=data["headers"])
    # n: 2 is refused with a reason rather than answered with one choice.
    assert r.status_code == 400 and r.json()["error"]["code"] == "unsupported_n"
    body = data["body"] | {"n": 1}
    with httpx.stream("POST", h.base_url + "/v1/chat/completions", json=body) as r:
        r.read()
    assert r.status_code == 200
    sent = h.chat.chat_requests[-1].body
    assert sent["stop"] == [","]
    for key in ("seed", "frequency_penalty", "presence_penalty", "top_k"):
        if key in body:
            assert sent[key] == body[key], key


def test_sillytavern_image_parts_are_a_clear_400(h: AppHarness) -> None:
    r, _ = send(h, "sillytavern/image_part")
    assert r.status_code == 400 and r.json()["error"]["code"] == "images_not_supported"


def test_images_reach_a_chat_model_that_takes_them(h: AppHarness) -> None:
    h.services.engine.chat._supports_images = True  # type: ignore[attr-defined]  # chat.vision
    r, _ = send(h, "openwebui/image_part")
    assert r.status_code == 200
    last = h.chat.chat_requests[-1].body["messages"][-1]
    assert last["role"] == "user" and isinstance(last["content"], list)
    assert last["content"][0] == {"type": "text", "text": "Look at Mochi in the laundry basket!"}
    assert last["content"][1]["type"] == "image_url"
    assert last["content"][1]["image_url"]["url"].startswith("data:image/")
    # The transcript keeps the text.
    session = r.headers["x-session-id"]
    assert transcript(h, session)[0] == ("user", "Look at Mochi in the laundry basket!")


def test_a_slow_task_never_holds_up_the_chat(h: AppHarness) -> None:
    """A client's task runs on the background model, outside the session's turn order: a
    chat turn sent while a title is still being generated is answered first."""
    # The title's answer is held until the chat turn is answered: no delay to outlast.
    arrived, hold, done = threading.Event(), threading.Event(), threading.Event()
    h.hippocampus.enqueue(Reply(chunks=['{ "title": "Mochi" }'], arrived=arrived, hold=hold))
    titles: list[str] = []

    def title() -> None:
        titles.append(send(h, "openwebui/task_title")[1])
        done.set()

    worker = threading.Thread(target=title)
    worker.start()
    try:
        assert arrived.wait(timeout=30)  # the task has reached the background model
        h.chat.enqueue(Reply(chunks=[R1]))
        r, text = send(h, "openwebui/chat_turn1")
        assert r.status_code == 200 and text == R1
        assert not done.is_set()  # answered while the title is still being written
    finally:
        hold.set()
        worker.join(timeout=30)
    assert titles == ['{ "title": "Mochi" }']
