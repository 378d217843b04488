"""bench.memory_formation end to end on a tiny script: the real engine, gate, embedded
Chroma store and local MiniLM embedder, with a scripted hippocampus injected through
``main``'s test seam (or the oracle of ``--hippocampus perfect``). Behaviour only: the
hippocampus time on the last line is parsed, never compared."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from backend.llm.fake import FakeChatModel
from bench import entity_judge, memory_formation

REPO = Path(__file__).resolve().parents[2]
LAST_LINE = re.compile(
    r"^probe_recall=(?P<passed>\d+)/(?P<probes>\d+) stale=(?P<stale>\d+) "
    r"memories=(?P<memories>\d+) junk=(?P<junk>\d+) duplicates=(?P<duplicates>\d+) "
    r"subject_errors=(?P<subject_errors>\d+) hippocampus_valid=(?P<valid>\d+)/(?P<runs>\d+) "
    r"hippocampus_p50_s=(?P<p50>\d+\.\d\d) wrong_entity=(?P<wrong_entity>-|\d+) "
    r"fragments=(?P<fragments>\d+) precision=(?P<precision>-|\d\.\d{3}) "
    r"entities=(?P<entities>-|\d+/\d+) entity_duplicates=(?P<entity_duplicates>-|\d+)$"
)

SCRIPT = [
    [
        {"role": "user", "content": "Hi! How are you tonight?"},
        {"role": "assistant", "content": "Hello! I'm well, thanks. How was your day?"},
        {"role": "user", "content": "My dog Biscuit is a three-year-old beagle."},
        {"role": "assistant", "content": "Biscuit sounds lovely."},
        {
            "role": "user",
            "content": "I live in Lisbon near the old tram line. "
            "I work as a nurse at a children's hospital.",
        },
        {"role": "assistant", "content": "Nursing in Lisbon, that must keep you busy."},
    ],
    [
        {"role": "user", "content": "Big news: I moved to Porto last week."},
        {"role": "assistant", "content": "Congratulations on the move!"},
        {
            "role": "user",
            "content": "What is my dog's name again?",
            "probe": {"expects_any": ["biscuit"], "topic": "dog"},
        },
        {"role": "assistant", "content": "Biscuit, your beagle."},
        {
            "role": "user",
            "content": "Which city do I live in now?",
            "probe": {"expects_any": ["porto"], "topic": "home", "stale_any": ["lisbon"]},
        },
        {"role": "assistant", "content": "Porto."},
    ],
]


def fact(content: str, **extra: Any) -> dict[str, Any]:
    return {
        "content": content, "category": "personal_fact", "importance": 0.8,
        "confidence": 0.95, "subject": "user", "keywords": [], **extra,
    }  # fmt: skip


DOG = fact("The user's dog Biscuit is a three-year-old beagle.")
LISBON = fact("The user lives in Lisbon near the old tram line.")
NURSE = fact("The user works as a nurse at a children's hospital.")
PORTO = fact("The user moved to Porto.", supersedes=LISBON["content"])
# What the hippocampus answers, turn by turn: the first run is garbage (not JSON).
ANSWERS = [
    None,
    {"long_term": [DOG]},
    {"long_term": [LISBON, NURSE]},
    {"long_term": [PORTO]},
    {"long_term": []},
    {"long_term": []},
]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """Remote chat and hippocampus roles that are never called (scripted replies, injected
    hippocampus), so no llama.cpp model is needed; the embedder is the local MiniLM."""
    unused = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "unused"}
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "chat": unused,
                # The scripted answers are the full contract's ("auto" is compact on
                # loopback).
                "hippocampus": {**unused, "max_retries": 0, "mode": "full"},
                "server": {"personas_dir": str(REPO / "personas")},
            }
        ),
        encoding="utf-8",
    )
    return path


def scripted_hippocampus(answers: list[dict[str, Any] | None]) -> FakeChatModel:
    model = FakeChatModel("scripted-hippocampus")
    for answer in answers:
        model.enqueue(["I am sorry, I cannot do that."] if answer is None else [json.dumps(answer)])
    return model


def last_line(out: str) -> dict[str, str]:
    line = out.strip().splitlines()[-1]
    match = LAST_LINE.match(line)
    assert match, f"unexpected last line: {line!r}"
    return match.groupdict()


def test_a_replay_with_a_scripted_hippocampus(
    script: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hippocampus = scripted_hippocampus(ANSWERS)
    export = tmp_path / "store.jsonl"
    code = memory_formation.main(
        ["--script", str(script), "--config", str(config), "--export", str(export), "--quiet"],
        hippocampus_factory=lambda _script: hippocampus,
    )
    out = capsys.readouterr().out
    assert code == 0, out
    numbers = last_line(out)
    assert {k: v for k, v in numbers.items() if k != "p50"} == {
        "passed": "2", "probes": "2", "stale": "0", "memories": "3", "junk": "0",
        "duplicates": "0", "subject_errors": "0", "valid": "5", "runs": "6",
        "wrong_entity": "-", "fragments": "0", "precision": "-",  # no gold for this script
        "entities": "-", "entity_duplicates": "-",
    }  # fmt: skip
    float(numbers["p50"])
    assert hippocampus.pending == 0  # one hippocampus run per user turn
    # The replies the main model streamed are the script's assistant turns.
    assert "persona companion" in out
    assert re.search(
        r"^probe 1 \[dog\] PASS not stale \| \d+ activated \| #\d+ .*Biscuit", out, re.M
    )
    assert re.search(r"^probe 2 \[home\] PASS not stale \| .*Porto", out, re.M)
    assert "session 1: turns=3 hippocampus_ok=2/3 written=3" in out
    assert "session 2: turns=3 hippocampus_ok=3/3 written=1 superseded=1" in out
    # The export is the app's JSON Lines format: every memory, the superseded one too.
    rows = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["content"] for r in rows) == sorted(
        f["content"] for f in (DOG, LISBON, NURSE, PORTO)
    )
    lisbon = next(r for r in rows if r["content"] == LISBON["content"])
    porto = next(r for r in rows if r["content"] == PORTO["content"])
    assert lisbon["superseded_by"] == porto["id"] and porto["supersedes"] == lisbon["id"]
    assert all(r["embedding"] and r["embedding_model"] for r in rows)


def test_the_judge_reports_whatever_junk_the_gate_lets_through(
    script: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A greeting, the assistant's words as a user fact, a fact said as the persona's and
    a restatement: whatever the gate writes of them, the judge lists with a reason."""
    greeting = fact("Hello there!")
    echo = fact("The user says Biscuit sounds lovely.")  # the assistant said it
    persona = fact("The companion has a dog called Biscuit.", subject="persona")
    answers = [
        {"long_term": [greeting]},
        {"long_term": [DOG, persona]},
        {"long_term": [echo, LISBON]},
        {"long_term": [fact("The user's beagle Biscuit is three years old.")]},
        {"long_term": []},
        {"long_term": []},
    ]
    export = tmp_path / "store.jsonl"
    code = memory_formation.main(
        ["--script", str(script), "--config", str(config), "--export", str(export), "--quiet"],
        hippocampus_factory=lambda _script: scripted_hippocampus(answers),
    )
    out = capsys.readouterr().out
    assert code == 0, out
    numbers = last_line(out)
    stored = {
        row["content"]: row
        for row in map(json.loads, export.read_text(encoding="utf-8").splitlines())
        if row["superseded_by"] is None
    }
    assert int(numbers["memories"]) == len(stored)
    # The real facts are written: without them a gate that dropped everything would leave
    # every junk check below with nothing to look at, and pass.
    assert DOG["content"] in stored and LISBON["content"] in stored, sorted(stored)

    def section(title: str) -> str:
        return out.split(f"\n{title} (", 1)[1].split("\n\n", 1)[0]

    junk, subject = section("Junk"), section("Subject errors")
    decisions = section("Gate decisions other than a plain write")
    restated = "The user's beagle Biscuit is three years old."
    # Every junk candidate is accounted for: written, and then the judge lists it, or kept
    # out, and then the gate's decisions list it with a reason. None goes unreported.
    for content in (greeting["content"], echo["content"], persona["content"], restated):
        assert content in stored or repr(content) in decisions, content
    expected_junk = expected_subject = 0
    if "Hello there!" in stored:
        expected_junk += 1
        assert "'Hello there!': phatic" in junk
    if echo["content"] in stored:
        expected_junk += 1
        expected_subject += 1
        assert echo["content"] in junk and echo["content"] in subject
    if persona["content"] in stored and stored[persona["content"]]["subject"] == "persona":
        expected_subject += 1
        assert "filed as persona but the user said it" in subject
    assert int(numbers["junk"]) == expected_junk
    assert int(numbers["subject_errors"]) == expected_subject
    if restated in stored:
        assert int(numbers["duplicates"]) >= 1
        assert restated in section("Duplicates")


