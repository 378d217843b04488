"""The MCP server: the SDK's own clients against /mcp (streamable HTTP) and the stdio command."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from backend.memory.entities import EntityEdit
from backend.memory.types import Namespace
from backend.personas import PersonaRegistry
from tests.web.harness import REPO, AppHarness

KEYS = {"alice-key": "alice", "bob-key": "bob"}


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path) as harness:
        yield harness


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path, config={"server": {"api_keys": KEYS}}) as harness:
        yield harness


@asynccontextmanager
async def mcp_session(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=10) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, **arguments: Any) -> Any:
    result: CallToolResult = await session.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def store_recall_forget(session: ClientSession) -> None:
    tools = {tool.name for tool in (await session.list_tools()).tools}
    assert tools == {"memory_recall", "memory_store", "memory_forget", "memory_people"}
    stored = await call(
        session,
        "memory_store",
        content="The user's sister Mira lives in Lisbon.",
        category="relationship",
        importance=0.8,
    )
    assert stored["result"] == "write" and stored["id"]
    found = (await call(session, "memory_recall", query="Where does Mira live?"))["result"]
    assert [m["id"] for m in found] == [stored["id"]]
    note = found[0]
    assert note["content"] == "The user's sister Mira lives in Lisbon."
    assert note["category"] == "relationship" and len(note["date"]) == 10
    assert 0 < note["score"] <= 1
    people = (await call(session, "memory_people"))["result"]
    assert people == [
        {"name": "Mira", "aliases": [], "relation": "sister", "kind": "person",
         "notes": [{"id": stored["id"], "content": "The user's sister Mira lives in Lisbon."}]}
    ]  # fmt: skip
    forgotten = await call(session, "memory_forget", memory_id=stored["id"])
    assert forgotten == {"id": stored["id"], "forgotten": True}
    assert (await call(session, "memory_recall", query="Where does Mira live?"))["result"] == []
    again = await call(session, "memory_forget", memory_id=stored["id"])
    assert again["forgotten"] is False
    assert (await call(session, "memory_people"))["result"] == []


@pytest.mark.anyio
async def test_streamable_http_store_recall_forget(h: AppHarness) -> None:
    async with mcp_session(h.base_url + "/mcp") as session:
        await store_recall_forget(session)


@pytest.mark.anyio
async def test_people_carry_the_users_entity_edits(h: AppHarness) -> None:
    async with mcp_session(h.base_url + "/mcp") as session:
        await call(session, "memory_store", content="Tom, the user's friend, plays the bass.")
        await call(session, "memory_store", content="The user's friend Tommy moved to Berlin.")
        h.services.sessions.change_entity_edits(
            "local", "companion", lambda _: [EntityEdit("tom", merged=("tommy",))]
        )
        people = (await call(session, "memory_people"))["result"]
    assert [(p["name"], p["aliases"], len(p["notes"])) for p in people] == [("Tom", ["Tommy"], 2)]


def add_persona(h: AppHarness, persona_id: str) -> None:
    """A second persona beside the shipped one (the app reads the registry per request)."""
    cards = h.tmp_path / "personas"
    cards.mkdir()
    companion = json.loads((REPO / "personas" / "companion.json").read_text())
    (cards / "companion.json").write_text(json.dumps(companion))
    (cards / f"{persona_id}.json").write_text(json.dumps({**companion, "id": persona_id}))
    h.services.personas = PersonaRegistry.load(cards, "companion")


@pytest.mark.anyio
async def test_http_namespace_is_user_and_persona(h: AppHarness) -> None:
    other = "coach"
    add_persona(h, other)
    async with mcp_session(h.base_url + "/mcp?persona=" + other) as session:
        stored = await call(session, "memory_store", content="The user plays the cello.")
    memory = h.services.long_term.get(Namespace("local", other), stored["id"])
    assert memory is not None and memory.confidence == pytest.approx(0.9)
    default = h.services.personas.default.id
    assert h.services.long_term.get(Namespace("local", default), stored["id"]) is None
    # The X-Persona header names the same namespace; the default persona sees nothing.
    async with mcp_session(h.base_url + "/mcp", {"X-Persona": other}) as session:
        assert len((await call(session, "memory_recall", query="cello"))["result"]) == 1
    async with mcp_session(h.base_url + "/mcp") as session:
        assert (await call(session, "memory_recall", query="cello"))["result"] == []


@pytest.mark.anyio
async def test_http_bad_arguments_are_tool_errors(h: AppHarness) -> None:
    async with mcp_session(h.base_url + "/mcp") as session:
        result = await session.call_tool("memory_recall", {"query": "x", "k": 0})
        assert result.is_error
        result = await session.call_tool("memory_store", {"content": ""})
        assert result.is_error


def test_http_unknown_persona_is_404(h: AppHarness) -> None:
    r = httpx.post(h.base_url + "/mcp?persona=nobody", json={})
    assert r.status_code == 404 and r.json()["error"]["code"] == "persona_not_found"


@pytest.mark.anyio
async def test_http_keys_isolate_users(keyed: AppHarness) -> None:
    url = keyed.base_url + "/mcp"
    async with mcp_session(url, {"Authorization": "Bearer alice-key"}) as alice:
        stored = await call(alice, "memory_store", content="The user is allergic to peanuts.")
        assert len((await call(alice, "memory_recall", query="peanuts allergy"))["result"]) == 1
    async with mcp_session(url, {"Authorization": "Bearer bob-key"}) as bob:
        assert (await call(bob, "memory_recall", query="peanuts allergy"))["result"] == []
        # bob cannot forget alice's memory either
        assert (await call(bob, "memory_forget", memory_id=stored["id"]))["forgotten"] is False
    default = keyed.services.personas.default.id
    assert keyed.services.long_term.get(Namespace("alice", default), stored["id"]) is not None


def test_http_without_a_valid_key_is_refused(keyed: AppHarness) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = httpx.post(keyed.base_url + "/mcp", json=body, headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"
        assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.anyio
async def test_sdk_client_without_a_key_fails(keyed: AppHarness) -> None:
    # The SDK reports the 401 as an MCPError, wrapped in its task groups' exception groups.
    with pytest.raises(BaseExceptionGroup) as caught:
        async with mcp_session(keyed.base_url + "/mcp"):
            pass
    assert any(isinstance(e, MCPError) for e in leaves(caught.value))


def leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


# --- stdio ---------------------------------------------------------------------------------


def _stdio_config(tmp_path: Path) -> Path:
    down = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x"}
    config = {
        "chat": down,  # never called by the memory tools
        "hippocampus": down,
        "storage": {"data_dir": str(tmp_path / "data")},
        "server": {"personas_dir": str(REPO / "personas")},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.slow
@pytest.mark.anyio
async def test_stdio_command_store_recall_forget(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "backend", "--config", str(_stdio_config(tmp_path)), "mcp", "--user", "u1"],
        cwd=str(REPO),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60) as session,
        ):
            await session.initialize()
            await store_recall_forget(session)
