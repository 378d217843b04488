"""The CLI and a running server on one data directory (issue 16): the server owns the
embedded store, the CLI goes through its HTTP API, a second owner is refused with a
message that names the first, and a killed owner never blocks the next start."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from backend.data_dir_lock import current_owner
from tests.llm.scripted_server import ScriptedOpenAIServer
from tests.web.app_process import AppProcess, hippocampus_reply
from tests.web.harness import REPO, free_port

CLI_TIMEOUT_S = 180

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Captain Mira",
        "description": "{{char}} is a retired starship captain who tells {{user}} stories.",
        "personality": "dry humour, patient",
        "scenario": "A quiet bar on a space station.",
        "first_mes": "Pull up a stool, {{user}}.",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Evening.",
    },
}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[AppProcess, ScriptedOpenAIServer]]:
    """The app as its own process (a copy of the personas: imports write there); yields it
    with its scripted hippocampus."""
    personas = tmp_path / "personas"
    shutil.copytree(REPO / "personas", personas, ignore=shutil.ignore_patterns("demos"))
    with ScriptedOpenAIServer() as chat, ScriptedOpenAIServer() as hippocampus:
        process = AppProcess(
            tmp_path,
            chat.base_url,
            hippocampus.base_url,
            extra={"server": {"personas_dir": str(personas)}},
        )
        process.start()
        try:
            yield process, hippocampus
        finally:
            process.stop()
            process.client.close()


def cli(
    config: Path, *args: str, timeout: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend", "--config", str(config), *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def data_dir(app: AppProcess) -> Path:
    return Path(json.loads(app.config.read_text())["storage"]["data_dir"])


@pytest.mark.slow
def test_cli_chat_goes_through_the_running_server(
    app: tuple[AppProcess, ScriptedOpenAIServer],
) -> None:
    """The measured failure: `chat -m ... --report` next to `serve` opened the store a
    second time and the server's memory list answered 500 from then on."""
    server, hippocampus = app
    assert server.proc is not None
    owner = current_owner(data_dir(server))
    assert owner is not None
    assert (owner.pid, owner.url) == (server.proc.pid, f"http://127.0.0.1:{server.port}")

    hippocampus.enqueue(hippocampus_reply("The user's cat Mochi knocks over their coffee"))
    done = cli(
        server.config,
        "chat",
        "-m",
        "My cat Mochi knocked over my coffee again this morning.",
        "--report",
    )
    assert done.returncode == 0, done.stderr
    assert f"owned by the server at {owner.url}" in done.stderr
    reply, report = done.stdout.split("\n", 1)
    assert reply == "Hello from the scripted server."
    written = json.loads(report)["written"]
    assert [w["content"] for w in written] == ["The user's cat Mochi knocks over their coffee"]
    session = done.stderr.split("(session ", 1)[1].split(")", 1)[0]

    # The same session goes on from the CLI: the server keeps it.
    again = cli(server.config, "chat", "--session", session, "-m", "She is a tabby.")
    assert again.returncode == 0, again.stderr
    transcript = server.client.get(f"/api/sessions/{session}").json()["transcript"]
    assert [m["content"] for m in transcript if m["role"] == "user"] == [
        "My cat Mochi knocked over my coffee again this morning.",
        "She is a tabby.",
    ]

    # A turn through the HTTP API, after the CLI's: both memories are there, no 500.
    hippocampus.enqueue(hippocampus_reply("The user's dog is called Biscuit"))
    server.turn(None, "My dog is called Biscuit.")
    assert server.memories() == [
        "The user's cat Mochi knocks over their coffee",
        "The user's dog is called Biscuit",
    ]
    assert server.client.get("/memories").status_code == 200
    assert server.health()["status"] != "error"

    # Without API keys the server's only user is "local": another --user is refused.
    other = cli(server.config, "chat", "--user", "bob", "-m", "hi")
    assert other.returncode == 1
    assert "only user is 'local'" in other.stderr


@pytest.mark.slow
def test_cli_personas_import_and_mcp_go_through_the_running_server(
    app: tuple[AppProcess, ScriptedOpenAIServer], tmp_path: Path
) -> None:
    server, _ = app
    card = tmp_path / "mira.json"
    card.write_text(json.dumps(CARD))
    done = cli(server.config, "personas", "import", str(card))
    assert done.returncode == 0, done.stderr
    assert "through the server at" in done.stdout
    names = {p["name"]: p["id"] for p in server.client.get("/api/personas").json()["items"]}
    assert "Captain Mira" in names  # served at once, no restart

    stored, recalled = anyio.run(_mcp_store_and_recall, server.config, names["Captain Mira"])
    assert stored["result"] == "write"
    assert [m["id"] for m in recalled] == [stored["id"]]
    r = server.client.get(f"/api/personas/{names['Captain Mira']}/memories")
    assert r.status_code == 200, r.text
    assert [m["id"] for m in r.json()["items"]] == [stored["id"]]  # in the server's store


