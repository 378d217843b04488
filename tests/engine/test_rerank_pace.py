"""The cross-encoder's pace and the pairs a time budget allows
(``backend.longterm.rerank_pace``)."""

from __future__ import annotations

import threading

import pytest

from backend.longterm.rerank_pace import RerankPace


def test_nothing_is_cut_before_the_warm_up_calls() -> None:
    pace = RerankPace(warmup=2)
    assert pace.pairs(30, 80.0) == 30
    pace.record(10, 1000.0)  # one slow call is not yet a pace
    assert pace.ms_per_pair() is None and pace.pairs(30, 80.0) == 30
    pace.record(10, 1000.0)
    assert pace.ms_per_pair() == 100.0
    assert pace.pairs(30, 80.0) == 1  # at least one pair: 0 is the setting's to say


def test_the_budget_holds_as_many_pairs_as_the_median_pace_reads() -> None:
    pace = RerankPace(window=5, warmup=1)
    for ms in (25.0, 24.0, 300.0, 26.0):  # a warm-up spike among 2.5 ms a pair
        pace.record(10, ms)
    assert pace.ms_per_pair() == pytest.approx(2.55)
    assert pace.pairs(30, 80.0) == 30  # 31 fit, 30 wanted
    assert pace.pairs(40, 80.0) == 31
    assert pace.pairs(40, None) == 40  # no budget: all of them
    assert pace.pairs(0, 80.0) == 0


def test_the_window_forgets_old_calls() -> None:
    pace = RerankPace(window=3, warmup=1)
    for _ in range(3):
        pace.record(4, 40.0)  # a busy machine: 10 ms a pair
    assert pace.pairs(30, 80.0) == 8
    for _ in range(3):
        pace.record(8, 16.0)  # quiet again: 2 ms a pair
    assert pace.pairs(30, 80.0) == 30


def test_calls_that_read_nothing_or_report_nonsense_are_ignored() -> None:
    pace = RerankPace(warmup=1)
    pace.record(0, 10.0)
    pace.record(5, float("nan"))
    pace.record(5, -1.0)
    assert pace.ms_per_pair() is None
    with pytest.raises(ValueError, match="window"):
        RerankPace(window=0)


def test_concurrent_activations_share_one_pace() -> None:
    pace = RerankPace(window=100, warmup=1)
    threads = [
        threading.Thread(target=lambda: [pace.record(10, 30.0) for _ in range(10)])
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pace.ms_per_pair() == 3.0 and pace.pairs(30, 80.0) == 26
