"""bench.chat_latency end to end on scripted upstreams: the real app in its own process
(``python -m backend serve``), the chat role a scripted OpenAI-compatible server, the
hippocampus the bench's own ``--slow-hippocampus``, the local MiniLM embedder. Behaviour
only: the times are parsed, never compared."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import chat_latency
from tests.llm.scripted_server import Reply, ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
TURN_LINE = re.compile(
    r"^turn (?P<n>\d+): ttft_s=\d+\.\d\d reply_s=\d+\.\d\d merged=(?:yes|no) "
    r"reply_chars=(?P<chars>\d+)$"
)
LAST_LINE = re.compile(r"^ttft_p50_s=\d+\.\d\d ttft_max_s=\d+\.\d\d ttft_growth=\d+\.\d\d$")
REPLY = ("Oh no,", " poor", " plant!", " How is", " Miso?")


def test_three_turns_on_scripted_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedOpenAIServer(default=Reply(chunks=REPLY, chunk_delay_s=0.01)) as chat:
        config = tmp_path / "config.json"
        config.write_text(
            json.dumps(
                {
                    # one scripted reply every turn: not a loop to sample again here
                    "chat": {
                        "provider": "openai",
                        "base_url": chat.base_url,
                        "model": "s",
                        "reply_guard": False,
                    },
                    "hippocampus": {"provider": "embedded", "mode": "auto"},  # replaced
                    "server": {"personas_dir": str(REPO / "personas")},
                }
            )
        )
        code = chat_latency.main(
            [
                "--config", str(config), "--turns", "3", "--gap", "0", "--max-tokens", "7",
                "--slow-hippocampus", "0.1", "--settle", "60",
            ]
        )  # fmt: skip
        requests = chat.chat_requests
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    lines = out.splitlines()
    turns = [m for m in map(TURN_LINE.match, lines) if m]
    assert [m["n"] for m in turns] == ["1", "2", "3"]
    assert all(int(m["chars"]) == len("".join(REPLY)) for m in turns)
    assert LAST_LINE.match(lines[-1]), lines[-1]
    assert "settled_s=" in out and "3/3 turn reports" in out
    assert re.search(r"; \d hippocampus runs and merges \(\d of several turns at once\)", out)
    assert "requests to the scripted hippocampus: 3" in out
    assert "| TTFT (request sent → first content delta) |" in out
    assert "command: python -m bench.chat_latency" in out
    assert "nproc" in out and "load average" in out and "CPU" in out
    # The bench's messages reached the chat model, in one session, with its max_tokens.
    assert len(requests) == 3
    assert all(r.body["max_tokens"] == 7 for r in requests)
    sent = [r.body["messages"][-1]["content"] for r in requests]
    assert sent == list(chat_latency.MESSAGES[:3])


def test_derived_config_uses_a_fresh_store_and_the_scripted_hippocampus(tmp_path: Path) -> None:
    (tmp_path / "personas").mkdir()
    source = tmp_path / "config.json"
    source.write_text(
        json.dumps(
            {
                "chat": {"provider": "embedded", "model_path": "models/m.gguf"},
                "hippocampus": {"provider": "embedded", "n_ctx": 2048, "mode": "compact"},
                "storage": {"data_dir": "/home/someone/data", "chroma_url": "http://db:8001"},
                "server": {"port": 8000, "api_keys": {"k": "alice"}, "default_persona": "coach"},
            }
        )
    )
    data = chat_latency.derived_config(
        source, port=1234, data_dir=tmp_path / "fresh", hippocampus_url="http://127.0.0.1:9/v1"
    )
    assert data["storage"] == {"data_dir": str(tmp_path / "fresh")}
    assert data["chat"]["model_path"] == str(tmp_path / "models" / "m.gguf")
    assert data["hippocampus"]["provider"] == "openai"
    assert data["hippocampus"]["mode"] == "compact"
    assert "n_ctx" not in data["hippocampus"]
    assert data["server"] == {
        "port": 1234, "host": "127.0.0.1", "api_keys": {}, "default_persona": "coach",
        "personas_dir": str(tmp_path / "personas"),
    }  # fmt: skip
    assert chat_latency.hippocampus_mode(json.loads(source.read_text())) == "compact"
    answer = json.loads(chat_latency.hippocampus_answer("full", [("user", "Hi"), ("user", " ")]))
    assert answer["short_term"] == [{"role": "user", "text": "Hi"}]
    assert answer["long_term"] == []


def test_growth_compares_the_first_and_last_turns() -> None:
    assert chat_latency.growth([1.0, 2.0, 1.0, 9.0, 4.0, 4.0, 5.0]) == pytest.approx(4.0)
    assert chat_latency.growth([1.0, 2.0, 3.0, 4.0, 6.0]) == pytest.approx(5.0 / 1.5)
    assert chat_latency.growth([2.0]) == 1.0
    assert chat_latency.final_line([1.0, 3.0]) == (
        "ttft_p50_s=2.00 ttft_max_s=3.00 ttft_growth=3.00"
    )
