"""The app's default retrieval on the public eval corpus (bench.retrieval_quality).

Runs the bench once (in-memory store, the real local embedder) and checks its last line,
``recall@8=<x> redundancy=<y> stale=<z> junk=<j>``, against the targets.

Recall: the target is 0.90, but with the local MiniLM embedder the best ranking we found
reached about 0.86 even with a perfect (oracle) topic de-duplication; 0.877 is shipped
since a message about food keeps the user's dietary notes in mind (docs/memory-model.md,
"Hybrid mode", explains the ceiling; docs/benchmarks.md, "Dietary notes for a message
about food"). The test pins what is
reached (a regression guard) and keeps the 0.90 target as an expected failure: when it
starts passing, ``xfail_strict`` turns it red so the guard gets raised.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from bench import retrieval_quality

LAST_LINE = re.compile(
    r"^recall@8=(?P<recall>[0-9.]+) redundancy=(?P<redundancy>[0-9.]+) "
    r"stale=(?P<stale>[0-9.]+) junk=(?P<junk>[0-9.]+)$"
)
RECALL_TARGET = 0.90
# 0.877 measured (minilm-use, a message about food keeping the dietary notes in mind;
# 0.845 before); a small margin for runtime rounding.
RECALL_REACHED = 0.87
# The crosslingual and Chinese slices with the default two-part embedder (minilm-use):
# 0.833 and 0.936 measured, 0.400 and 0.821 with MiniLM alone (issue 27: >= 0.80).
CROSSLINGUAL_REACHED = 0.80
ZH_REACHED = 0.90

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def output(eval_dir: Path) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = retrieval_quality.main(["--corpus", str(eval_dir), "--store", "memory"])
    assert code == 0
    return out.getvalue().strip().splitlines()


@pytest.fixture(scope="module")
def app_default(output: list[str]) -> dict[str, float]:
    lines = output
    match = LAST_LINE.match(lines[-1].strip())
    assert match, f"unexpected last line: {lines[-1]!r}"
    assert any(line.startswith("| app default") for line in lines)
    assert any(line.startswith("odd query ids: recall") for line in lines)
    return {name: float(value) for name, value in match.groupdict().items()}


def test_app_default_has_no_crowding_stale_or_junk(app_default: dict[str, float]) -> None:
    assert app_default["redundancy"] <= 0.05
    assert app_default["stale"] == 0.0
    assert app_default["junk"] <= 0.02


def test_app_default_recall_does_not_regress(app_default: dict[str, float]) -> None:
    assert app_default["recall"] >= RECALL_REACHED


@pytest.mark.xfail(reason="ceiling of the local embedders, see the module docstring")
def test_app_default_recall_target(app_default: dict[str, float]) -> None:
    assert app_default["recall"] >= RECALL_TARGET


def test_a_message_reaches_notes_in_the_other_language(output: list[str]) -> None:
    def tag_recall(tag: str) -> float:
        found = next(line for line in output if line.startswith(f"| {tag} |"))
        return float(found.strip("| ").split(" | ")[2])

    assert tag_recall("crosslingual") >= CROSSLINGUAL_REACHED
    assert tag_recall("zh") >= ZH_REACHED


def row(lines: list[str], strategy: str) -> list[float]:
    """The numbers of the table row of ``strategy``."""
    found = next(line for line in lines if line.startswith(f"| {strategy} |"))
    return [float(cell) for cell in found.strip("| ").split(" | ")[1:]]


NO_MEMORY = re.compile(
    r"mean memories returned: (?P<on>[0-9.]+) \(relevance floor off: (?P<off>[0-9.]+)\); "
    r"share of irrelevant memories returned: (?P<irr_on>[0-9.]+) "
    r"\(floor off: (?P<irr_off>[0-9.]+)\)"
)


def test_the_relevance_floor_trims_what_is_not_needed_and_costs_no_recall(
    output: list[str],
) -> None:
    default = row(output, "app default (config defaults: hybrid)")
    floor_off = row(output, "app default, relevance floor off")
    assert default[0] >= floor_off[0]  # recall@8
    match = next(m for line in output if (m := NO_MEMORY.search(line)))
    # 23 no-memory queries (the corpus's 5, the bench's 18): 8 memories each without the
    # floor, 3.7 with it (held health notes and CJK character matches are most of them).
    assert float(match["on"]) <= 4.5 < float(match["off"])
    assert float(match["irr_on"]) < float(match["irr_off"])


def test_a_message_about_food_recalls_what_the_user_does_not_eat() -> None:
    # Eight food messages written after the rule (bench/data/README.md): the diet, the
    # peanut allergy and the coriander refused, 0.625 without it, 0.958 with it.
    queries = Path(retrieval_quality.__file__).parent / "data" / "food_queries.jsonl"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = retrieval_quality.main([
            "--queries", str(queries),
            "--no-memory-queries", "/nonexistent", "--store", "memory",
        ])  # fmt: skip
    assert code == 0
    match = LAST_LINE.match(out.getvalue().strip().splitlines()[-1])
    assert match and float(match["recall"]) >= 0.9
