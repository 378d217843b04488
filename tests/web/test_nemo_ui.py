"""The NVIDIA NeMo Agent Toolkit UI over HTTP: its request shapes, replayed as its source builds
them, and what its proxy and page make of our answers.

Source: NVIDIA/NeMo-Agent-Toolkit-UI at HEAD 360f602 (file:line in the comments). The
browser posts to the UI's own proxy (``proxy/server.js``), which forwards to our route with
the browser's headers (server.js:226-238) and rewrites the answer with the route's
processor (``proxy/response-processors.js``); the functions ``proxy_*`` below port those
processors, ``page_*`` the page's reading of the proxy's output (components/Chat/Chat.tsx).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from uvicorn.logging import AccessFormatter

from backend.personas import PLACEHOLDER_MODELS
from backend.web.log_masking import MaskSecrets
from tests.llm.scripted_server import Reply
from tests.web.harness import AppHarness

# --- the UI's requests ---------------------------------------------------------------------


def ui_headers(conversation_id: str) -> dict[str, str]:
    """components/Chat/Chat.tsx:1063-1069 (the proxy forwards them: proxy/server.js:236)."""
    return {
        "Content-Type": "application/json",
        "Conversation-Id": conversation_id,
        "User-Message-ID": "b3c1f7e0-0000-4000-8000-000000000001",
    }


def build_chat_payload(
    messages: list[dict[str, str]], *, stream: bool, model: str = "placeholder", **optional: Any
) -> dict[str, Any]:
    """proxy/request-transformers.js:75-103 (/chat) and :114-142 (/chat/stream): ``model`` is
    "placeholder" since dd0766a (2026-04-01), "nvidia/nemotron" from 8b91a7e (2025-10-22)
    until then; optional generation parameters are merged in, except messages and stream."""
    payload: dict[str, Any] = {
        "messages": messages,
        "model": model,
        "stream": stream,
        "temperature": 0.7,
    }
    payload.update({k: v for k, v in optional.items() if k not in ("messages", "stream")})
    return payload


def build_generate_payload(message: str) -> dict[str, Any]:
    """proxy/request-transformers.js:47-51 (/generate/stream) and :60-64 (/generate)."""
    return {"input_message": message or ""}


# --- the UI's proxy ------------------------------------------------------------------------


def proxy_intermediate_data(line: str) -> str | None:
    """response-processors.js:21-46 (processIntermediateData)."""
    try:
        payload = json.loads(line.split("intermediate_data: ", 1)[1])
    except ValueError:
        return None
    message = {
        "id": payload.get("id") or "",
        "status": payload.get("status") or "in_progress",
        "error": payload.get("error") or "",
        "type": "system_intermediate",
        "parent_id": payload.get("parent_id") or "default",
        "intermediate_parent_id": payload.get("intermediate_parent_id") or "default",
        "content": {
            "name": payload.get("name") or "Step",
            "payload": payload.get("payload") or "No details",
        },
        "time_stamp": payload.get("time_stamp") or "default",
    }
    return f"<intermediatestep>{json.dumps(message)}</intermediatestep>"


def proxy_common_line(line: str) -> str | None:
    """response-processors.js:68-82 (processCommonLineTypes)."""
    if line.startswith("intermediate_data: "):
        return proxy_intermediate_data(line)
    if line.startswith("observability_trace: "):
        return None  # we send none
    if line.strip().startswith("{"):
        return line.strip()
    return None


def proxy_generate_stream(body: str) -> list[str]:
    """response-processors.js:207-265 (processGenerateStream): the proxy's writes."""
    writes: list[str] = []
    *lines, rest = body.split("\n")
    for line in lines:
        if line.startswith("data: "):
            data = line[6:].strip()
            if data in ("[DONE]", "DONE"):
                return writes  # res.end(): nothing after [DONE] reaches the page
            try:
                parsed = json.loads(data)
            except ValueError:
                continue
            if (
                isinstance(parsed, dict)
                and isinstance(parsed.get("value"), str)
                and parsed["value"]
            ):
                writes.append(data)
        elif (written := proxy_common_line(line)) is not None:
            writes.append(written)
    if rest.strip().startswith("{"):  # processRemainingBuffer, :90-95
        writes.append(rest.strip())
    return writes


