"""A whole cluster on loopback: PostgreSQL, a Chroma server, N app processes, and
scripted OpenAI-compatible upstreams whose answers follow the conversation.

Used by ``tests/cluster/test_cluster_e2e.py`` and ``bench/cluster_throughput.py``.

Conversations are made checkable by construction. User message t of conversation c
names a code word (``code_word(c, t)``) and asks for the previous one. The scripted
hippocampus (``hippocampus_reply``) reads the state it is given and answers, for the
turns it reads (the new message, and those that waited behind a slow run in
``missed_turns``), with

- ``background`` = the previous background + `` t<n>`` per turn read: after n turns it
  is exactly ``c<c>: t1 t2 … tn`` only if every merge read the state the previous one
  saved (a stale read drops a link; two merges interleaved, or a turn read twice,
  duplicate one);
- ``short_term`` = the previous items unchanged (the merge appends the new turn);
- one long-term fact per turn read, naming its code word (a different template per
  turn, so the save gate sees distinct facts).

The scripted chat model (``chat_reply``) says whether the previous turn's code word
reached its prompt (recalled memories or short-term): ``… saw <word>`` or ``… missed``.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.chroma_server import ChromaServer, free_port
from tests.llm.scripted_server import RecordedRequest, Reply, ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0
TURN = re.compile(r"\bc(\d+) t(\d+):")
_SYLLABLES = ("zor", "vik", "tam", "lou", "pex", "rin", "dak", "sul", "mev", "kon", "bri", "yat")
TEMPLATES = (
    "The user's secret password for conversation {c} is {w}",
    "The user named a pet turtle {w} in conversation {c}",
    "The user's favourite invented city is {w}, as said in conversation {c}",
    "The user drives an old car nicknamed {w} (conversation {c})",
    "The user's grandmother used to sing a song called {w} (conversation {c})",
    "The user is learning a board game named {w} in conversation {c}",
)


def code_word(conversation: int, turn: int) -> str:
    """A made-up word, distinct per (conversation, turn)."""
    n = conversation * 97 + turn * 13
    return "".join(_SYLLABLES[(n >> (3 * i)) % len(_SYLLABLES)] for i in range(3)) + str(turn)


def user_message(conversation: int, turn: int) -> str:
    # The user states the turn's fact: the save gate stores only what the user said.
    said = fact(conversation, turn).replace("The user's", "My").replace("The user", "I")
    text = f"c{conversation} t{turn}: today's code word is {code_word(conversation, turn)}. "
    text += f"{said}."
    if turn > 1:
        text += f" Do you remember the last one, {code_word(conversation, turn - 1)}?"
    return text


def fact(conversation: int, turn: int) -> str:
    template = TEMPLATES[(turn - 1) % len(TEMPLATES)]
    return template.format(c=conversation, w=code_word(conversation, turn))


def reply_text(conversation: int, turn: int, saw: bool) -> str:
    seen = f"saw {code_word(conversation, turn - 1)}" if saw else "missed"
    return f"Reply to c{conversation} t{turn}: {seen}."


def _turn_of(text: str) -> tuple[int, int]:
    found = TURN.findall(text)
    if not found:
        raise ValueError(f"no turn marker in {text[:80]!r}")
    conversation, turn = found[-1]
    return int(conversation), int(turn)


def _payload(body: dict[str, Any]) -> dict[str, Any]:
    data = body["messages"][-1]["content"]
    return dict(json.loads(data[data.index("{") : data.rindex("}") + 1]))


def turns_read(body: dict[str, Any]) -> list[tuple[int, int]]:
    """The (conversation, turn) pairs a hippocampus request reads: those that waited
    behind a slow run (``missed_turns``), then the new message's."""
    payload = _payload(body)
    read = [item["text"] for item in payload.get("missed_turns", []) if item["role"] == "user"]
    return [_turn_of(text) for text in [*read, payload["new_user_message"]]]


