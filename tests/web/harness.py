"""An app on a loopback port with scripted upstream models, for endpoint tests and benches.

The app is wired by ``build_services`` as in production (real OpenAI-compatible clients,
the outbox, the personas directory); only the vector store (in memory) and the embedder
(bag of words) are replaced, unless the test hands in its own.

with AppHarness(tmp_path) as h:          # chat + hippocampus: scripted OpenAI servers
    h.chat.enqueue(Reply(chunks=["Hi"]))
    client = openai.OpenAI(base_url=h.base_url + "/v1", api_key="k")
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from backend.config import load_settings
from backend.engine.services import build_services
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.vector_port import VectorStore
from backend.web.app import create_app
from tests.llm.scripted_server import Reply, ScriptedOpenAIServer
from tests.stores.fakes import BagOfWordsEmbedder

REPO = Path(__file__).resolve().parents[2]

HIPPOCAMPUS_OK = json.dumps(
    {"background": "", "short_term": [], "long_term": [], "user_emotion": None}
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AppHarness:
    def __init__(
        self,
        tmp_path: Path,
        *,
        config: dict[str, Any] | None = None,
        store: VectorStore | None = None,
        embedder: Any = None,
        chat_timeout: float = 5.0,
    ) -> None:
        self.tmp_path = tmp_path
        self.chat_timeout = chat_timeout
        self.config = config or {}
        self._store = store
        self._embedder = embedder
        self.chat = ScriptedOpenAIServer(default=Reply(chunks=["Hello", " there", "!"]))
        self.hippocampus = ScriptedOpenAIServer(default=Reply(chunks=[HIPPOCAMPUS_OK]))

    def __enter__(self) -> AppHarness:
        self.chat.__enter__()
        self.hippocampus.__enter__()
        data = {
            "chat": {
                "provider": "openai",
                "base_url": self.chat.base_url,
                "model": "scripted",
                "api_key": "upstream-secret",
                "timeout": self.chat_timeout,
                "max_retries": 0,
            },
            "hippocampus": {
                "provider": "openai",
                "base_url": self.hippocampus.base_url,
                "model": "scripted",
                "timeout": 5,
                "max_retries": 0,
                # The scripted answers are the full contract's ("auto" would choose the
                # compact one for a server on loopback).
                "mode": "full",
            },
            "storage": {
                "data_dir": str(self.tmp_path / "data"),
                "sessions_db": str(self.tmp_path / "sessions.sqlite3"),
            },
            "server": {"personas_dir": str(REPO / "personas")},
        }
        for section, values in self.config.items():
            data.setdefault(section, {}).update(values)
        path = self.tmp_path / "config.json"
        path.write_text(json.dumps(data))
        self.settings = load_settings(path, env={})
        # The app's own wiring: models, outbox, personas and the rest as production builds
        # them; only the vector store and the embedder are the test's.
        self.services = build_services(
            self.settings,
            command="test",
            store=InMemoryVectorStore() if self._store is None else self._store,
            embedder=BagOfWordsEmbedder() if self._embedder is None else self._embedder,
        )
        self.app = create_app(self.settings, self.services, own_services=True)
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                ws="websockets-sansio",
            )
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the app did not start")
            time.sleep(0.01)
        return self

    def _serve(self) -> None:
        """``uvicorn.Server.run``, keeping the app's event loop for ``drain``."""

        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            await self.server.serve()

        with asyncio.Runner(loop_factory=self.server.config.get_loop_factory()) as runner:
            runner.run(serve())

    def drain(self, timeout_s: float = 30.0) -> None:
        """Wait until the engine's background work is done (merges, a redo's short-term
        patch, read-aheads): what a request left running has then happened, so a test
        checks it, or its absence, without sleeping. ``timeout_s`` only guards a hang."""
        assert self.loop is not None, "the app is not running"
        drained = asyncio.run_coroutine_threadsafe(self.services.engine.drain(), self.loop)
        drained.result(timeout=timeout_s)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.hippocampus.__exit__(None, None, None)
        self.chat.__exit__(None, None, None)