def proxy_chat(response: httpx.Response) -> str:
    """response-processors.js:168-202 (processChat): the text the page gets."""
    data = response.text
    try:
        parsed = json.loads(data)
    except ValueError:
        return data
    content = (
        ((parsed.get("choices") or [{}])[0].get("message") or {}).get("content")
        or parsed.get("message")
        or parsed.get("answer")
        or parsed.get("value")
    )
    return content if isinstance(content, str) else json.dumps(content)


# --- the UI's page -------------------------------------------------------------------------

STEP = re.compile(r"<intermediatestep>([\s\S]*?)</intermediatestep>")


def is_workflow_error(value: Any) -> bool:
    """Chat.tsx:130-141."""
    return isinstance(value, dict) and all(
        isinstance(value.get(k), str) for k in ("code", "message", "details")
    )


def page_read(writes: list[str], *, generate_stream: bool) -> tuple[str, list[dict[str, Any]]]:
    """Chat.tsx:1173-1315, each proxy write read as its own chunk (the best case): the text
    shown and the intermediate steps kept."""
    text, steps = "", []
    for chunk in writes:
        if generate_stream:
            # :1181-1219: SSE frames need "data:" lines and a blank line, NDJSON a newline;
            # the proxy writes neither, so the chunk is taken as plain text.
            frames = [f for f in chunk.replace("\r", "\n").split("\n\n")[:-1] if "data:" in f]
            lines = [ln for ln in chunk.split("\n")[:-1] if ln.strip()]
            assert not frames and not lines
        for match in STEP.findall(chunk):  # :1278-1298
            step = json.loads(match)
            if step.get("type") == "system_intermediate" and step.get("id"):  # helper.ts:153
                steps.append(step)
        chunk = STEP.sub("", chunk)
        try:
            parsed = json.loads(chunk.strip())
        except ValueError:
            parsed = None
        if is_workflow_error(parsed):  # :1308-1314
            text += f"\n\n**Error ({parsed['code']}):** {parsed['message']} — {parsed['details']}"
        else:
            text += chunk
    return text, steps


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path, config={"server": {"max_message_chars": 200}}) as harness:
        yield harness


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[AppHarness]:
    config = {"server": {"api_keys": {"alice-key": "alice", "bob-key": "bob"}}}
    with AppHarness(tmp_path, config=config) as harness:
        yield harness


def post(h: AppHarness, path: str, body: Any, conversation: str, **kw: Any) -> httpx.Response:
    return httpx.post(
        h.base_url + path, json=body, headers=ui_headers(conversation), timeout=30, **kw
    )


# --- placeholders --------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["placeholder", "nvidia/nemotron"])
@pytest.mark.parametrize("path", ["/chat", "/chat/stream", "/v1/chat/completions"])
def test_the_ui_placeholder_models_select_the_default_persona(
    h: AppHarness, model: str, path: str
) -> None:
    assert model in PLACEHOLDER_MODELS
    conversation = f"c-{path.strip('/').replace('/', '-')}-{model.replace('/', '-')}"
    body = build_chat_payload(
        [{"role": "user", "content": "hi"}], stream=path == "/chat/stream", model=model
    )
    response = post(h, path, body, conversation)
    assert response.status_code == 200, response.text
    session = h.services.sessions.get_session(conversation, "local")
    assert session is not None and session.persona_id == h.services.personas.default.id


# --- /chat ---------------------------------------------------------------------------------