def hippocampus_reply(body: dict[str, Any], delay_s: float = 0.0) -> Reply:
    """The hippocampus answer for a request (module doc)."""
    payload = _payload(body)
    turns = turns_read(body)
    conversation = turns[-1][0]
    background = payload["background"] or f"c{conversation}:"
    answer = {
        "background": " ".join([background, *(f"t{turn}" for _, turn in turns)]),
        "short_term": [
            {"role": item["role"], "text": item["text"]} for item in payload["short_term"]
        ],
        "long_term": [
            {
                "content": fact(conversation, turn),
                "category": "general",
                "importance": 0.9,
                "confidence": 0.95,
                "subject": "user",
                "keywords": [code_word(conversation, turn)],
            }
            for _, turn in turns
        ],
        "user_emotion": {"label": "calm", "intensity": 0.3},
    }
    return Reply(chunks=[json.dumps(answer)], first_token_delay_s=delay_s)


def chat_reply(body: dict[str, Any], delay_s: float = 0.0) -> Reply:
    """The chat answer: whether the previous code word reached the prompt (module doc)."""
    messages = body["messages"]
    conversation, turn = _turn_of(messages[-1]["content"])
    context = " ".join(str(m.get("content") or "") for m in messages[:-1])
    saw = turn > 1 and code_word(conversation, turn - 1) in context
    words = reply_text(conversation, turn, saw).split(" ")
    chunks = [w + " " for w in words[:-1]] + [words[-1]]
    return Reply(chunks=chunks, first_token_delay_s=delay_s)


class ScriptServer(ScriptedOpenAIServer):
    """A scripted server whose reply is built from the request it answers (the handler
    records a request and takes its reply in the same thread: a thread-local links them)."""

    def __init__(self, build: Any, delay_s: float = 0.0) -> None:
        super().__init__()
        self._httpd.socket.listen(128)  # many clients at once (socketserver's is 5)
        self._build = build
        self._delay_s = delay_s
        self._local = threading.local()

    def _record(self, request: RecordedRequest) -> None:
        super()._record(request)
        self._local.request = request

    def _next_reply(self) -> Reply:
        request: RecordedRequest = self._local.request
        return self._build(request.body, self._delay_s)


@contextlib.contextmanager
def chroma_server(data: Path) -> Iterator[int]:
    """``chroma run`` (the CLI next to this interpreter) on a free loopback port."""
    with ChromaServer(data) as server:
        yield server.port


@dataclass
class AppProcesses:
    """N ``python -m backend serve`` processes sharing one database and one Chroma."""

    base: Path
    count: int
    database_url: str
    chroma_port: int
    chat_url: str
    hippocampus_url: str
    api_keys: dict[str, str]
    ports: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def config(self, n: int, port: int) -> Path:
        config = {
            "chat": {"provider": "openai", "base_url": self.chat_url, "model": "scripted"},
            "hippocampus": {
                "provider": "openai", "base_url": self.hippocampus_url, "model": "scripted",
                "mode": "full",  # the scripted answers are the full contract's
            },
            "storage": {
                "data_dir": str(self.base / f"app{n}"),  # each process its own (outbox)
                "chroma_url": f"http://127.0.0.1:{self.chroma_port}",
                "database_url": self.database_url,
            },
            "server": {"port": port, "personas_dir": str(REPO / "personas"),
                       "api_keys": self.api_keys},
        }  # fmt: skip
        path = self.base / f"config{n}.json"
        path.write_text(json.dumps(config))
        return path

    def start(self) -> AppProcesses:
        self.base.mkdir(parents=True, exist_ok=True)
        for n in range(self.count):
            port = free_port()
            log = (self.base / f"app{n}.log").open("wb")
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "backend", "--config", str(self.config(n, port)),
                     "serve"],
                    cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
            log.close()
            self.ports.append(port)
        deadline = time.monotonic() + START_TIMEOUT_S
        for n, port in enumerate(self.ports):
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if self.procs[n].poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    tail = (self.base / f"app{n}.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"app process {n} did not start:\n{tail}")
                time.sleep(0.2)
        return self

    def url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.ports[n]}"

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
