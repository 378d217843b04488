"""bench.embedder_thresholds: the gate's thresholds hold on each offline embedder's scale.

The numbers docs/benchmarks.md ("Embedder: e5-small-v2 against MiniLM") reports and the
decision rests on: no update is taken for a duplicate (cosine >= 0.9) and hardly any pair
of distinct facts reaches 0.92, with MiniLM and with the centred e5 (raw e5 fails both).
"""

from __future__ import annotations

import pytest

from backend.embeddings import local_e5
from bench.embedder_candidates import DEFAULT_CORPUS
from bench.embedder_thresholds import THRESHOLDS, measure
from tests.support import skip_or_fail


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.mark.parametrize("name", ["minilm", "e5"])
def test_updates_are_never_duplicates_and_distinct_facts_rarely(name: str) -> None:
    if not (DEFAULT_CORPUS / "memories.jsonl").is_file():
        skip_or_fail("the eval corpus is not in bench/data/eval", "LIMBIC_REQUIRE_FIXTURES")
    if name == "e5" and not local_e5.installed():
        skip_or_fail("e5-small-v2 is not installed; run ./install.sh", "LIMBIC_REQUIRE_REAL_MODEL")
    rows = {cells(line)[1].split(" ")[0]: cells(line) for line in measure(name, DEFAULT_CORPUS, 1)}
    at = {t: 3 + i for i, t in enumerate(THRESHOLDS)}
    assert int(rows["update"][at[0.9]]) == 0
    assert int(rows["distinct"][at[0.92]]) <= 20  # of 79,234 pairs
    assert int(rows["restatement"][-1]) >= 160  # the same-fact test still finds restatements
