"""Chat latency as a user sees it: the real app, one session, a fast typist.

    python -m bench.chat_latency [--config F] [--turns 10] [--gap 2] [--max-tokens 60]
                                 [--slow-hippocampus SECONDS] [--port P] [--settle 120]
                                 [--warmup 0] [--persona ID] [--keep]

The app is started as ``./start.sh`` starts it — ``python -m backend --config F serve``
from the repository root, its output in ``app.log`` in a fresh temporary directory — on
a derived copy of the configuration (``--config``, default ``config.example.json``,
which a fresh ``./install.sh`` copies to ``config.json``): the same model roles and
memory settings, with ``storage`` pointed at the temporary directory (no Chroma server,
no database URL: nothing of the user's data is touched), the server on
``127.0.0.1:--port`` (default: a free port), API keys off, and relative paths
(``server.personas_dir``, ``model_path``) resolved against the original file's
directory. The environment overrides that would point elsewhere (``LM_DATA_DIR``,
``LM_CHROMA_URL``, ``LM_DATABASE_URL``, ``LM_API_KEYS``, ``LM__STORAGE__*``, ...) are
replaced or dropped for the app's process; the others apply, as under ``start.sh``.
The bench waits for ``GET /healthz`` (``--startup-timeout``), and stops the app at the
end, on errors and on Ctrl-C (SIGTERM, then SIGKILL after ``--stop-timeout``). If the
app does not start, the log's tail is printed and the temporary directory is kept
(``--keep`` keeps it anyway).

``--slow-hippocampus SECONDS`` replaces the hippocampus role by a scripted
OpenAI-compatible server on loopback (``tests/llm/scripted_server.py``, in a process of
its own, as ``bench.turn_latency`` runs its upstreams) that waits SECONDS, then streams a
valid answer: for the full contract (what ``hippocampus.mode: auto`` means for a remote
provider) a fixed background, the conversation so far as a verbatim short-term (the last
16 messages the bench knows of: a perfect hippocampus, so the chat prompt grows as in a
real conversation) and no long-term candidates; for ``mode: compact`` no facts and a
neutral feeling (code keeps the short-term then). The chat role stays as configured.

Then ``--turns`` messages (a fixed list of ordinary companion-chat messages, cycled when
more are asked for) go to ONE session through the official ``openai`` SDK, streaming
``POST /v1/chat/completions`` with ``max_tokens=--max-tokens``; the session id is chosen
by the bench and sent as ``X-Session-Id`` from the first turn (an unknown id opens a new
session under that id). Each message is sent ``--gap`` seconds after the previous reply
ended. Per turn:

- ``ttft_s``: request sent → first non-empty content delta (client side: includes the
  app's wait for the session's previous turn, activation and the model's prompt
  processing); a turn without any content counts its stream end;
- ``reply_s``: request sent → end of the stream;
- ``merged``: whether the turn's memory report (``GET /api/sessions/{id}``: one report
  per turn, stored when the turn's merge is done, keyed by the turn id, which the
  response carries as the ``chatcmpl-<turn id>`` chunk id) existed right before the next
  message was sent; for the last turn, right when its reply ended (no waiting);
- ``reply_chars``: characters of the streamed reply.

After the last turn the bench polls the session (every 0.1 s, up to ``--settle``
seconds) until every turn's report exists: ``settled_s`` is the time from the end of the
last reply until then (not settling in time is reported, not an error). The reports'
``created_at`` also give each turn's merge lag (report stored − reply ended), and their
``hippocampus`` part each run's status and time.

Output (stdout): one line per turn, printed once its ``merged`` is known, then a
Markdown summary (p50 and max of TTFT and reply time, merged-before-next count), the
memory line (reports, hippocampus runs and merges — a run that merged a batch of
turns names them in its reports' ``hippocampus.turns`` and counts once — by status and
their times, merge lag, settled_s), the command line, the machine (nproc, CPU model,
load average taken before the app started) and the roles, and last, exactly:
``ttft_p50_s=A ttft_max_s=B ttft_growth=C`` (2 decimals), where growth = median TTFT
of the last three turns ÷ median TTFT of the first three; with fewer than six turns, of
the last ``n // 2`` ÷ the first ``n // 2`` (the middle turn of an odd count left out;
one turn: 1.00). Turns that failed are left out of the statistics. Progress goes to
stderr: the paths, the app's start, each message with the start of its reply.

The app loads its local models at start and reads the prompt prefix every turn shares
(``backend.engine.warm_up``); the bench starts the conversation once ``/healthz``
says they are warm, as a person who opens the page and types finds them.
``--warmup N`` first sends N untimed turns ("Hi there.", 8 tokens) to another session,
each waited for until merged (default 0). Exit status: 0 when every turn got a reply,
1 when a turn failed or the app did not start, 2 for a bad command line or configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

import httpx
import openai

from bench._rig import REPO, command_line, machine_line, percentile, split_chunks

DEFAULT_CONFIG = REPO / "config.example.json"
WARMUP_MESSAGE = "Hi there."
POLL_S = 0.1
SHORT_TERM_ITEMS = 16  # backend.hippocampus.schema.SHORT_TERM_MAX_ITEMS
ITEM_CHARS = 400  # backend.hippocampus.schema.ITEM_MAX_CHARS
BACKGROUND = (
    "The user chats with the companion in the evenings about their day: work, their cat, "
    "their family and things coming up soon."
)

# A person telling their companion about their week; some messages state facts worth
# remembering (the cat's name, the sister's wedding, the interview), some ask back.
MESSAGES: tuple[str, ...] = (
    "Hi! Long day today, I'm finally home and on the sofa.",
    "My cat Miso knocked a whole plant off the windowsill this morning. Soil everywhere.",
    "She's a three-year-old grey tabby, and she acts like she owns the flat.",
    "Work was okay. I'm a nurse on the night rota this month, so my sleep is all over the place.",
    "Oh, and I have a job interview next Tuesday at 10, at the children's hospital in town.",
    "I'm nervous about it. What do people usually ask in interviews like that?",
    "My sister Clara is getting married in June, and I'm one of the bridesmaids.",
    "The dress is sage green. I'm not sure it suits me, honestly.",
    "Do you have a favourite season? Mine is autumn, for the walks.",
    "I tried a new ramen place near the station tonight. Too salty, but the noodles were great.",
    "I'm allergic to peanuts, so I always have to ask about the sauces.",
    "Clara wants me to give a short speech at the wedding. I hate public speaking.",
    "Any tips for calming down before something like that?",
    "Miso is asleep on my feet right now, so I can't move. Cat rules.",
    "Anyway, I should sleep soon. Thanks for listening, it helped.",
    "Do you remember what day my interview is?",
)


# --- the scripted hippocampus ---------------------------------------------------------------


class _RemoteHippocampus:
    """A ``ScriptedOpenAIServer`` living in the manager's process."""

    def __init__(self) -> None:
        from tests.llm.scripted_server import ScriptedOpenAIServer

        self._server = ScriptedOpenAIServer(models=("bench-hippocampus",))
        self._server.__enter__()

    def base_url(self) -> str:
        return self._server.base_url

    def set_default(self, reply: object) -> None:
        self._server.default = reply  # type: ignore[assignment]

    def requests(self) -> int:
        return len(self._server.chat_requests)

    def close(self) -> None:
        self._server.__exit__(None, None, None)


