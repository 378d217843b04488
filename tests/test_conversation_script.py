"""The conversation-script format's one parser (backend.cli.conversation_script), which the
demo and the benches both read scripts with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backend.cli.conversation_script import Probe, ScriptError, load_script, parse_script
from bench import formation_script

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "bench" / "data" / "eval" / "conversations").glob("*.json")) + sorted(
    (REPO / "personas" / "demos").glob("*.json")
)


def user(text: str, probe: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"role": "user", "content": text} | ({"probe": probe} if probe else {})


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_turns_are_numbered_and_carry_their_reply_and_probe() -> None:
    script = parse_script(
        [
            [user("I adopted a cat"), assistant("Congratulations!"), user("Her name is Miso")],
            [user("What is my cat called?", {"expects_any": ["Miso"], "topic": "cat"})],
        ],
        Path("chats/cat.json"),
    )
    assert script.stem == "cat"
    assert [(t.session, t.index, t.number) for t in script.turns] == [
        (0, 0, 0),
        (0, 1, 1),
        (1, 0, 2),
    ]
    assert [t.reply for t in script.turns] == ["Congratulations!", None, None]
    assert script.turns[2].probe == Probe(("Miso",), "cat", ())
    assert script.probes == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([[user("hi"), assistant("a"), assistant("b")]], "session 1, turn 3: an assistant turn"),
        ([[assistant("hello"), user("hi")]], "session 1, turn 1: an assistant turn must follow"),
        ([[user("q", {"expects_any": ["x"], "why": "?"})]], "unknown probe key(s) ['why']"),
        ([[user("q", {"expects_any": ["x"], "topic": 3})]], "'probe.topic' must be a string"),
        ([[user("q", {"expects_any": ["x"], "stale_any": [""]})]], "probe.stale_any: must be"),
        ([[{**assistant("a"), "probe": {"expects_any": ["x"]}}]], "only user turns can carry"),
        ([[user("q", {"expects_any": ["x"]})], "not a list"], "session 2: must be a list"),
        ([[user("q", {"expects_any": ["x"]})], ["turn"]], "session 2, turn 1: must be an object"),
    ],
)
def test_malformed_scripts_name_the_place(data: Any, message: str) -> None:
    with pytest.raises(ScriptError, match=r"^bad\.json: ") as info:
        parse_script(data, Path("bad.json"))
    assert message in str(info.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read the script"):
        load_script(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'[[{"role": "user", "content": "caf\xe9"}]]')
    with pytest.raises(ScriptError, match="not UTF-8"):
        load_script(latin)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_bench_reads_every_script_with_the_same_parser(path: Path) -> None:
    script = load_script(path)
    assert script.probes > 0
    assert formation_script.load_script(path) == script


def test_the_bench_reports_a_bad_script_as_its_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([[assistant("hello")]]), encoding="utf-8")
    with pytest.raises(formation_script.UsageError, match="an assistant turn must follow"):
        formation_script.load_script(path)