def test_chat_as_the_ui_sends_it_shows_the_reply(h: AppHarness) -> None:
    # "Chat Completions — Non-Streaming" with chat history on (Chat.tsx:1032-1039) and
    # optional generation parameters typed in the settings (request-transformers.js:87-100).
    messages = [
        {"role": "user", "content": "Hi, I am Mei."},
        {"role": "assistant", "content": "Hello Mei!"},
        {"role": "user", "content": "What is my name?"},
    ]
    body = build_chat_payload(messages, stream=False, max_tokens=500, top_p=0.9)
    h.chat.enqueue(Reply(chunks=["You are ", "Mei."]))
    response = post(h, "/chat", body, "conv-chat")
    assert response.status_code == 200
    assert proxy_chat(response) == "You are Mei."
    assert response.headers["x-session-id"] == "conv-chat"
    contents = [m.content for m in h.services.sessions.transcript("conv-chat")]
    assert contents == ["Hi, I am Mei.", "Hello Mei!", "What is my name?", "You are Mei."]
    assert h.chat.chat_requests[-1].body["max_tokens"] == 500


def test_chat_never_streams(h: AppHarness) -> None:
    body = build_chat_payload([{"role": "user", "content": "hi"}], stream=True)
    response = post(h, "/chat", body, "conv-nostream")
    assert response.headers["content-type"].startswith("application/json")
    assert proxy_chat(response) == "Hello there!"


# --- /generate -----------------------------------------------------------------------------


def test_generate_answers_value(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["Hel", "lo!"]))
    response = post(h, "/generate", build_generate_payload("hi"), "conv-gen")
    assert response.status_code == 200
    # The proxy passes the body through (response-processors.js:270-292); the UI's own
    # test of it expects exactly this shape (__tests__/api/routes.test.ts:537-560).
    assert response.json() == {"value": "Hello!"}
    assert response.headers["x-session-id"] == "conv-gen"
    # The page reads a /generate body as text (Chat.tsx:1220-1223: only /generate/stream
    # is parsed), so the UI shows the JSON object itself — with the NeMo Agent Toolkit too.
    writes = [response.text]
    assert page_read(writes, generate_stream=False)[0] == response.text
    contents = [m.content for m in h.services.sessions.transcript("conv-gen")]
    assert contents == ["hi", "Hello!"]


def test_generate_stream_values_and_steps_through_the_proxy(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["Hel", "lo", " there"]))
    response = post(h, "/generate/stream", build_generate_payload("hi"), "conv-gs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-session-id"] == "conv-gs"
    writes = proxy_generate_stream(response.text)
    values = [json.loads(w)["value"] for w in writes if w.startswith("{")]
    assert "".join(values) == "Hello there"
    text, steps = page_read(writes, generate_stream=True)
    assert [s["content"]["name"] for s in steps] == ["Memory activation", "Memory report"]
    assert writes[0].startswith("<intermediatestep>") and writes[-1].startswith("<intermediate")
    assert json.loads(steps[0]["content"]["payload"]) == {"activated": []}
    assert json.loads(steps[1]["content"]["payload"])["reply"]["status"] == "complete"
    # What the page then shows: the proxy writes each value's JSON without a delimiter, so
    # Chat.tsx:1181-1219 finds neither SSE nor NDJSON and shows the JSON as text.
    assert text == "".join(w for w in writes if w.startswith("{"))


def test_generate_stream_mid_reply_failure_reaches_the_page(h: AppHarness) -> None:
    h.chat.enqueue(Reply(chunks=["Hel", "lo"], error_event_after=2, error_message="overloaded"))
    response = post(h, "/generate/stream", build_generate_payload("hi"), "conv-gsf")
    assert response.status_code == 200
    writes = proxy_generate_stream(response.text)
    objects = [json.loads(w) for w in writes if w.startswith("{")]
    values = "".join(o["value"] for o in objects if "value" in o)
    assert values.startswith("Hello\n\n[the chat model failed: ") and "overloaded" in values
    (error,) = [o for o in objects if is_workflow_error(o)]
    assert error["code"] == "upstream_error" and "overloaded" in error["details"]
    text, steps = page_read(writes, generate_stream=True)
    assert "**Error (upstream_error):** the chat model failed — " in text
    assert [s["content"]["name"] for s in steps] == ["Memory activation", "Memory report"]
    assert h.services.sessions.transcript("conv-gsf")[-1].status == "incomplete"


