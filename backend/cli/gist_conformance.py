"""Conformance runner for files in the golden-selection schema.

``python -m backend.cli.gist_conformance FILE`` runs every
case, prints ``PASS name`` or ``FAIL name: what differs`` per case, then ``N passed, M failed``.
Exit 0 when all pass, 1 when any fails, 2 when the file cannot be read. ``selected`` (in
order) and ``stage`` must match exactly; ``g``, ``div``, ``threshold`` and ``d_max`` within
``tol(x) = 1e-6 * max(1, |x|)``; ``f`` within ``tol(g) + lam * tol(div)`` (docs/memory-model.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from backend.memory.gist import gist_select

REL_TOL = 1e-6


def _tol(x: float) -> float:
    return REL_TOL * max(1.0, abs(x))


def check_case(case: Mapping[str, Any]) -> list[str]:
    """What differs between ``gist_select`` on this case and its expected fields (empty: pass)."""
    result = gist_select(
        case["vectors"],
        case.get("utilities"),
        k=case["k"],
        lam=case["lam"],
        eps=case["eps"],
        metric=case["metric"],
        utility=case["utility"],
        exhaustive_thresholds=bool(case.get("exhaustive_thresholds", False)),
        diameter=case.get("diameter", "exact"),
        diameter_sweeps=case.get("diameter_sweeps"),
    )
    problems: list[str] = []
    if list(result.selected) != list(case["expected_selected"]):
        problems.append(f"selected {list(result.selected)} != {case['expected_selected']}")
    if result.stage != case["expected_stage"]:
        problems.append(f"stage {result.stage!r} != {case['expected_stage']!r}")
    for field in ("g", "div", "threshold", "d_max"):
        got, want = getattr(result, field), float(case[f"expected_{field}"])
        if not abs(got - want) <= _tol(want):
            problems.append(f"{field} {got!r} != {want!r}")
    want_f = float(case["expected_f"])
    f_tol = _tol(float(case["expected_g"])) + float(case["lam"]) * _tol(float(case["expected_div"]))
    if not abs(result.f - want_f) <= f_tol:
        problems.append(f"f {result.f!r} != {want_f!r}")
    return problems


def run_cases(cases: Sequence[Mapping[str, Any]]) -> tuple[list[str], int]:
    """One output line per case, and the number of failures."""
    lines: list[str] = []
    failed = 0
    for index, case in enumerate(cases):
        name = case.get("name", f"case_{index}") if isinstance(case, Mapping) else f"case_{index}"
        try:
            problems = check_case(case)
        except (KeyError, TypeError, ValueError) as exc:  # a malformed case fails, alone
            problems = [f"{type(exc).__name__}: {exc}"]
        failed += bool(problems)
        lines.append(f"FAIL {name}: {'; '.join(problems)}" if problems else f"PASS {name}")
    return lines, failed


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m backend.cli.gist_conformance FILE", file=sys.stderr)
        return 2
    try:
        data = json.loads(Path(args[0]).read_text(encoding="utf-8"))
        cases = data["cases"] if isinstance(data, Mapping) else data
        if not isinstance(cases, list):
            raise ValueError("'cases' is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"cannot read {args[0]}: {exc}", file=sys.stderr)
        return 2
    lines, failed = run_cases(cases)
    for line in lines:
        print(line)
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
