"""Secrets never appear in logs, error messages or the status page.

The app is configured with upstream keys (``chat.api_key``, ``hippocampus.api_key``) and
server API keys (the harness's own upstream key, ``upstream-secret``, is replaced by the
configured one, as in production). Every path that reports trouble is then exercised: upstream
401/500 before the first token and an error mid-stream, a hippocampus that fails, bad
requests (no key, a wrong key, bad JSON, unknown model, an oversized message), a refused
and an accepted UI sign-in, and the pages that describe the configuration
(``/healthz``, ``/status`` by Bearer and by cookie, the OpenAPI schema, the docs page).
No secret may appear in any response body or header (the one exception: the
``Set-Cookie`` of a successful sign-in, which carries the key to the browser by
design), nor in any log record of the ``backend`` and ``uvicorn`` loggers at
DEBUG (message, arguments and traceback) — a key given as a WebSocket ``?api_key=``
included (``backend/web/log_masking.py`` masks it in uvicorn's records).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from backend.web.api_keys import user_for_key
from backend.web.ui_support import COOKIE
from tests.llm.scripted_server import Reply
from tests.web.harness import AppHarness

CHAT_KEY = "sk-chat-CONFIGSECRET-7f3a9c2e"
HIPPO_KEY = "sk-hippo-CONFIGSECRET-1b2d4f6a"
SERVER_KEY = "lm-SERVERSECRET-a1b2c3d4e5"
OTHER_SERVER_KEY = "lm-SERVERSECRET-bob-99887766"
WRONG_KEY = "lm-WRONGSECRET-0000ffff"
HARNESS_UPSTREAM_KEY = "upstream-secret"  # the harness's default upstream key
SECRETS = (CHAT_KEY, HIPPO_KEY, SERVER_KEY, OTHER_SERVER_KEY, WRONG_KEY, HARNESS_UPSTREAM_KEY)
AUTH = {"Authorization": f"Bearer {SERVER_KEY}"}
LOGGERS = ("backend", "uvicorn", "uvicorn.error", "uvicorn.access")


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self._formatter.format(record))  # with any traceback
        self.lines.append(repr(record.args))


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    config = {
        "chat": {"api_key": CHAT_KEY},
        "hippocampus": {"api_key": HIPPO_KEY},
        "server": {"api_keys": {SERVER_KEY: "alice", OTHER_SERVER_KEY: "bob"}},
    }
    with AppHarness(tmp_path, config=config) as harness:
        yield harness


@pytest.fixture
def logs(h: AppHarness) -> Iterator[Collect]:
    """Every record of the app's and uvicorn's loggers at DEBUG (set after the harness
    started: uvicorn configures its loggers when the server is created)."""
    handler = Collect()
    root = logging.getLogger()
    saved = {name: logging.getLogger(name).level for name in LOGGERS}
    root.addHandler(handler)
    for name in ("uvicorn", "uvicorn.access"):  # they do not propagate to the root
        logging.getLogger(name).addHandler(handler)
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        for name in ("uvicorn", "uvicorn.access"):
            logging.getLogger(name).removeHandler(handler)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def exposed(response: httpx.Response, *, skip_set_cookie: bool = False) -> str:
    headers = [
        f"{name}: {value}"
        for name, value in response.headers.multi_items()
        if not (skip_set_cookie and name.lower() == "set-cookie")
    ]
    return "\n".join([*headers, response.text])


def leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def chat(api: httpx.Client, *, stream: bool = False, **extra: object) -> httpx.Response:
    body = {"model": "companion", "messages": [{"role": "user", "content": "hi"}], **extra}
    body["stream"] = stream
    return api.post("/v1/chat/completions", json=body, headers=AUTH)


def test_secrets_stay_out_of_responses_and_logs(h: AppHarness, logs: Collect) -> None:
    seen: list[httpx.Response] = []
    masked = f"{CHAT_KEY[:3]}***{CHAT_KEY[-4:]}"  # as OpenAI words a refused key
    with httpx.Client(base_url=h.base_url, timeout=20) as api:
        # Upstream failures: 401 and 500 before the first token, an error mid-stream.
        h.chat.enqueue(Reply.error(401, f"Incorrect API key provided: {masked}"))
        seen.append(r := chat(api))
        assert r.status_code == 502
        h.chat.enqueue(Reply.error(500))
        seen.append(r := chat(api, stream=True))
        assert r.status_code == 502
        h.chat.enqueue(Reply(chunks=["partial", " reply"], error_event_after=1))
        seen.append(r := chat(api, stream=True))
        assert r.status_code == 200 and "upstream_error" in r.text
        # A hippocampus that refuses (the merge falls back and logs it).
        h.hippocampus.enqueue(Reply.error(401, "invalid api key"))
        h.hippocampus.enqueue(Reply.error(500))
        seen.append(r := chat(api))
        seen.append(r2 := chat(api))
        assert r.status_code == 200 and r2.status_code == 200
        # Bad requests.
        bad_body = {"messages": [{"role": "user", "content": "hi"}]}
        seen.append(r := api.post("/v1/chat/completions", json=bad_body))
        assert r.status_code == 401
        wrong = {"Authorization": f"Bearer {WRONG_KEY}"}
        seen.append(r := api.post("/v1/chat/completions", json=bad_body, headers=wrong))
        assert r.status_code == 401
        seen.append(r := api.get("/api/sessions", headers=wrong))
        assert r.status_code == 401
        raw = {**AUTH, "Content-Type": "application/json"}
        seen.append(r := api.post("/v1/chat/completions", content=b"{not json", headers=raw))
        assert r.status_code in (400, 422)
        seen.append(r := chat(api, model="no-such-persona"))
        assert r.status_code == 404
        huge = {"messages": [{"role": "user", "content": "x" * 40_000}]}
        seen.append(r := api.post("/v1/chat/completions", json=huge, headers=AUTH))
        assert r.status_code == 413
        seen.append(r := api.get("/api/sessions/not-a-session", headers=AUTH))
        assert r.status_code == 404
        # The UI: a wrong key, pages without a key, then the status page both ways.
        seen.append(r := api.post("/login", data={"key": WRONG_KEY, "next": "/status"}))
        assert r.status_code == 401
        seen.append(r := api.get("/status", headers=wrong))
        assert r.status_code in (303, 401)
        seen.append(r := api.get("/status", headers=AUTH))
        assert r.status_code == 200 and "alice" in r.text
        signed_in = api.post("/login", data={"key": SERVER_KEY, "next": "/status"})
        assert signed_in.status_code == 303
        cookie = signed_in.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=") and "httponly" in cookie.lower()
        assert not leaked(exposed(signed_in, skip_set_cookie=True))
        api.cookies.clear()
        seen.append(r := api.get("/status", headers={"Cookie": f"{COOKIE}={SERVER_KEY}"}))
        assert r.status_code == 200 and "alice" in r.text
        api.cookies.clear()
        # Pages that describe the configuration.
        seen.append(r := api.get("/healthz"))
        assert r.status_code == 200
        seen.append(r := api.get("/openapi.json"))
        assert r.status_code == 200
        seen.append(api.get("/docs"))
        seen.append(r := api.get("/v1/models", headers=AUTH))
        assert r.status_code == 200

    for response in seen:
        where = f"{response.request.method} {response.request.url.path}"
        assert not leaked(exposed(response)), f"a secret in the response to {where}"
    assert len(logs.lines) > 0, "nothing was logged: the capture is not working"
    for line in logs.lines:
        assert not leaked(line), f"a secret in a log record: {line}"
    # The upstream did get the configured key: the secrets were really in play.
    assert h.chat.chat_requests[0].headers["authorization"] == f"Bearer {CHAT_KEY}"


def test_websocket_query_key_stays_out_of_uvicorn_logs(h: AppHarness, logs: Collect) -> None:
    async def websocket_with_a_wrong_key() -> None:
        url = f"ws://127.0.0.1:{h.port}/websocket?api_key={WRONG_KEY}"
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5), connect(url) as ws:
                await ws.recv()

    asyncio.run(websocket_with_a_wrong_key())
    assert any("/websocket" in line for line in logs.lines), "the handshake was not logged"
    for line in logs.lines:
        assert not leaked(line), f"a secret in a log record: {line}"


def test_settings_dump_and_repr_hide_secrets(h: AppHarness) -> None:
    settings = h.settings
    assert settings.chat.api_key_value() == CHAT_KEY  # type: ignore[union-attr]
    assert user_for_key(settings.server.api_keys, SERVER_KEY) == "alice"
    for text in (
        repr(settings),
        str(settings),
        str(settings.safe_dump()),
        repr(settings.chat),
        repr(settings.hippocampus),
        repr(settings.server),
    ):
        assert not leaked(text), text
    dumped = settings.safe_dump()
    assert sorted(dumped["server"]["api_keys"].values()) == ["alice", "bob"]