class _HippocampusManager(BaseManager):
    pass


_HippocampusManager.register("Hippocampus", _RemoteHippocampus)


def _ignore_sigint() -> None:
    """The manager's process leaves Ctrl-C to the bench, which stops it in order."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ScriptedHippocampus:
    """The hippocampus role's upstream, in a process of its own (see ``bench._rig``)."""

    def __init__(self, delay_s: float, mode: str) -> None:
        self.delay_s = delay_s
        self.mode = mode  # "full" or "compact"

    def __enter__(self) -> ScriptedHippocampus:
        self._manager = _HippocampusManager(ctx=multiprocessing.get_context("spawn"))
        self._manager.start(_ignore_sigint)
        try:
            self._remote = self._manager.Hippocampus()  # type: ignore[attr-defined]
            self.base_url: str = self._remote.base_url()
            self.answer_with([])
        except BaseException:
            self._manager.shutdown()
            raise
        return self

    def answer_with(self, history: Sequence[tuple[str, str]]) -> None:
        """From now on, answer with ``history`` (role, text) as the short-term."""
        from tests.llm.scripted_server import Reply

        answer = hippocampus_answer(self.mode, history)
        chunks = split_chunks(answer, 8)
        self._remote.set_default(Reply(chunks=chunks, first_token_delay_s=self.delay_s))

    def requests(self) -> int:
        return int(self._remote.requests())

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self._remote.close()
        with contextlib.suppress(Exception):
            self._manager.shutdown()


