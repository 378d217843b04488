"""An app on a loopback port with scripted upstream models, for endpoint tests and benches.

with AppHarness(tmp_path) as h:          # chat + hippocampus: scripted OpenAI servers
    h.chat.enqueue(Reply(chunks=["Hi"]))
    client = openai.OpenAI(base_url=h.base_url + "/v1", api_key="k")
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from backend.clock import SystemClock
from backend.config import load_settings
from backend.engine.services import Services, turn_settings
from backend.engine.turn import TurnEngine
from backend.llm.openai_compat import OpenAICompatChatModel
from backend.longterm.memory import LongTermMemory
from backend.personas import PersonaRegistry
from backend.sessions.store import SessionStore
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
            "chat": {"provider": "openai", "base_url": self.chat.base_url, "model": "scripted"},
            "hippocampus": {
                "provider": "openai",
                "base_url": self.hippocampus.base_url,
                "model": "scripted",
            },
            "storage": {"data_dir": str(self.tmp_path / "data")},
            "server": {"personas_dir": str(REPO / "personas")},
        }
        for section, values in self.config.items():
            data.setdefault(section, {}).update(values)
        path = self.tmp_path / "config.json"
        path.write_text(json.dumps(data))
        self.settings = load_settings(path, env={})
        clock = SystemClock()
        sessions = SessionStore(self.tmp_path / "sessions.sqlite3", clock)
        store = self._store or InMemoryVectorStore()
        embedder = self._embedder or BagOfWordsEmbedder()
        memory = self.settings.memory
        long_term = LongTermMemory(
            store,
            embedder,
            clock,
            gate_policy=memory.gate_policy(),
            activation=memory.activation_policy(),
        )
        chat = OpenAICompatChatModel(
            base_url=self.chat.base_url,
            model="scripted",
            api_key="upstream-secret",
            timeout=self.chat_timeout,
            max_retries=0,
        )
        hippocampus = OpenAICompatChatModel(
            base_url=self.hippocampus.base_url, model="scripted", timeout=5, max_retries=0
        )
        personas = PersonaRegistry.load(REPO / "personas", "companion")
        engine = TurnEngine(
            sessions=sessions,
            long_term=long_term,
            chat=chat,
            hippocampus=hippocampus,
            personas=personas,
            clock=clock,
            settings=turn_settings(self.settings),
        )
        self.services = Services(
            self.settings,
            clock,
            sessions,
            store,
            embedder,
            long_term,
            chat,
            hippocampus,
            personas,
            engine,
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
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the app did not start")
            time.sleep(0.01)
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.hippocampus.__exit__(None, None, None)
        self.chat.__exit__(None, None, None)
