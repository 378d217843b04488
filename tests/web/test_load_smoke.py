"""Smoke test of the load test (``bench/load_test.py``) at a tiny size: every turn
succeeds and no session's markers show up in another's transcript, memories or upstream
prompts. Behaviour only: no timing is asserted."""

from __future__ import annotations

import pytest

from bench import load_test


@pytest.mark.slow
def test_load_test_small_run_has_no_errors_and_keeps_sessions_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = load_test.main(["--sessions", "5", "--turns", "3", "--timeout-s", "120"])
    assert result["errors"] == 0, result["error_samples"]
    assert result["turns_done"] == 15
    assert result["isolation_ok"], result["isolation_problems"]
    out = capsys.readouterr().out
    assert "| isolation check | passed |" in out
    assert "command: python -m bench.load_test --sessions 5 --turns 3" in out


@pytest.mark.slow
def test_load_test_with_persistent_chroma_and_minilm(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--sessions", "3", "--turns", "2", "--store", "chroma", "--embedder", "minilm"]
    result = load_test.main([*argv, "--timeout-s", "120"])
    assert result["errors"] == 0, result["error_samples"]
    assert result["turns_done"] == 6
    assert result["isolation_ok"], result["isolation_problems"]
    assert result["store_kind"] == "ChromaVectorStore"
    assert result["embedder_model"].startswith("all-MiniLM-L6-v2")
    assert "| store / embedder | ChromaVectorStore / all-MiniLM" in capsys.readouterr().out