@pytest.mark.parametrize("path", ["/generate", "/generate/stream"])
def test_generate_model_down_before_the_reply_is_a_502(h: AppHarness, path: str) -> None:
    h.chat.enqueue(Reply.error(500))
    response = post(h, path, build_generate_payload("hi"), f"conv-502-{path[1:4]}")
    # The proxy passes a non-ok status and body on (response-processors.js:270-275); the
    # page shows a toast with the status text (Chat.tsx:1120-1127).
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_error"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"input_message": "   "}, 400, "invalid_messages"),
        ({"input_message": "x" * 201}, 413, "message_too_large"),
        ({"input_message": "nul \x00"}, 400, "invalid_request"),
        ({}, 400, "invalid_request"),
        ({"input_message": "hi", "model": "nobody"}, 404, "model_not_found"),
    ],
)
def test_generate_refuses_bad_input_before_storing(
    h: AppHarness, body: dict[str, Any], status: int, code: str
) -> None:
    for path in ("/generate", "/generate/stream"):
        response = post(h, path, body, "conv-bad")
        assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert h.services.sessions.get_session("conv-bad", "local") is None
    assert not h.chat.chat_requests


def test_generate_continues_the_conversation_and_takes_a_persona(h: AppHarness) -> None:
    post(h, "/generate", build_generate_payload("one"), "conv-cont")
    response = post(h, "/generate", {"input_message": "two", "model": "companion"}, "conv-cont")
    assert response.status_code == 200
    contents = [m.content for m in h.services.sessions.transcript("conv-cont")]
    assert contents == ["one", "Hello there!", "two", "Hello there!"]


def test_the_routes_are_in_the_openapi_schema(h: AppHarness) -> None:
    paths = httpx.get(h.base_url + "/openapi.json").json()["paths"]
    for path in ("/chat", "/generate", "/generate/stream"):
        assert "post" in paths[path], path


# --- auth without a header -----------------------------------------------------------------


@pytest.mark.parametrize("path", ["/chat", "/chat/stream", "/v1/chat/completions", "/generate"])
def test_api_key_in_the_query_on_the_chat_routes(keyed: AppHarness, path: str) -> None:
    body = (
        build_generate_payload("hi")
        if path == "/generate"
        else build_chat_payload([{"role": "user", "content": "hi"}], stream=path == "/chat/stream")
    )
    conversation = f"conv-q{path.replace('/', '-')}"
    ok = post(keyed, path, body, conversation, params={"api_key": "alice-key"})
    assert ok.status_code == 200
    assert keyed.services.sessions.get_session(conversation, "alice") is not None
    wrong = post(keyed, path, body, conversation + "-w", params={"api_key": "nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    # The header wins over the query.
    both = httpx.post(
        keyed.base_url + path,
        json=body,
        params={"api_key": "alice-key"},
        headers={**ui_headers(conversation + "-b"), "Authorization": "Bearer bob-key"},
        timeout=30,
    )
    assert both.status_code == 200
    assert keyed.services.sessions.get_session(conversation + "-b", "bob") is not None


def test_api_key_in_the_query_is_not_taken_by_the_rest_api(keyed: AppHarness) -> None:
    response = httpx.get(keyed.base_url + "/api/sessions", params={"api_key": "alice-key"})
    assert response.status_code == 401
    headers = {"Authorization": "Bearer alice-key"}
    assert httpx.get(keyed.base_url + "/api/sessions", headers=headers).status_code == 200


def test_access_log_masks_the_query_key_and_keeps_its_format() -> None:
    # uvicorn's access record: a format string and a 5-tuple its formatter unpacks
    # (uvicorn/protocols/http/*: access_logger.info('%s - "%s %s HTTP/%s" %d', ...)).
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "POST", "/chat?api_key=alice-key&x=1", "1.1", 200),
        None,
    )
    assert MaskSecrets().filter(record)
    line = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s').format(record)
    assert line == '127.0.0.1:5000 - "POST /chat?api_key=***&x=1 HTTP/1.1" 200 OK'


def test_log_masking_of_a_secret_from_a_non_string_argument() -> None:
    class Url:
        def __str__(self) -> str:
            return "/websocket?token=abc123"

    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "%s", (Url(),), None)
    assert MaskSecrets().filter(record)
    assert record.getMessage() == "/websocket?token=***"