def test_the_perfect_hippocampus_reads_the_oracle(
    script: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    oracle = tmp_path / "oracle.json"
    oracle.write_text(
        json.dumps(
            {
                "turns": [
                    {"session": 0, "turn": 1, "user_starts": "My dog", "long_term": [DOG]},
                    {"session": 0, "turn": 2, "long_term": [LISBON, NURSE]},
                    {"session": 1, "turn": 0, "user_starts": "Big news", "long_term": [PORTO]},
                ]
            }
        ),
        encoding="utf-8",
    )
    args = ["--script", str(script), "--config", str(config), "--hippocampus", "perfect"]
    code = memory_formation.main([*args, "--oracle", str(oracle), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    numbers = last_line(out)
    assert (numbers["passed"], numbers["probes"], numbers["stale"]) == ("2", "2", "0")
    assert (numbers["memories"], numbers["valid"], numbers["runs"]) == ("3", "6", "6")
    assert "hippocampus oracle-hippocampus" in out


def test_who_each_memory_is_about_is_judged_against_the_gold(
    script: Path,
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gold = {
        "script": "tiny",
        "entities": [
            {"id": "me", "kind": "user", "relation": "the user"},
            {"id": "Biscuit", "kind": "pet", "relation": "the user's dog",
             "aliases": ["Biscuit", "dog", "beagle"]},
        ],
        "facts": [
            {"session": 0, "turn": 1, "user_starts": "My dog", "about": ["Biscuit"],
             "fact": "Biscuit is a three-year-old beagle.", "cues": [["three-year-old"]]},
            {"session": 0, "turn": 2, "user_starts": "I live", "about": ["me"],
             "fact": "The user lives in Lisbon.", "cues": [["lisbon"]]},
            # Labelled for this test as the dog's, so that the judge has a wrong entity
            # to find that the gate lets through.
            {"session": 0, "turn": 2, "user_starts": "I live", "about": ["Biscuit"],
             "fact": "Biscuit is a nurse.", "cues": [["nurse"]]},
            {"session": 1, "turn": 0, "user_starts": "Big news", "about": ["me"],
             "fact": "The user moved to Porto.", "cues": [["porto"]]},
        ],
    }  # fmt: skip
    gold_dir = tmp_path / "gold"
    gold_dir.mkdir()
    (gold_dir / "tiny.json").write_text(json.dumps(gold), encoding="utf-8")
    monkeypatch.setattr("bench.entity_judge.GOLD_DIR", gold_dir)
    pug = fact("The user is a three-year-old beagle.")  # the dog's fact, filed as the user's
    dangling = fact("He loves long walks by the tram line.")
    answers = [
        {"long_term": []},
        {"long_term": [pug, dangling, DOG]},
        {"long_term": [LISBON, NURSE]},
        {"long_term": [PORTO]},
        {"long_term": []},
        {"long_term": []},
    ]
    code = memory_formation.main(
        ["--script", str(script), "--config", str(config), "--quiet"],
        hippocampus_factory=lambda _script: scripted_hippocampus(answers),
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    numbers = last_line(out)
    stored = int(numbers["memories"])
    assert numbers["wrong_entity"] == "1", out
    assert NURSE["content"] in out.split("\nwrong_entity (1):\n", 1)[1]
    # The save gate files the dog's age, put on the user, under the dog (the user said
    # "My dog Biscuit is…": ``memory.subjects``), where it is the same fact as DOG, so
    # the judge's one wrong_entity is the nurse; it refuses the dangling "he" (its "he"
    # read as the dog the message names, the user never said it: so the judge has no
    # fragment to count).
    gate = out.split("Gate decisions", 1)[1].split("\n\n", 1)[0]
    assert pug["content"] not in gate and "someone else" not in gate
    assert f"rejected {dangling['content']!r}: not grounded" in gate
    assert numbers["fragments"] == "0"
    correct = stored - int(numbers["wrong_entity"]) - int(numbers["fragments"])
    assert float(numbers["precision"]) == pytest.approx(correct / stored, abs=1e-3)
    # The app's entity table holds the dog its memory names, once, as a dog.
    assert (numbers["entities"], numbers["entity_duplicates"]) == ("1/1", "0")
    assert "entity table: 1/1 found" in out


def test_bad_input_exits_2(
    script: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert memory_formation.main(["--script", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the script" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("[[{", encoding="utf-8")
    assert memory_formation.main(["--script", str(broken)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    no_probe = tmp_path / "no_probe.json"
    no_probe.write_text(json.dumps([[{"role": "user", "content": "hi"}]]), encoding="utf-8")
    assert memory_formation.main(["--script", str(no_probe)]) == 2
    assert "no user turn carries a 'probe'" in capsys.readouterr().err
    bad_role = tmp_path / "bad_role.json"
    bad_role.write_text(json.dumps([[{"role": "system", "content": "x"}]]), encoding="utf-8")
    assert memory_formation.main(["--script", str(bad_role)]) == 2
    assert "session 1, turn 1: 'role'" in capsys.readouterr().err  # counted from 1
    # An oracle written for another script is refused before anything runs.
    wrong = tmp_path / "wrong_oracle.json"
    wrong.write_text(
        json.dumps({"turns": [{"session": 0, "turn": 1, "user_starts": "Hey", "long_term": []}]}),
        encoding="utf-8",
    )
    args = ["--script", str(script), "--config", str(config), "--hippocampus", "perfect"]
    assert memory_formation.main([*args, "--oracle", str(wrong)]) == 2
    assert "does not belong to this script" in capsys.readouterr().err
    unknown = ["--script", str(script), "--config", str(config), "--persona", "nobody"]
    assert memory_formation.main(unknown) == 2
    assert "unknown persona 'nobody'" in capsys.readouterr().err


def test_the_shipped_conversations_and_oracles_match() -> None:
    data = REPO / "bench" / "data"
    for stem, persona in memory_formation.DEFAULT_PERSONAS.items():
        script = memory_formation.load_script(data / "eval" / "conversations" / f"{stem}.json")
        facts = memory_formation.load_oracle(memory_formation.oracle_path(script), script)
        assert len(script.sessions) == 5 and sum(1 for t in script.turns if t.probe) == 7
        assert facts and all(key[0] < 4 for key in facts)  # nothing learnt from the probes
        assert (REPO / "personas" / f"{persona}.json").is_file()


def test_the_oracles_ideal_facts_are_all_correct_by_the_gold() -> None:
    """The gold and the judge agree with the hand-written ideal facts: every one of them
    states a fact the user said by then, about the one it names."""
    data = REPO / "bench" / "data"
    for stem in memory_formation.DEFAULT_PERSONAS:
        script = memory_formation.load_script(data / "eval" / "conversations" / f"{stem}.json")
        gold = entity_judge.load_gold(entity_judge.gold_path(script), script)
        facts = memory_formation.load_oracle(memory_formation.oracle_path(script), script)
        numbers = {(t.session, t.index): t.number for t in script.turns}
        for (session, turn), items in facts.items():
            for item in items:
                judged = entity_judge.judge_memory(item["content"], gold, numbers[(session, turn)])
                assert judged.verdict == "correct", (stem, item["content"], judged.reason)


class EchoingCompactHippocampus(FakeChatModel):
    """A compact-contract hippocampus that states every message it is shown as a fact
    (the new one, and the catch-up batch of messages failed runs never read)."""

    def __init__(self) -> None:
        super().__init__("echoing-compact-hippocampus")
        self.shown: list[list[str]] = []

    async def stream(self, messages, **kwargs):  # type: ignore[no-untyped-def, override]
        data = messages[-1]["content"]
        lines = data.split("\n")[1:]
        shown = [line.removeprefix("- ") for line in lines if line.strip()]
        self.shown.append(shown)
        facts = [f"The user said: {text}" for text in shown if "?" not in text]
        self.enqueue([json.dumps({"facts": facts, "emotion": "calm"})])
        async for delta in super().stream(messages, **kwargs):
            yield delta


def test_failed_runs_lose_no_facts(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--fail-every 2: runs 2, 4 and 6 fail; each failed turn's message is read by the next
    working run (compact mode's catch-up), so its fact is still formed and recalled."""
    config = tmp_path / "compact.json"
    unused = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "unused"}
    config.write_text(
        json.dumps(
            {
                "chat": unused,
                "hippocampus": {**unused, "mode": "compact"},
                "server": {"personas_dir": str(REPO / "personas")},
            }
        ),
        encoding="utf-8",
    )
    hippocampus = EchoingCompactHippocampus()
    code = memory_formation.main(
        ["--script", str(script), "--config", str(config), "--fail-every", "2", "--quiet"],
        hippocampus_factory=lambda _script: hippocampus,
    )
    out = capsys.readouterr().out
    assert code == 0, out
    numbers = last_line(out)
    assert (numbers["valid"], numbers["runs"]) == ("3", "6")
    assert numbers["passed"] == numbers["probes"] == "2"  # Biscuit (failed turn 2) recalled
    # Run 3 read turn 2's message (whose run failed) with its own.
    assert hippocampus.shown[1] == [SCRIPT[0][2]["content"], SCRIPT[0][4]["content"]]
    assert re.search(r"^probe 1 \[dog\] PASS .*My dog Biscuit", out, re.M)
