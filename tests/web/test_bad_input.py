"""Hostile and malformed input on the HTTP API: a clear 4xx, never a 500, nothing stored.

issue 8's list: control characters and unusual Unicode, deeply nested JSON, huge
``messages`` arrays, persona ids with path separators, wrong types and unknown fields.
(Oversize bodies, invalid JSON and empty messages: test_openai_api.py; the WebSocket:
test_websocket.py; a schema-wide fuzz: test_fuzz.py.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.web.openai_schemas import MAX_MESSAGES
from tests.web.harness import AppHarness

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppHarness]:
    with AppHarness(tmp_path_factory.mktemp("bad-input")) as harness:
        yield harness


def say(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def assert_nothing_stored(h: AppHarness) -> None:
    assert h.services.sessions.list_sessions("local") == []
    assert h.chat.chat_requests == []  # and no model was called


REFUSED = [
    # Text no store can hold as sent: a clear 400 naming it, before anything is stored.
    ("NUL character", json.dumps(say("before \x00 after")).encode(), 400, "NUL"),
    (
        "lone surrogate",
        b'{"messages": [{"role": "user", "content": "x \\ud800 y"}]}',
        400,
        "surrogate",
    ),
    (
        "lone surrogate in a content part",
        b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\udfff"}]}]}',
        400,
        "surrogate",
    ),
    ("nesting in an unknown field", b'{"messages": [], "x": ' + nested(100_000) + b"}", 400, ""),
    (
        "nesting as the content",
        b'{"messages": [{"role": "user", "content": ' + nested(5_000) + b"}]}",
        400,
        "",
    ),
    (
        "too many messages",
        json.dumps({"messages": [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1)}).encode(),
        400,
        "",
    ),
    ("persona id with ..", json.dumps({"model": "../../etc/passwd", **say("x")}).encode(), 404, ""),
    ("persona id with /", json.dumps({"model": "companion/../x", **say("x")}).encode(), 404, ""),
    ("persona id with \\", json.dumps({"model": "..\\\\x", **say("x")}).encode(), 404, ""),
    (
        "content of the wrong type",
        json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(),
        400,
        "",
    ),
    (
        "an unknown role",
        json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(),
        400,
        "",
    ),
    ("a body that is no object", b"[1, 2, 3]", 400, ""),
    ("a number where a flag goes", json.dumps({**say("x"), "stream": {"a": 1}}).encode(), 400, ""),
]


@pytest.mark.parametrize(
    ("raw", "status", "mentions"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_bad_chat_requests_are_refused_cleanly(
    h: AppHarness, raw: bytes, status: int, mentions: str
) -> None:
    r = httpx.post(
        h.base_url + CHAT, content=raw, headers={"content-type": "application/json"}, timeout=30
    )
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["message"] and mentions in error["message"]
    assert_nothing_stored(h)


def test_unusual_unicode_and_unknown_fields_are_accepted(tmp_path: Path) -> None:
    # What is storable is taken as it is: RTL overrides, joiners, emoji sequences, CJK,
    # other control characters; unknown OpenAI parameters are ignored (clients send many).
    text = "\u202eevil\u202c \u200d👩\u200d👩\u200d👧 é 你好 \x07\x1b[31m tab\tend"
    with AppHarness(tmp_path) as h:
        r = httpx.post(
            h.base_url + CHAT,
            json={**say(text), "frobnicate": {"deep": [1, 2]}, "logit_bias": {"1": 2}},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        rows = h.services.sessions.transcript(r.headers["x-session-id"])
        assert rows[0].content == text
        sent = h.chat.chat_requests[0].body["messages"][-1]["content"]
        assert sent.endswith(text)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/memories", {"content": "a \x00 b"}),
        ("POST", "/api/memories", {"content": "fine", "surprise": True}),
        ("POST", "/api/memories", {"content": ["not", "text"]}),
        ("GET", "/api/memories?persona_id=..%2F..%2Fetc", None),
        ("GET", "/api/personas/..%5Cx", None),
    ],
)
def test_bad_rest_input_is_a_4xx_and_stores_nothing(
    h: AppHarness, method: str, path: str, body: dict[str, object] | None
) -> None:
    r = httpx.request(method, h.base_url + path, json=body, timeout=30)
    assert 400 <= r.status_code < 500, r.text
    memories = h.services.long_term.store
    assert all(memories.count(ns) == 0 for ns in memories.namespaces())
