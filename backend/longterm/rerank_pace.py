"""How many pairs the cross-encoder may read this turn: as many of the top ``rerank_n`` as
fit ``memory.rerank_budget_ms`` at the pace it has kept lately.

The model's speed differs by an order of magnitude between machines and moves with their
load (docs/benchmarks.md, "Reranking": 2.4 ms a pair on one 2-core host, 9.5 on another),
so a fixed pair count either wastes a fast machine or blows a slow one's latency. The
pace is the median of the last ``window`` calls' milliseconds a pair: one slow call (the
first run's warm-up, a busy moment) does not halve the next turn's pairs. Until
``warmup`` calls are seen the full ``rerank_n`` is read.

Thread-safe: concurrent activations share one pace (their contention is part of it).
"""

from __future__ import annotations

import math
import statistics
import threading
from collections import deque

#: Calls whose pace is remembered.
DEFAULT_WINDOW = 9
#: Calls seen before the budget cuts anything.
DEFAULT_WARMUP = 2


class RerankPace:
    """The cross-encoder's recent milliseconds a pair, and the pairs a budget allows."""

    def __init__(self, *, window: int = DEFAULT_WINDOW, warmup: int = DEFAULT_WARMUP) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self._recent: deque[float] = deque(maxlen=window)
        self._warmup = max(0, min(warmup, window))
        self._lock = threading.Lock()

    def record(self, pairs: int, ms: float) -> None:
        """One call of the model: ``pairs`` read in ``ms`` milliseconds."""
        if pairs <= 0 or not math.isfinite(ms) or ms < 0:
            return
        with self._lock:
            self._recent.append(ms / pairs)

    def ms_per_pair(self) -> float | None:
        """The median pace of the remembered calls; ``None`` before ``warmup`` calls."""
        with self._lock:
            if not self._recent or len(self._recent) < self._warmup:
                return None
            return statistics.median(self._recent)

    def pairs(self, wanted: int, budget_ms: float | None) -> int:
        """``wanted`` cut to what ``budget_ms`` allows at the current pace (at least one
        pair: the stage is turned off by ``rerank_n`` 0, not by a slow machine)."""
        if wanted <= 0 or budget_ms is None:
            return max(0, wanted)
        pace = self.ms_per_pair()
        if pace is None or pace <= 0:
            return wanted
        return max(1, min(wanted, int(budget_ms // pace)))
