"""Smoke tests of the turn benchmarks: each ``main()`` runs at tiny sizes and prints its
tables with the expected columns. Behaviour only: no timing is asserted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench import prompt_size, turn_latency


def _header(out: str, first_cell: str) -> list[str]:
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table starting with {first_cell!r} in:\n{out}")


def _rows(out: str, header: list[str]) -> list[list[str]]:
    lines = out.splitlines()
    start = next(
        i
        for i, line in enumerate(lines)
        if line.startswith("|") and line.strip("|").split("|")[0].strip() == header[0]
    )
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_turn_latency_prints_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    code = turn_latency.main(
        [
            "--memories", "50", "--base-sentences", "20", "--repeats", "3", "--warmup", "1",
            "--ttft-ms", "20", "--chunks", "4", "--chunk-ms", "1", "--ttft-hippo-ms", "10",
            "--hippo-ms", "5", "40", "--wall-repeats", "2",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("command: python -m bench.turn_latency")
    assert "nproc" in out and "load average" in out
    assert "50 memories in Chroma" in out
    assert "use-multilingual-v3" in out  # the app's default embedder, both its parts
    ttft = _header(out, "measure")
    assert ttft == ["measure", "p50 ms", "p95 ms"]
    labels = [row[0] for row in _rows(out, ttft)]
    assert any(label.startswith("app TTFT") for label in labels)
    assert any(label.startswith("upstream TTFT") for label in labels)
    assert any("overhead" in label for label in labels)
    assert any("embed_ms" in label for label in labels)
    assert any("search_ms" in label for label in labels)
    wall = _header(out, "main (scripted)")
    assert wall == [
        "main (scripted)", "hippocampus (scripted)", "main alone p50 ms",
        "hippocampus alone p50 ms", "max p50 ms", "turn wall p50 ms", "ratio p50",
        "ratio p95", "begin → last token p50 ms", "last token → merged p50 ms",
    ]  # fmt: skip
    rows = _rows(out, wall)
    assert [row[1] for row in rows] == ["5 ms", "40 ms"]
    assert all(float(row[6]) > 0 for row in rows)
    assert "Hippocampus failures: 0." in out


def test_prompt_size_prints_the_table_and_writes_the_plot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    png = tmp_path / "prompt_size.png"
    code = prompt_size.main(["--turns", "12", "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 0
    header = _header(out, "turn")
    assert header == [
        "turn", "ours, hippocampus", "ours, fallback", "full history", "full ÷ ours",
        "short-term, hippocampus", "short-term, fallback",
    ]  # fmt: skip
    rows = _rows(out, header)
    assert [row[0] for row in rows] == ["1", "10", "12"]
    first = rows[0]
    assert first[1] == first[2] == first[3]  # turn 1: nothing to compress yet
    last = rows[-1]
    assert int(last[1]) < int(last[3]) and int(last[2]) <= int(last[3])
    assert "hippocampus failures: 0 (hippocampus run), 12 (fallback run)" in out
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.read_bytes().startswith(b"\x89PNG")
    else:
        assert "matplotlib is not installed" in out


def test_channel_slices_prints_a_row_per_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tiny corpus in the eval format (invented): one row per channel weight."""
    import json

    from bench import channel_slices

    memories = [
        {"id": "m1", "content": "The user's cat is called Dumpling", "topic": "cat",
         "category": "relationship", "importance": 0.8, "created_days_ago": 3,
         "last_access_days_ago": 3},
        {"id": "m2", "content": "The user runs every morning", "topic": "run",
         "category": "preference", "importance": 0.6, "created_days_ago": 1,
         "last_access_days_ago": 1},
    ]  # fmt: skip
    queries = [
        {"id": "q1", "text": "What is my cat called?", "relevant": ["m1"],
         "needed_topics": ["cat"], "target_emotion": None, "stale": [], "tags": ["emotional"]},
    ]  # fmt: skip
    (tmp_path / "memories.jsonl").write_text("\n".join(json.dumps(m) for m in memories))
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    assert channel_slices.main(["--corpus", str(tmp_path), "--weights", "0.1"]) == 0
    header = _header(capsys.readouterr().out, "hybrid weights")
    assert header[1] == "recall@8" and "emotional recall" in header


def test_model_speed_prints_its_three_rows(capsys: pytest.CaptureFixture[str]) -> None:
    from backend.llm import presets
    from bench import model_speed

    small = "smollm2-135m"  # installed by ./install.sh --dev (the real-model tests' preset)
    if importlib.util.find_spec("llama_cpp") is None or presets.preset_path(small) is None:
        pytest.skip("the embedded model is not installed")
    args = ["--chat", small, "--beside", small, "--repeat", "1", "--tokens", "4"]
    assert model_speed.main(args) == 0
    out = capsys.readouterr().out
    header = _header(out, small)
    assert header == [small, "prompt tokens/s", "generated tokens/s"]
    assert [row[0] for row in _rows(out, header)] == ["alone", "beside, idle", "beside, busy"]
    assert "load average" in out


def test_model_speed_names_a_missing_preset(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import model_speed

    assert model_speed.main(["--chat", "no-such-preset"]) == 1
    assert "error:" in capsys.readouterr().err