async def _mcp_store_and_recall(config: Path, persona: str) -> tuple[Any, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "backend", "--config", str(config), "mcp", "--persona", persona],
        cwd=str(REPO),
    )
    with (config.parent / "mcp-stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60) as session,
        ):
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert tools == {"memory_recall", "memory_store", "memory_forget", "memory_people"}
            stored = await _call(
                session, "memory_store", content="The user's sister Mira lives in Lisbon."
            )
            found = await _call(session, "memory_recall", query="Where does Mira live?")
            return stored, found["result"]


async def _call(session: ClientSession, name: str, **arguments: Any) -> Any:
    result: CallToolResult = await session.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content


@pytest.mark.slow
def test_a_second_owner_is_refused_and_a_killed_one_never_blocks(
    app: tuple[AppProcess, ScriptedOpenAIServer], tmp_path: Path
) -> None:
    server, hippocampus = app
    assert server.proc is not None
    first = server.proc.pid
    hippocampus.enqueue(hippocampus_reply("The user's dog is called Biscuit"))
    server.turn(None, "My dog is called Biscuit.")

    # A second server on the same data directory (another port): refused, owner named.
    config = json.loads(server.config.read_text())
    config["server"]["port"] = free_port()
    second = tmp_path / "second.json"
    second.write_text(json.dumps(config))
    refused = cli(second, "serve")
    assert refused.returncode == 1
    assert f"pid {first}" in refused.stderr and "in use" in refused.stderr
    assert server.client.get("/healthz").status_code == 200  # the owner is untouched

    # SIGKILL: the record stays behind, the lock does not; a restart takes the directory.
    server.kill()
    assert (data_dir(server) / "owner.json").exists()
    assert current_owner(data_dir(server)) is None
    server.start()
    assert server.proc is not None
    owner = current_owner(data_dir(server))
    assert owner is not None and owner.pid == server.proc.pid != first
    assert server.memories() == ["The user's dog is called Biscuit"]
    server.stop()  # a normal exit removes the record
    assert not (data_dir(server) / "owner.json").exists()
    assert current_owner(data_dir(server)) is None


@contextmanager
def holding(data: Path, command: str, url: str = "") -> Iterator[subprocess.Popen[str]]:
    """Another process that holds ``data`` as ``command`` (with ``url``: as a server there)."""
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import sys; from pathlib import Path; "
            "from backend.data_dir_lock import acquire_data_dir; "
            "lock = acquire_data_dir(Path(sys.argv[1]), command=sys.argv[2], "
            "url=sys.argv[3] or None); "
            "print('held', flush=True); sys.stdin.read()",
            str(data), command, url,
        ],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.communicate(timeout=30)  # closes its stdin: it exits, releasing the lock


def _offline_config(tmp_path: Path, data: Path) -> Path:
    config = tmp_path / "config.json"
    down = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x"}
    config.write_text(
        json.dumps(
            {
                "chat": down,
                "hippocampus": down,
                "storage": {"data_dir": str(data)},
                "server": {"personas_dir": str(REPO / "personas")},
            }
        )
    )
    return config


def test_a_cli_process_owning_the_data_dir_stops_the_next_one(tmp_path: Path) -> None:
    """Owned by a process that serves no HTTP (another CLI command): a clear refusal."""
    data = tmp_path / "data"
    config = _offline_config(tmp_path, data)
    with holding(data, "chat") as holder:
        for command in (["chat", "-m", "hi"], ["mcp"]):
            done = cli(config, *command)
            assert done.returncode == 1, done.stderr
            assert f"pid {holder.pid}" in done.stderr
            assert "limbic-memory chat" in done.stderr and "in use" in done.stderr


def test_demo_on_a_data_dir_a_server_owns_runs_against_that_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import backend.cli.demo
    from backend.cli.main import main

    seen: dict[str, Any] = {}
    monkeypatch.setattr(backend.cli.demo, "run", lambda **kwargs: seen.update(kwargs) or 0)
    other = tmp_path / "other-data"
    config = _offline_config(tmp_path, tmp_path / "data")
    with holding(other, "serve", "http://127.0.0.1:8123"):
        assert main(["--config", str(config), "demo", "companion", "--data-dir", str(other)]) == 0
    assert (seen["url"], seen["data_dir"], seen["api_key"]) == ("http://127.0.0.1:8123", None, None)
    seen.clear()
    assert main(["--config", str(config), "demo", "companion", "--data-dir", str(other)]) == 0
    assert (seen["url"], seen["data_dir"]) == (None, other)  # nobody owns it: in-process
