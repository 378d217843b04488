"""Smoke tests of ``bench.locomo_retrieval``: it skips without the data file, and on a
tiny invented LoCoMo-shaped file (2 sessions, 7 questions; a bag-of-words embedder) it
converts, scores every strategy both ways (ours, and LoCoMo's own definition) and ends
with ``locomo_recall@8=<x>`` and ``evidence_recall@8=<x>``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from bench import locomo_retrieval
from tests.stores.fakes import BagOfWordsEmbedder

SESSION_1 = [
    ("Ana", "I adopted a grey kitten called Pixel last week."),
    ("Bo", "Lovely! I started learning the cello in March."),
    ("Ana", "Pixel sleeps on my keyboard every morning."),
    ("Bo", "My cello teacher lives near the harbour.", "a cello leaning on a chair"),
]
SESSION_2 = [
    ("Ana", "I moved to a flat with a balcony full of tomatoes."),
    ("Bo", "I played my first cello concert on Saturday."),
    ("Ana", "Pixel learned to open the kitchen drawer."),
    ("Bo", "Next I want to try the double bass."),
]


def _session(number: int, turns: list[tuple[str, ...]]) -> list[dict[str, str]]:
    rows = []
    for i, (speaker, text, *caption) in enumerate(turns, start=1):
        row = {"speaker": speaker, "dia_id": f"D{number}:{i}", "text": text}
        if caption:
            row["blip_caption"] = caption[0]
        rows.append(row)
    return rows


def _locomo_like(path: Path) -> Path:
    sample = {
        "sample_id": "toy-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Bo",
            "session_1_date_time": "10:00 am on 3 March, 2024",
            "session_1": _session(1, SESSION_1),
            "session_2_date_time": "6:30 pm on 20 April, 2024",
            "session_2": _session(2, SESSION_2),
        },
        "qa": [
            {"question": "What is the name of Ana's kitten?", "answer": "Pixel",
             "evidence": ["D1:1"], "category": 4},
            {"question": "When did Bo play a cello concert?", "answer": "April 2024",
             "evidence": ["D2:2"], "category": 2},
            {"question": "What does Pixel do?", "answer": "sleeps, opens drawers",
             "evidence": ["D1:3", "D2:3"], "category": 1},
            {"question": "What colour is the bass?", "answer": "none",
             "evidence": [], "category": 5},
            # LoCoMo's own count differs on these three (the file has such questions):
            # no evidence (1 in theirs, left out of ours), an entry that names no turn
            # ("D30:05" for "D30:5": 0 in theirs, left out of ours), a duplicated entry
            # and a malformed one (2/3 in theirs when D1:1 is returned, 1 in ours).
            {"question": "Would Ana like a dog?", "answer": "Likely yes; she loves pets",
             "evidence": [], "category": 3},
            {"question": "When did Ana move?", "answer": "April 2024",
             "evidence": ["D2:01"], "category": 2},
            {"question": "Which pets does Ana have?", "answer": "a kitten",
             "evidence": ["D1:1", "D1:1", "D:1:3"], "category": 1},
        ],
    }  # fmt: skip
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def test_skips_without_the_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "locomo10.json"
    assert locomo_retrieval.main(["--data", str(missing)]) == 0
    out = capsys.readouterr().out
    assert "no LoCoMo data" in out and "skipped" in out and str(missing) in out


def test_converts_turns_and_questions(tmp_path: Path) -> None:
    data = json.loads(_locomo_like(tmp_path / "toy.json").read_text(encoding="utf-8"))
    conv = locomo_retrieval.convert(data[0])
    assert len(conv.rows) == 8
    first = conv.rows[0]
    assert first["id"] == first["topic"] == "D1:1"
    assert first["content"].startswith("Ana: I adopted")
    assert conv.rows[3]["content"].endswith("[shares a photo: a cello leaning on a chair]")
    assert conv.rows[0]["created_days_ago"] == 48 and conv.rows[4]["created_days_ago"] == 0
    # category 5 and questions without evidence that names a turn are left out
    assert [q["needed_topics"] for q in conv.queries] == [
        ["D1:1"], ["D2:2"], ["D1:3", "D2:3"], ["D1:1"]
    ]  # fmt: skip
    # LoCoMo's own evaluation counts every question of categories 1-4, evidence as written
    assert [(a.category, a.evidence) for a in conv.asked] == [
        (4, ("D1:1",)), (2, ("D2:2",)), (1, ("D1:3", "D2:3")), (3, ()), (2, ("D2:01",)),
        (1, ("D1:1", "D1:1", "D:1:3")),
    ]  # fmt: skip
    assert [a.query_id for a in conv.asked] == ["q0000", "q0001", "q0002", None, None, "q0006"]


def test_locomo_recall_is_the_benchmarks_definition() -> None:
    recall = locomo_retrieval.locomo_recall
    assert recall([], []) == 1.0  # no evidence counts 1
    assert recall(["D1:1", "D2:2"], ["D2:2", "D5:5"]) == 0.5
    assert recall(["D1:1", "D1:1", "D9:99"], ["D1:1"]) == 2 / 3  # as written, duplicates too
    assert recall(["D2:01"], ["D2:1"]) == 0.0  # an entry naming no turn is never found


def test_runs_on_a_tiny_locomo_like_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _locomo_like(tmp_path / "toy.json")
    assert locomo_retrieval.main(["--data", str(data)], embedder=BagOfWordsEmbedder()) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"evidence_recall@8=[01]\.\d{3}", lines[-1]), lines[-1]
    # 8 turns and k=8: everything is returned; LoCoMo's recall is (1+1+1+1+0+2/3)/6
    assert lines[-2] == "locomo_recall@8=0.778", lines[-2]
    assert lines[-1] == "evidence_recall@8=1.000", lines[-1]
    rows = [line for line in lines if line.startswith("| ")]
    for name in (
        locomo_retrieval.NAIVE,
        locomo_retrieval.HYBRID_ONLY,
        locomo_retrieval.NO_RERANK,
        locomo_retrieval.NO_DIVERSITY,
        locomo_retrieval.COLLAPSE_ONLY,
        locomo_retrieval.GIST_ONLY,
        locomo_retrieval.NO_FLOOR,
        locomo_retrieval.APP_DEFAULT,
    ):
        assert any(row.startswith(f"| {name} |") for row in rows), name
    assert any(row.startswith("| toy-1 (4) |") for row in rows)
    # 8 turns and k=8: naive top-k returns every turn, so it finds all the evidence
    naive = [row for row in rows if row.startswith(f"| {locomo_retrieval.NAIVE} |")]
    assert naive[0].split("|")[2].strip() == "1.000"
    # both tables name the categories as LoCoMo's code does, with their numbers
    headers = [row for row in rows if row.startswith("| strategy |")]
    assert "1 multi-hop (2) | 2 temporal (1) | 4 single-hop (1)" in headers[0]
    assert "1 multi-hop (2) | 2 temporal (2) | 3 open-domain (1) | 4 single-hop (1)" in headers[1]
    assert [cell.strip() for cell in naive[1].split("|")[2:7]] == [
        "0.778", "0.833", "0.500", "1.000", "1.000"
    ]  # fmt: skip


class Scripted:
    """A reranker that finds the kitten relevant, and counts the pairs it reads."""

    model = "scripted"

    def __init__(self) -> None:
        self.pairs = 0

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.pairs += len(passages)
        return [0.9 if "Pixel" in p else 0.1 for p in passages]


def test_every_stage_on_and_off_with_its_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _locomo_like(tmp_path / "toy.json")
    model = Scripted()
    code = locomo_retrieval.main(
        ["--data", str(data), "--k", "2"], embedder=BagOfWordsEmbedder(), reranker=model
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "reranker=scripted" in out
    cost = out.split("the cost of each strategy")[1]
    rows = {line.split("|")[1].strip(): line for line in cost.splitlines() if line.startswith("| ")}
    # each traced strategy has its time and the pairs it handed to the reranker
    reranked = {
        name: float(row.split("|")[4])
        for name, row in rows.items()
        if name not in ("strategy", "---")
    }
    assert reranked[locomo_retrieval.NO_RERANK] == reranked[locomo_retrieval.HYBRID_ONLY] == 0
    assert reranked[locomo_retrieval.APP_DEFAULT] > 0
    assert reranked[locomo_retrieval.NO_FLOOR] >= reranked[locomo_retrieval.APP_DEFAULT]
    # the answers are kept: strategies with the same top n do not run the model again;
    # only the app default and the floorless one (a longer top n) ran it, 4 questions each
    assert "cross-encoder: 8 runs of the model" in out
    ran = reranked[locomo_retrieval.APP_DEFAULT] + reranked[locomo_retrieval.NO_FLOOR]
    assert model.pairs == round(4 * ran)


def test_the_sweep_prints_the_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _locomo_like(tmp_path / "toy.json")
    model = Scripted()
    code = locomo_retrieval.main(
        ["--data", str(data), "--sweep"], embedder=BagOfWordsEmbedder(), reranker=model
    )
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if re.match(r"\| \d+ \|", line)]
    assert [int(row.split("|")[1]) for row in rows] == list(locomo_retrieval.SWEEP_N)
    assert all(len(row.split("|")) == len(locomo_retrieval.SWEEP_WEIGHTS) + 3 for row in rows)
    assert model.pairs <= 8 * 4  # each (question, turn) pair read once
    assert (
        locomo_retrieval.main(
            ["--data", str(data), "--sweep"], embedder=BagOfWordsEmbedder(), reranker=None
        )
        == 2
    )
