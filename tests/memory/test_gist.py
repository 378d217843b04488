"""GIST selection: the golden fixture, the CLI runner, every error and tie rule, divsel parity."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.cli.gist_conformance import run_cases
from backend.memory import gist
from backend.memory.gist import GistResult, distance_matrix, gist_select
from tests.support import require_module

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN = "golden-selection.json"
# The Rust reference (PyPI divsel), a --dev extra.
DIVSEL = "./install.sh --dev installs it (pip install 'divsel>=0.1,<0.2')"


def _tol(x: float) -> float:
    return 1e-6 * max(1.0, abs(x))


def _cases(fixtures_dir: Path) -> list[dict[str, Any]]:
    return json.loads((fixtures_dir / GOLDEN).read_text(encoding="utf-8"))["cases"]


def _cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend.cli.gist_conformance", str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# ---- conformance -----------------------------------------------------------------------


def test_golden_selection_all_cases_pass(fixtures_dir: Path) -> None:
    cases = _cases(fixtures_dir)
    assert len(cases) == 22
    lines, failed = run_cases(cases)
    assert failed == 0, "\n".join(line for line in lines if line.startswith("FAIL"))
    assert lines == [f"PASS {case['name']}" for case in cases]


def test_cli_passes_the_golden_file(fixtures_dir: Path) -> None:
    proc = _cli(fixtures_dir / GOLDEN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "22 passed, 0 failed"


def test_cli_reports_an_altered_case(fixtures_dir: Path, tmp_path: Path) -> None:
    data = json.loads((fixtures_dir / GOLDEN).read_text(encoding="utf-8"))
    victim = data["cases"][3]
    victim["expected_selected"] = list(reversed(victim["expected_selected"]))
    altered = tmp_path / "altered.json"
    altered.write_text(json.dumps(data), encoding="utf-8")
    proc = _cli(altered)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[-1] == "21 passed, 1 failed"
    assert [line for line in lines if line.startswith("FAIL")] == [
        line for line in lines if line.startswith(f"FAIL {victim['name']}: selected")
    ]


@pytest.mark.parametrize("content", [None, "{not json", '{"cases": 3}'])
def test_cli_unreadable_file_exits_2(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "input.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    proc = _cli(path)
    assert proc.returncode == 2
    assert "cannot read" in proc.stderr


# ---- errors ----------------------------------------------------------------------------

LINE = np.array([[0.0], [1.0], [3.0]], dtype=np.float32)


@pytest.mark.parametrize(
    ("vectors", "utilities", "kwargs", "message"),
    [
        (np.zeros((0, 3)), None, {}, "empty input"),
        (np.zeros((3, 0)), None, {}, "zero dimension"),
        ([1.0, 2.0], None, {}, "2-D"),
        ([[1.0, np.nan]], None, {"metric": "cosine"}, "NaN or infinite"),
        ([[1.0, np.inf]], None, {"metric": "euclidean"}, "NaN or infinite"),
        ([[1.0, 0.0], [0.0, 0.0]], None, {"metric": "cosine"}, "row 1 cannot be L2-normalised"),
        ([[1e30, 1e30]], None, {"metric": "cosine"}, "row 0 cannot be L2-normalised"),
        (LINE, None, {"k": 0}, "k must be a positive integer"),
        (LINE, None, {"k": -2}, "k must be a positive integer"),
        (LINE, None, {"k": True}, "not a bool"),
        (LINE, None, {"k": 1.5}, "k must be a positive integer"),
        (LINE, None, {"eps": 0.0}, "eps must be in"),
        (LINE, None, {"eps": 1e-8}, "eps must be in"),
        (LINE, None, {"eps": 1.5}, "eps must be in"),
        (LINE, None, {"eps": math.nan}, "eps must be in"),
        (LINE, None, {"lam": -0.5}, "lam must be finite"),
        (LINE, None, {"lam": math.nan}, "lam must be finite"),
        (LINE, None, {"lam": math.inf}, "lam must be finite"),
        (LINE, [1.0, 2.0], {}, "3 weights"),
        (LINE, [1.0, -1.0, 2.0], {}, "weight 1"),
        (LINE, [1.0, math.nan, 2.0], {}, "weight 1"),
        (LINE, [1.0, 2.0, math.inf], {}, "weight 2"),
        (LINE, [[1], [2], [3]], {}, "3 weights"),
        (LINE, ["a", "b", "c"], {}, "numeric weights"),
        (LINE, None, {"utility": "coverage"}, "sequence of n item-id lists"),
        (LINE, [[0], [1]], {"utility": "coverage"}, "3 rows"),
        (LINE, [[0], [-1], [2]], {"utility": "coverage"}, "negative"),
        (LINE, [[0], [1.5], [2]], {"utility": "coverage"}, "not an integer"),
        (LINE, [[0], [True], [2]], {"utility": "coverage"}, "not an integer"),
        (LINE, [[0], 1, [2]], {"utility": "coverage"}, "row 1"),
        (LINE, "abc", {"utility": "coverage"}, "sequence of n item-id lists"),
        (LINE, [1.0, 1.0, 1.0], {"utility": "facility_location"}, "takes no utilities"),
        (LINE, None, {"metric": "manhattan"}, "unknown metric"),
        (LINE, None, {"utility": "entropy"}, "unknown utility"),
        (LINE, None, {"diameter": "guess"}, "unknown diameter"),
        (LINE, None, {"diameter_sweeps": -1}, "diameter_sweeps"),
        (LINE, None, {"diameter_sweeps": True}, "diameter_sweeps"),
        (LINE, None, {"distances": np.zeros((2, 2))}, "distances must be"),
    ],
)
def test_errors_are_value_errors(
    vectors: Any, utilities: Any, kwargs: dict[str, Any], message: str
) -> None:
    options: dict[str, Any] = {"k": 2, "metric": "euclidean"} | kwargs
    with pytest.raises(ValueError, match=message):
        gist_select(vectors, utilities, **options)


def test_eps_one_is_accepted_and_just_below_float32_epsilon_is_not() -> None:
    # (eps == float32 epsilon itself is legal but builds ~1.4e8 thresholds: not run here.)
    assert gist_select(LINE, k=2, eps=1.0, metric="euclidean").selected == (0, 2)
    with pytest.raises(ValueError, match="eps must be in"):
        gist_select(LINE, k=2, eps=float(np.finfo(np.float32).eps) / 2, metric="euclidean")


def test_distance_matrix_rejects_unknown_metric() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        distance_matrix(LINE, "hamming")  # type: ignore[arg-type]


# ---- tie rules and special cases ------------------------------------------------------


def test_greedy_ties_go_to_the_lowest_index() -> None:
    vectors = np.array([[0.0], [0.0], [0.0], [0.0]], dtype=np.float32)
    result = gist_select(vectors, [1.0, 2.0, 2.0, 2.0], k=2, lam=0.0, metric="euclidean")
    assert result.selected == (1, 2)


def test_negative_zero_weight_ranks_below_positive_zero() -> None:
    # A total order on floats puts -0.0 below +0.0, as the reference's argmax does.
    vectors = np.array([[0.0], [1.0]], dtype=np.float32)
    result = gist_select(vectors, [-0.0, 0.0], k=1, lam=0.0, metric="euclidean")
    assert result.selected == (1,)


def test_exact_diameter_tie_resolves_to_the_smallest_pair() -> None:
    vectors = np.array([[-4.0], [-4.0], [0.0], [4.0]], dtype=np.float32)
    result = gist_select(vectors, [1.0, 1.0, 1.5, 1.0], k=2, lam=1.0, metric="euclidean")
    assert (result.selected, result.stage, result.threshold) == ((0, 3), "diameter_pair", 8.0)


def test_sweep_fold_reports_the_largest_tying_threshold() -> None:
    vectors = np.array([[0.0], [4.0]], dtype=np.float32)
    result = gist_select(vectors, k=2, lam=1.0, metric="euclidean")
    top = float(np.float32(1.1**31 * float(np.float32(0.1)) * 4.0 / 2.0))
    assert (result.stage, result.threshold, result.selected) == ("sweep", top, (0, 1))


def test_coincident_points_skip_the_sweep_but_not_the_pair() -> None:
    vectors = np.zeros((3, 1), dtype=np.float32)
    sets = [[0, 1, 2], [3, 4, 5], [0, 1, 3, 4]]
    for mode in ("exact", "approx"):
        result = gist_select(
            vectors, sets, k=2, metric="euclidean", utility="coverage", diameter=mode
        )
        assert (result.selected, result.stage, result.threshold) == ((0, 1), "diameter_pair", 0.0)
        assert (result.d_max, result.div, result.g) == (0.0, 0.0, 6.0)


def test_single_point_is_greedy_with_div_equal_to_d_max() -> None:
    result = gist_select([[1.0, 2.0]], k=3)
    assert result == GistResult((0,), 1.0, 1.0, 0.0, 0.0, "greedy", 0.0)


def test_lam_zero_with_infinite_div_is_g_not_nan() -> None:
    vectors = np.array([[-3e38], [3e38]], dtype=np.float32)
    result = gist_select(vectors, k=2, lam=0.0, metric="euclidean")
    assert (result.f, result.g, result.stage) == (2.0, 2.0, "sweep")
    assert math.isinf(result.div) and math.isinf(result.d_max) and math.isinf(result.threshold)


def _naive_greedy(dist: np.ndarray, gain_of: Any, k: int) -> list[int]:
    chosen: list[int] = []
    for _ in range(min(k, len(dist))):
        gains = [(gain_of(v, chosen), -v) for v in range(len(dist)) if v not in chosen]
        chosen.append(-max(gains)[1])
    return chosen


@pytest.mark.parametrize("utility", ["linear", "coverage", "facility_location"])
def test_lam_zero_is_pure_greedy(utility: Any) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.integers(-8, 9, size=(9, 3)).astype(np.float32) / 4
    dist = distance_matrix(vectors, "euclidean").astype(np.float64)
    weights = 2.0 ** rng.permutation(9)  # distinct subset sums: a unique best set
    sets = [set(rng.integers(0, 10, size=3).tolist()) for _ in range(9)]
    sim = np.maximum(0.0, 1.0 - dist / dist.max())

    def gain(v: int, chosen: list[int]) -> float:
        if utility == "linear":
            return float(weights[v])
        if utility == "coverage":
            return float(len(sets[v] - set().union(*(sets[c] for c in chosen))))
        best = sim[:, chosen].max(axis=1) if chosen else np.zeros(9)
        return float(np.maximum(sim[:, v] - best, 0.0).sum())

    utilities: Any = {"linear": weights, "coverage": [sorted(s) for s in sets]}.get(utility)
    result = gist_select(vectors, utilities, k=4, lam=0.0, metric="euclidean", utility=utility)
    greedy = _naive_greedy(dist, gain, 4)
    greedy_g = sum(gain(v, greedy[:i]) for i, v in enumerate(greedy))
    assert result.f == result.g  # lam == 0: exactly g
    # The sweep may only tie or beat greedy on g (>= fold); linear greedy is optimal.
    assert result.g >= greedy_g - 1e-12
    if utility == "linear" or result.stage == "greedy":
        assert list(result.selected) == greedy


def test_k_larger_than_n_clamps_and_short_results_are_normal() -> None:
    assert gist_select(LINE, k=10, lam=0.25, metric="euclidean").selected == (0, 1, 2)
    square = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [3.0, 4.0]], dtype=np.float32)
    assert gist_select(square, k=3, lam=1.0, metric="euclidean").selected == (0, 3)


def test_approx_diameter_sweeps_default_and_clamp() -> None:
    x = np.random.default_rng(8).integers(-64, 65, size=(12, 2)).astype(np.float32) / 16
    run = {
        s: gist_select(x, k=3, metric="euclidean", diameter="approx", diameter_sweeps=s)
        for s in (None, 0, 1, 3, 12, 10**12)
    }
    assert run[None] == run[3]  # None means divsel's default of 3 sweeps
    assert run[0] == run[1]  # 0 means 1
    assert run[10**12] == run[12]  # more than n sweeps cannot find anything new (and is fast)
    exact = distance_matrix(x, "euclidean").max()
    assert exact / 2 <= run[None].d_max <= exact


# ---- distances -------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("shape", [(7, 3), (120, 40)])  # replayed kernel / matmul path
def test_distance_matrix_shape_symmetry_and_accuracy(metric: Any, shape: tuple[int, int]) -> None:
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    d = distance_matrix(x, metric)
    assert d.dtype == np.float32 and d.shape == (shape[0], shape[0])
    assert np.array_equal(d, d.T) and not np.diagonal(d).any()
    x64 = x.astype(np.float64)
    if metric == "cosine":
        u = x64 / np.linalg.norm(x64, axis=1, keepdims=True)
        want = np.clip(1.0 - u @ u.T, 0.0, 2.0)
    else:
        want = np.linalg.norm(x64[:, None] - x64[None], axis=-1)
    np.fill_diagonal(want, 0.0)
    assert np.allclose(d, want, rtol=1e-5, atol=1e-6)
    assert d.min() >= 0.0 and (metric == "euclidean" or d.max() <= 2.0)


def _scalar_lane_sum(terms: np.ndarray) -> np.ndarray:
    # divsel's kernel, literally: 16 float32 lanes, element i into lane i % 16, then the
    # lanes left to right.
    out = np.zeros(len(terms), dtype=np.float32)
    for r, row in enumerate(terms):
        lanes = [np.float32(0.0)] * 16
        for i, value in enumerate(row):
            lanes[i % 16] = np.float32(lanes[i % 16] + value)
        total = np.float32(0.0)
        for lane in lanes:
            total = np.float32(total + lane)
        out[r] = total
    return out


@pytest.mark.parametrize("shape", [(1, 1), (1, 37), (3, 16), (5, 40), (2, 384)])
def test_small_inputs_replay_the_reference_summation_order(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[1])
    terms = (rng.standard_normal(shape) * 10 ** rng.uniform(-3, 3, shape)).astype(np.float32)
    assert np.array_equal(gist._lane_sum(terms), _scalar_lane_sum(terms))


def test_duplicate_rows_are_at_distance_zero_on_the_matmul_path() -> None:
    x = np.random.default_rng(4).standard_normal((100, 40)).astype(np.float32) * 100
    x[57] = x[3]
    assert distance_matrix(x, "euclidean")[3, 57] == 0.0


def test_precomputed_distances_give_the_same_result() -> None:
    x = np.random.default_rng(5).standard_normal((30, 8)).astype(np.float32)
    weights = np.linspace(0.1, 3.0, 30)
    direct = gist_select(x, weights, k=5)
    reused = gist_select(x, weights, k=5, distances=distance_matrix(x, "cosine"))
    assert direct == reused


def test_threshold_chunking_does_not_change_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(6).integers(-16, 17, size=(14, 2)).astype(np.float32) / 4
    weights = np.random.default_rng(6).integers(0, 9, size=14) / 4
    for exhaustive in (False, True):
        for utility, u in (("linear", weights), ("facility_location", None)):
            kwargs: dict[str, Any] = {"k": 4, "lam": 1.0, "metric": "euclidean"}
            kwargs |= {"utility": utility, "exhaustive_thresholds": exhaustive}
            whole = gist_select(x, u, **kwargs)
            monkeypatch.setattr(gist, "_CHUNK_ELEMS", 20)
            chunked = gist_select(x, u, **kwargs)
            monkeypatch.undo()
            assert chunked == whole


# ---- parity with the Rust reference ----------------------------------------------------

dyadic = st.integers(-256, 256).map(lambda v: v / 64)


@st.composite
def instances(draw: st.DrawFn) -> tuple[np.ndarray, Any, dict[str, Any]]:
    n = draw(st.integers(1, 8))
    dim = draw(st.integers(1, 3))
    metric = draw(st.sampled_from(["euclidean", "cosine"]))
    rows = draw(st.lists(st.lists(dyadic, min_size=dim, max_size=dim), min_size=n, max_size=n))
    vectors = np.array(rows, dtype=np.float32)
    if metric == "cosine":
        vectors[~vectors.any(axis=1), 0] = 1.0  # cosine needs non-zero rows
    utility = draw(st.sampled_from(["linear", "coverage", "facility_location"]))
    utilities: Any = None
    if utility == "linear" and draw(st.booleans()):
        weights = draw(st.lists(st.integers(0, 16), min_size=n, max_size=n))
        utilities = np.array(weights, dtype=np.float64) / 4
    elif utility == "coverage":
        item_lists = st.lists(st.integers(0, 7), max_size=4)
        utilities = draw(st.lists(item_lists, min_size=n, max_size=n))
    options = {
        "k": draw(st.integers(1, 5)),
        "lam": draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 4.0])),
        "eps": draw(st.sampled_from([0.1, 0.25, 0.5, 1.0])),
        "metric": metric,
        "utility": utility,
        "exhaustive_thresholds": draw(st.booleans()),
        "diameter": draw(st.sampled_from(["exact", "approx"])),
        "diameter_sweeps": draw(st.sampled_from([None, 0, 1, 2, 3, 20])),
    }
    return vectors, utilities, options


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(instances())
def test_matches_divsel(instance: tuple[np.ndarray, Any, dict[str, Any]]) -> None:
    divsel = require_module("divsel", DIVSEL)
    vectors, utilities, options = instance
    ours = gist_select(vectors, utilities, **options)
    ref = divsel.gist_select_full(vectors, utilities, **options)
    assert list(ours.selected) == ref["selected"]
    assert ours.stage == ref["stage"]
    for field, key in (
        ("g", "g_value"),
        ("div", "div"),
        ("threshold", "threshold"),
        ("d_max", "d_max"),
    ):
        assert abs(getattr(ours, field) - ref[key]) <= _tol(ref[key]), field
    f_tol = _tol(ref["g_value"]) + options["lam"] * _tol(ref["div"])
    assert abs(ours.f - ref["f_value"]) <= f_tol


def test_matches_divsel_on_the_hot_path_shape() -> None:
    divsel = require_module("divsel", DIVSEL)
    rng = np.random.default_rng(11)
    for n in (50, 300):
        vectors = rng.standard_normal((n, 384)).astype(np.float32)
        weights = rng.random(n)
        ours = gist_select(vectors, weights, k=8, lam=0.5)
        ref = divsel.gist_select_full(vectors, weights, k=8, lam=0.5)
        assert (list(ours.selected), ours.stage) == (ref["selected"], ref["stage"])
        assert abs(ours.f - ref["f_value"]) <= 1e-5 * max(1.0, abs(ref["f_value"]))
