"""``limbic-memory demo``: the replay, the report and its last line, against scripted models."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.cli.conversation_script import ScriptError, load_script, parse_script
from backend.cli.demo import run
from backend.cli.demo_script import score
from backend.cli.main import main
from backend.config import load_settings
from tests.llm.scripted_server import Reply, ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[1]
REPO_DEMOS = REPO / "personas" / "demos"


def _fact(content: str, keywords: list[str], supersedes: str | None = None) -> dict[str, Any]:
    fact: dict[str, Any] = {
        "content": content,
        "category": "personal_fact",
        "importance": 0.8,
        "confidence": 0.95,
        "subject": "user",
        "keywords": keywords,
    }
    if supersedes:
        fact["supersedes"] = supersedes
    return fact


def _hippocampus(*facts: dict[str, Any]) -> Reply:
    body = {"background": "", "short_term": [], "long_term": list(facts), "user_emotion": None}
    return Reply(chunks=[json.dumps(body)])


WEDDING_JUNE = "The user's sister Lily's wedding is on June 14"

# One hippocampus reply per turn of personas/demos/companion.json, in order.
COMPANION_FACTS = [
    _hippocampus(_fact("The user has a cat named Biscuit", ["cat", "biscuit"])),
    _hippocampus(_fact(WEDDING_JUNE, ["wedding", "sister", "lily"])),
    _hippocampus(_fact("The user is allergic to peanuts", ["allergy", "peanuts"])),
    _hippocampus(
        _fact(
            "The user's sister Lily's wedding is on September 20",
            ["wedding", "sister", "lily"],
            supersedes=WEDDING_JUNE,
        )
    ),
]


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedOpenAIServer, ScriptedOpenAIServer]]:
    empty = _hippocampus()
    with (
        ScriptedOpenAIServer(default=Reply(chunks=["Noted", "."])) as chat,
        ScriptedOpenAIServer(default=empty) as hippocampus,
    ):
        yield chat, hippocampus


def _config(tmp_path: Path, chat: ScriptedOpenAIServer, hippo: ScriptedOpenAIServer) -> Path:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                # One scripted reply to every message: the reply guard would take the
                # second for a repeat and ask again (tests/engine/test_turn_guard.py).
                "chat": {
                    "provider": "openai",
                    "base_url": chat.base_url,
                    "model": "scripted",
                    "reply_guard": False,
                },
                "hippocampus": {
                    "provider": "openai",
                    "base_url": hippo.base_url,
                    "model": "scripted",
                    "mode": "full",  # the scripted answers are the full contract's
                },
                "storage": {"data_dir": str(tmp_path / "unused")},
                "server": {"personas_dir": str(REPO / "personas")},
            }
        )
    )
    return path


def _run(config: Path, **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    options: dict[str, Any] = {
        "persona": "companion",
        "script_path": None,
        "url": None,
        "api_key": None,
        "data_dir": None,
        "merge_timeout": 30.0,
    }
    options.update(kwargs)
    code = run(**options, load_settings=lambda: load_settings(config, env={}), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_shipped_scripts_are_valid() -> None:
    for name in ("companion", "tutor", "coach"):
        script = load_script(REPO_DEMOS / f"{name}.json")
        assert len(script.sessions) == 3
        assert 8 <= len(script.turns) <= 10
        assert script.probes == 3
        assert all(t.probe is not None for t in script.sessions[-1])


def test_the_eval_conversations_are_valid() -> None:
    conversations = sorted((REPO / "bench" / "data" / "eval" / "conversations").glob("*.json"))
    assert len(conversations) == 3
    for path in conversations:
        assert load_script(path).probes > 0


def test_score_is_case_insensitive_and_notes_stale_values() -> None:
    script = parse_script(
        [
            [
                {
                    "role": "user",
                    "content": "q",
                    "probe": {"expects_any": ["May 10"], "stale_any": ["March"]},
                }
            ]
        ],
        Path("x.json"),
    )
    probe = script.sessions[0][0].probe
    assert probe is not None
    assert score(probe, "It moved from march to MAY 10.") == (True, ["March"])
    assert score(probe, "In March.") == (False, ["March"])


def test_a_demo_replays_the_script_and_scores_every_probe(
    tmp_path: Path, servers: tuple[ScriptedOpenAIServer, ScriptedOpenAIServer]
) -> None:
    chat, hippocampus = servers
    chat.default = Reply(chunks=["It's on September 20", "; no peanuts; and Biscuit!"])
    for reply in COMPANION_FACTS:
        hippocampus.enqueue(reply)
    code, out, err = _run(_config(tmp_path, chat, hippocampus), data_dir=tmp_path / "data")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-1] == "probes passed 3/3"
    assert lines[0].startswith("demo: persona companion, script ")
    assert "3 sessions, 8 user turns, 3 probes" in lines[0]
    assert "Long-term memories formed (" in out
    assert "[personal_fact, importance 0.80] The user has a cat named Biscuit" in out
    assert "The user is allergic to peanuts" in out
    assert "version chain (2, oldest first):" in out
    chain = out.split("version chain (2, oldest first):")[1].splitlines()
    assert chain[1].strip() == WEDDING_JUNE
    assert chain[2].strip() == "The user's sister Lily's wedding is on September 20"
    assert out.count("PASS (expects any of:") == 3
    assert "FAIL" not in out
    assert "activated (" in out
    # Only the user turns were sent, one chat request each; the last session's probes
    # recalled the facts planted earlier.
    assert len(chat.chat_requests) == 8
    sent = [r.body["messages"][-1]["content"] for r in chat.chat_requests]
    assert sent[0].startswith("Ugh, long day.")
    assert not any("Oh no, Biscuit" in s for s in sent)
    assert "The user has a cat named Biscuit" in out.split("Probes (3):")[1]
    # Three sessions were created; each turn's merge finished before the next was sent.
    assert err.count("session 1/3") == 3 and err.count("session 3/3") == 3


def test_failing_probes_are_reported(
    tmp_path: Path, servers: tuple[ScriptedOpenAIServer, ScriptedOpenAIServer]
) -> None:
    chat, hippocampus = servers
    chat.default = Reply(chunks=["I'm sorry, I don't remember that."])
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                [{"role": "user", "content": "My dog is called Rex."}],
                [
                    {"role": "user", "content": "Hi again"},
                    {"role": "assistant", "content": "Hello!"},
                    {
                        "role": "user",
                        "content": "What is my dog called?",
                        "probe": {"expects_any": ["Rex"], "topic": "pet"},
                    },
                ],
            ]
        )
    )
    code, out, err = _run(_config(tmp_path, chat, hippocampus), persona=None, script_path=script)
    assert code == 0, err
    assert "demo: persona companion" in out  # the configured default persona
    assert "FAIL (expects any of: 'Rex')" in out
    assert "Long-term memories formed (0):" in out
    assert out.splitlines()[-1] == "probes passed 0/1"
    assert len(chat.chat_requests) == 3


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"not": "a list"}, "non-empty JSON list of sessions"),
        ([[{"role": "bot", "content": "hi"}]], "session 1, turn 1: 'role' must be"),
        ([[{"role": "user", "content": "hi"}], [{"role": "user"}]], "session 2, turn 1: 'content'"),
        ([[{"role": "user", "content": "hi", "probe": {"expects_any": []}}]], "expects_any"),
        ([[{"role": "user", "content": "hi"}]], "no user turn carries a 'probe'"),
        ([[{"role": "assistant", "content": "hi"}]], "turn 1: an assistant turn must follow"),
        ([[]], "session 1: has no user turn"),
    ],
)
def test_malformed_scripts_are_rejected_clearly(data: Any, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ScriptError, match=r"bad\.json") as info:
        load_script(path)
    assert message in str(info.value)


def test_the_cli_exits_2_on_a_malformed_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[[{'role': 'user'}]]")
    assert main(["--config", str(tmp_path / "none.json"), "demo", "--script", str(path)]) == 2
    captured = capsys.readouterr()
    assert "limbic-memory demo:" in captured.err
    assert "not valid JSON" in captured.err
    assert captured.out == ""


def test_the_cli_exits_2_without_a_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = ["--config", str(tmp_path / "none.json"), "demo"]
    assert main([*config, "nobody"]) == 2
    assert "no demo script for persona 'nobody'" in capsys.readouterr().err
    assert main(config) == 2
    assert "give a PERSONA" in capsys.readouterr().err


def test_a_demo_runs_against_a_url(tmp_path: Path) -> None:
    from tests.web.harness import AppHarness

    with AppHarness(tmp_path) as h:
        h.chat.default = Reply(chunks=["Your cat is Biscuit."])
        for reply in COMPANION_FACTS:
            h.hippocampus.enqueue(reply)
        out, err = io.StringIO(), io.StringIO()
        code = run(
            persona="companion",
            script_path=REPO_DEMOS / "companion.json",
            url=h.base_url,
            api_key=None,
            data_dir=None,
            merge_timeout=30.0,
            load_settings=None,
            out=out,
            err=err,
        )
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert f"app: {h.base_url}" in text
    assert "demo: persona companion" in text
    assert "The user has a cat named Biscuit" in text
    assert "PASS (expects any of: 'biscuit')" in text
    # The scripted chat says only the cat's name; asked what to be careful about, the
    # reply guard ends it with the recalled allergy (engine/reply_guard.py).
    assert "Biscuit. But remember: you are allergic to peanuts" in text
    # Asked another name, "Your cat is Biscuit." three times is never shown: the notes
    # that answer are said instead ("I do remember what you told me: …").
    assert "I do remember what you told me:" in text
    assert text.splitlines()[-1] == "probes passed 3/3"