def hippocampus_answer(mode: str, history: Sequence[tuple[str, str]]) -> str:
    """A valid answer of the ``mode`` contract; no long-term candidates."""
    if mode == "compact":
        return json.dumps({"facts": [], "emotion": "neutral"})
    items = [
        {"role": role, "text": text.strip()[:ITEM_CHARS]}
        for role, text in history[-SHORT_TERM_ITEMS:]
        if text.strip()
    ]
    return json.dumps(
        {
            "background": BACKGROUND,
            "short_term": items,
            "long_term": [],
            "user_emotion": {"label": "calm", "intensity": 0.3},
        }
    )


# --- the app --------------------------------------------------------------------------------


class UsageError(Exception):
    """A bad command line or configuration (exit status 2)."""


class StartError(Exception):
    """The app did not start (exit status 1)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _absolute(value: Any, base: Path) -> Any:
    if isinstance(value, str) and value and not Path(value).is_absolute():
        return str((base / value).resolve())
    return value


def read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(f"{path}: no such configuration file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the configuration: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the top level must be a JSON object")
    return data


def derived_config(
    source: Path, *, port: int, data_dir: Path, hippocampus_url: str | None
) -> dict[str, Any]:
    """``source``'s settings, on a fresh store and a loopback port (see the docstring)."""
    data = read_config(source)
    base = source.resolve().parent
    for role in ("chat", "hippocampus"):
        section = data.get(role)
        if isinstance(section, dict) and "model_path" in section:
            section["model_path"] = _absolute(section["model_path"], base)
    if hippocampus_url is not None:
        old = data.get("hippocampus") if isinstance(data.get("hippocampus"), dict) else {}
        hippocampus: dict[str, Any] = {
            "provider": "openai",
            "base_url": hippocampus_url,
            "model": "bench-hippocampus",
            "max_retries": 0,
        }
        # Named, not "auto" (compact for a server on loopback): the scripted answers
        # follow hippocampus_mode below.
        hippocampus["mode"] = hippocampus_mode({"hippocampus": old})
        data["hippocampus"] = hippocampus
    data["storage"] = {"data_dir": str(data_dir)}
    server = data.get("server") if isinstance(data.get("server"), dict) else {}
    personas = Path(_absolute(server.get("personas_dir") or "personas", base))
    if not personas.is_dir():  # a config from elsewhere: the repository's personas
        personas = REPO / "personas"
    data["server"] = {
        **server,
        "host": "127.0.0.1",
        "port": port,
        "api_keys": {},
        "personas_dir": str(personas),
    }
    return data


def hippocampus_mode(data: dict[str, Any]) -> str:
    """The contract the scripted hippocampus answers: compact when the source config asks
    for it, else full (``derived_config`` names it, so "auto" never decides)."""
    section = data.get("hippocampus")
    mode = section.get("mode") if isinstance(section, dict) else None
    return "compact" if mode == "compact" else "full"


_DROPPED_ENV = ("LM_CONFIG", "LM_CHROMA_URL", "LM_DATABASE_URL", "LM_API_KEYS")
_DROPPED_ENV_PREFIXES = ("LM__STORAGE__", "LM__SERVER__HOST", "LM__SERVER__PORT")


def child_env(port: int, data_dir: Path, *, scripted_hippocampus: bool) -> dict[str, str]:
    """The caller's environment, minus what would point the app at other data."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in _DROPPED_ENV
        and not name.startswith(_DROPPED_ENV_PREFIXES)
        and not name.startswith("LM__SERVER__API_KEYS")
        and not (
            scripted_hippocampus
            and (name.startswith("LM__HIPPOCAMPUS__") or name == "LM_HIPPOCAMPUS_API_KEY")
        )
    }
    env.update({"LM_HOST": "127.0.0.1", "LM_PORT": str(port), "LM_DATA_DIR": str(data_dir)})
    return env


def roles_line(config: Path, env: dict[str, str], source: Path) -> str:
    """What the app will run, from the validated settings (raises ``UsageError``)."""
    from backend.config import ConfigError, load_settings
    from backend.llm.presets import default_preset

    try:
        settings = load_settings(config, env)
    except ConfigError as exc:
        raise UsageError(f"invalid configuration (derived from {source}):\n{exc}") from None

    def describe(role: Any, embedded: str) -> str:
        if role.provider != "embedded":
            return f"openai {role.model} at {role.base_url}"
        if getattr(role, "model_path", None) is not None:
            return f"embedded {Path(role.model_path).name}"
        return f"embedded {getattr(role, 'model', None) or embedded}"

    return (
        f"roles: chat {describe(settings.chat, default_preset('chat'))}; "
        f"hippocampus {describe(settings.hippocampus, default_preset('hippocampus'))}; "
        f"embedding {describe(settings.embedding, 'MiniLM')}"
    )


def _warm(health: dict[str, Any]) -> bool:
    """Every local model role of ``/healthz`` is warm (remote ones have no such flag)."""
    deps = health.get("dependencies", {})
    return all(deps.get(role, {}).get("warm", True) for role in ("chat", "hippocampus"))


class AppProcess:
    """``python -m backend --config F serve`` in its own process group (Ctrl-C is ours)."""

    def __init__(self, config: Path, env: dict[str, str], port: int, log: Path) -> None:
        self.config, self.env, self.port, self.log = config, env, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float) -> float:
        """Start and wait for ``/healthz`` to answer with its local models warm (loaded,
        the shared prompt prefix read: ``backend.engine.warm_up``, as a person opening
        the page finds them); returns the seconds it took."""
        started = time.monotonic()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "backend", "--config", str(self.config), "serve"],
                cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = started + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise StartError(f"the app exited with status {self.proc.returncode}")
                try:
                    health = client.get(f"{self.url}/healthz")
                    if health.status_code == 200 and _warm(health.json()):
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        raise StartError(f"the app did not answer /healthz within {timeout_s:g} s")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout_s: float) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# --- the conversation -----------------------------------------------------------------------


@dataclass
class TurnResult:
    number: int
    text: str
    turn_id: str | None = None
    ttft_s: float | None = None
    reply_s: float = 0.0
    reply: str = ""
    ended_mono: float = 0.0
    ended_wall: float = 0.0
    merged: bool | None = None
    error: str | None = None

    def line(self) -> str:
        ttft = "-" if self.ttft_s is None else f"{self.ttft_s:.2f}"
        merged = {True: "yes", False: "no", None: "?"}[self.merged]
        line = (
            f"turn {self.number}: ttft_s={ttft} reply_s={self.reply_s:.2f} merged={merged} "
            f"reply_chars={len(self.reply)}"
        )
        return line if self.error is None else f"{line} error={self.error}"


def message(i: int) -> str:
    return MESSAGES[i % len(MESSAGES)]


class SessionView:
    """``GET /api/sessions/{id}``: which turns have their memory report."""

    def __init__(self, url: str, session_id: str) -> None:
        self._client = httpx.Client(base_url=url, timeout=30.0)
        self.session_id = session_id

    def detail(self) -> dict[str, Any] | None:
        try:
            r = self._client.get(f"/api/sessions/{self.session_id}")
        except httpx.TransportError:
            return None
        return r.json() if r.status_code == 200 else None  # type: ignore[no-any-return]

    def merged(self, turns: Sequence[TurnResult]) -> tuple[list[bool], dict[str, Any] | None]:
        """For each turn, whether its report exists now."""
        detail = self.detail()
        if detail is None:
            return [False] * len(turns), None
        reports = {r["turn_id"] for r in detail.get("reports", [])}
        user_ids = [m.get("turn_id") for m in detail.get("transcript", []) if m["role"] == "user"]
        found = []
        for i, turn in enumerate(turns):
            turn_id = turn.turn_id or (user_ids[i] if i < len(user_ids) else None)
            found.append(turn_id is not None and turn_id in reports)
        return found, detail

    def close(self) -> None:
        self._client.close()


def send(
    client: openai.OpenAI,
    persona: str,
    session_id: str,
    number: int,
    text: str,
    max_tokens: int,
) -> tuple[TurnResult, str | None]:
    """One streamed turn; returns it and the session id the response named."""
    turn = TurnResult(number, text)
    header: str | None = None
    started = time.perf_counter()
    parts: list[str] = []
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=persona,
            messages=[{"role": "user", "content": text}],
            stream=True,
            max_tokens=max_tokens,
            extra_headers={"X-Session-Id": session_id},
        )
        header = raw.headers.get("x-session-id")
        for chunk in raw.parse():
            if turn.turn_id is None and chunk.id and chunk.id.startswith("chatcmpl-"):
                turn.turn_id = chunk.id.removeprefix("chatcmpl-")
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if delta:
                if turn.ttft_s is None:
                    turn.ttft_s = time.perf_counter() - started
                parts.append(delta)
    except openai.APIError as exc:
        turn.error = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]
    ended = time.perf_counter()
    turn.reply_s = ended - started
    if turn.ttft_s is None and turn.error is None:
        turn.ttft_s = turn.reply_s  # no content at all: the stream's end is the first token
    turn.ended_mono, turn.ended_wall = time.monotonic(), time.time()
    turn.reply = "".join(parts)
    return turn, header


@dataclass
class Settled:
    reports: int
    settled_s: float | None  # None: not within --settle
    runs: int  # hippocampus runs = merges: a batch of several turns is one
    batched: int  # of them, runs that merged several turns at once
    statuses: dict[str, int]  # per run
    lags: list[float]
    run_s: list[float]  # the hippocampus runs' own times, from the reports


def settle(view: SessionView, turns: list[TurnResult], timeout_s: float) -> Settled:
    """Poll until every turn's report exists (or ``timeout_s``), from the last reply's end."""
    start = turns[-1].ended_mono
    deadline = time.monotonic() + timeout_s
    settled_s: float | None = None
    detail: dict[str, Any] | None = None
    while True:
        found, detail = view.merged(turns)
        if all(found):
            settled_s = max(0.0, time.monotonic() - start)
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    reports = (detail or {}).get("reports", [])
    runs: dict[tuple[str, ...], dict[str, Any]] = {}
    created: dict[str, float] = {}
    for r in reports:
        hippocampus = (r.get("report") or {}).get("hippocampus") or {}
        # A run that merged a batch of turns names them all in each of their reports.
        batch = hippocampus.get("turns")
        key = tuple(map(str, batch)) if isinstance(batch, list) and batch else (r["turn_id"],)
        runs.setdefault(key, hippocampus)
        with contextlib.suppress(KeyError, ValueError, TypeError):
            stamp = datetime.fromisoformat(r["created_at"].replace("Z", "+00:00"))
            if stamp.tzinfo is None:  # the API's times are UTC
                stamp = stamp.replace(tzinfo=UTC)
            created[r["turn_id"]] = stamp.timestamp()
    lags = [created[t.turn_id] - t.ended_wall for t in turns if t.turn_id in created]
    statuses: dict[str, int] = {}
    for info in runs.values():
        status = str(info.get("status") or "none")
        statuses[status] = statuses.get(status, 0) + 1
    run_s = [info["ms"] / 1e3 for info in runs.values() if isinstance(info.get("ms"), int | float)]
    batched = sum(1 for key in runs if len(key) > 1)
    return Settled(len(reports), settled_s, len(runs), batched, statuses, lags, run_s)


def growth(ttfts: list[float]) -> float:
    """Median of the last three ÷ median of the first three (halves under six turns)."""
    k = min(3, len(ttfts) // 2)
    if k == 0:
        return 1.0
    first, last = statistics.median(ttfts[:k]), statistics.median(ttfts[-k:])
    return last / max(first, 1e-6)


def final_line(ttfts: list[float]) -> str:
    if not ttfts:
        return "ttft_p50_s=nan ttft_max_s=nan ttft_growth=nan"
    return (
        f"ttft_p50_s={percentile(ttfts, 50):.2f} ttft_max_s={max(ttfts):.2f} "
        f"ttft_growth={growth(ttfts):.2f}"
    )


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or "unknown CPU"


def converse(
    args: argparse.Namespace, app: AppProcess, hippocampus: ScriptedHippocampus | None
) -> list[TurnResult]:
    session_id = f"bench-chat-{uuid.uuid4().hex[:16]}"
    client = openai.OpenAI(
        base_url=f"{app.url}/v1", api_key="bench", max_retries=0, timeout=args.turn_timeout
    )
    view = SessionView(app.url, session_id)
    turns: list[TurnResult] = []
    history: list[tuple[str, str]] = []
    try:
        for i in range(args.warmup):
            warm_up(args, client, app, hippocampus, i + 1)
        requests_before = 0 if hippocampus is None else hippocampus.requests()
        for i in range(args.turns):
            text = message(i)
            if turns:  # the previous reply ended: the typist's gap, then a look at its merge
                time.sleep(max(0.0, turns[-1].ended_mono + args.gap - time.monotonic()))
                turns[-1].merged = view.merged(turns)[0][-1]
                print(turns[-1].line(), flush=True)
            history.append(("user", text))
            if hippocampus is not None:
                hippocampus.answer_with(history)
            turn, header = send(client, args.persona, session_id, i + 1, text, args.max_tokens)
            if header and header != session_id:  # the app chose another id: follow it
                session_id = view.session_id = header
            history.append(("assistant", turn.reply))
            turns.append(turn)
            log(f"turn {turn.number}: {text!r} → {_preview(turn.reply)!r}")
            if turn.error is not None and not app.alive():
                log(f"error: the app exited during turn {turn.number}; its log:\n{app.log_tail()}")
                break
        turns[-1].merged = view.merged(turns)[0][-1]
        print(turns[-1].line(), flush=True)
        args.settled = settle(view, turns, args.settle if app.alive() else 0.0)
        args.hippocampus_requests = (
            None if hippocampus is None else hippocampus.requests() - requests_before
        )
    finally:
        view.close()
        client.close()
    return turns


def _preview(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def warm_up(
    args: argparse.Namespace,
    client: openai.OpenAI,
    app: AppProcess,
    hippocampus: ScriptedHippocampus | None,
    number: int,
) -> None:
    """One untimed turn in a session of its own, waited for until merged: the embedded
    models load on first use. Its message states nothing worth remembering."""
    session_id = f"bench-warmup-{uuid.uuid4().hex[:16]}"
    if hippocampus is not None:
        hippocampus.answer_with([("user", WARMUP_MESSAGE)])
    turn, header = send(client, args.persona, session_id, number, WARMUP_MESSAGE, 8)
    view = SessionView(app.url, header or session_id)
    try:
        settled = settle(view, [turn], args.settle)
    finally:
        view.close()
    merged = "not merged" if settled.settled_s is None else f"merged {settled.settled_s:.2f} s"
    log(
        f"warm-up {number}: ttft {turn.ttft_s or 0.0:.2f} s, reply {turn.reply_s:.2f} s, "
        f"{merged} after it{'' if turn.error is None else f'; error: {turn.error}'}"
    )


def summary(args: argparse.Namespace, turns: list[TurnResult], header: list[str]) -> list[str]:
    ok = [t for t in turns if t.error is None and t.ttft_s is not None]
    ttfts = [t.ttft_s for t in ok if t.ttft_s is not None]
    replies = [t.reply_s for t in ok]
    before_next = turns[:-1]
    merged_before = sum(1 for t in before_next if t.merged)
    hippo = (
        f"scripted, answers after {args.slow_hippocampus:g} s"
        if args.slow_hippocampus is not None
        else "as configured"
    )
    lines = [
        "",
        f"### Chat latency: {len(turns)} turns in one session, {args.gap:g} s after each "
        f"reply, max_tokens {args.max_tokens}, hippocampus {hippo}"
        + (f", after {args.warmup} warm-up turn(s) in another session" if args.warmup else ""),
        "",
        "| measure | p50 s | max s |",
        "|---|---:|---:|",
        f"| TTFT (request sent → first content delta) | {percentile(ttfts, 50):.2f} | "
        f"{max(ttfts, default=float('nan')):.2f} |",
        f"| reply (request sent → end of stream) | {percentile(replies, 50):.2f} | "
        f"{max(replies, default=float('nan')):.2f} |",
        "",
        f"Merged before the next message was sent: {merged_before}/{len(before_next)} turns; "
        f"the last turn merged when its reply ended: {'yes' if turns[-1].merged else 'no'}. "
        f"Failed turns: {len(turns) - len(ok)}.",
    ]
    settled: Settled = args.settled
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(settled.statuses.items())) or "none"
    lag = (
        f"merge lag (report stored − reply ended) p50 {percentile(settled.lags, 50):.2f} s, "
        f"max {max(settled.lags):.2f} s"
        if settled.lags
        else "merge lag unknown"
    )
    runs = (
        f"; hippocampus run p50 {percentile(settled.run_s, 50):.2f} s, "
        f"max {max(settled.run_s):.2f} s"
        if settled.run_s
        else ""
    )
    requests = (
        ""
        if args.hippocampus_requests is None
        else f"; requests to the scripted hippocampus: {args.hippocampus_requests}"
    )
    if settled.settled_s is not None:
        state = f"settled_s={settled.settled_s:.2f} after the last reply"
    else:
        state = f"NOT settled within {args.settle:g} s of the last reply"
    lines += [
        f"Memory: {state}; {settled.reports}/{len(turns)} turn reports; {settled.runs} "
        f"hippocampus runs and merges ({settled.batched} of several turns at once), by "
        f"status: {statuses}{runs}; {lag}{requests}.",
        "",
        *header,
        "",
        final_line(ttfts),
    ]
    return lines


def run(args: argparse.Namespace) -> int:
    config_path: Path = args.config
    mode = hippocampus_mode(read_config(config_path))
    machine = f"{machine_line()}, CPU {cpu_model()}"  # before the app adds its own load
    tmp = Path(tempfile.mkdtemp(prefix="bench-chat-"))
    keep = args.keep
    port = args.port or free_port()
    data_dir = tmp / "data"
    derived = tmp / "config.json"
    app = AppProcess(derived, {}, port, tmp / "app.log")
    hippocampus: ScriptedHippocampus | None = None
    try:
        with contextlib.ExitStack() as stack:
            if args.slow_hippocampus is not None:
                hippocampus = stack.enter_context(ScriptedHippocampus(args.slow_hippocampus, mode))
            data = derived_config(
                config_path,
                port=port,
                data_dir=data_dir,
                hippocampus_url=None if hippocampus is None else hippocampus.base_url,
            )
            derived.write_text(json.dumps(data, indent=2), encoding="utf-8")
            env = child_env(port, data_dir, scripted_hippocampus=hippocampus is not None)
            roles = roles_line(derived, env, config_path)
            if args.persona is None:
                server = data.get("server") or {}
                args.persona = server.get("default_persona") or "companion"
            app.env = env
            log(f"config: {config_path} → {derived}")
            log(f"app log: {app.log}")
            stack.callback(app.stop, args.stop_timeout)
            try:
                started_s = app.start(args.startup_timeout)
            except StartError as exc:
                keep = True
                log(f"error: {exc}; log: {app.log} (kept); its tail:\n{app.log_tail()}")
                return 1
            log(f"app ready in {started_s:.1f} s at {app.url}")
            turns = converse(args, app, hippocampus)
            keep = keep or not app.alive()  # the app died: its log is worth a look
            header = [
                command_line("bench.chat_latency", args.argv),
                machine,
                f"{roles}; persona {args.persona}; app started in {started_s:.1f} s",
            ]
            print("\n".join(summary(args, turns, header)), flush=True)
            return 1 if any(t.error for t in turns) else 0
    finally:
        if keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A SIGTERM to the bench stops it like Ctrl-C: the app is stopped on the way out."""

    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chat_latency", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--config", type=Path, default=DEFAULT_CONFIG,
        help="configuration to derive the app's from (default: config.example.json)",
    )  # fmt: skip
    parser.add_argument("--turns", type=int, default=10, help="messages to send (default 10)")
    parser.add_argument(
        "--gap", type=float, default=2.0, help="seconds from a reply's end to the next message"
    )
    parser.add_argument("--max-tokens", type=int, default=60, help="max_tokens of each request")
    parser.add_argument(
        "--slow-hippocampus", type=float, default=None, metavar="SECONDS",
        help="replace the hippocampus by a scripted server answering after SECONDS",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=None, help="app port (default: a free one)")
    parser.add_argument(
        "--settle", type=float, default=120.0,
        help="seconds to wait after the last reply for every memory merge (default 120)",
    )  # fmt: skip
    parser.add_argument("--persona", default=None, help="persona id (default: the configured)")
    parser.add_argument(
        "--warmup", type=int, default=0,
        help="untimed turns in another session first, each merged before the next (default 0)",
    )  # fmt: skip
    parser.add_argument(
        "--startup-timeout", type=float, default=600.0, help="seconds to wait for /healthz"
    )
    parser.add_argument(
        "--stop-timeout", type=float, default=30.0, help="seconds from SIGTERM to SIGKILL"
    )
    parser.add_argument(
        "--turn-timeout", type=float, default=600.0, help="client timeout of one request"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    args.argv = argv
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    if args.gap < 0 or args.settle < 0 or args.warmup < 0:
        parser.error("--gap, --settle and --warmup must not be negative")
    if args.max_tokens < 1:
        parser.error("--max-tokens must be at least 1")
    if args.slow_hippocampus is not None and args.slow_hippocampus < 0:
        parser.error("--slow-hippocampus must not be negative")
    try:
        with _sigterm_as_interrupt():
            return run(args)
    except UsageError as exc:
        log(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        log("interrupted: the app was stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
