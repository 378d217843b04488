"""GIST selection (arXiv:2405.18754): max ``g(S) + lam * div(S)`` over ``|S| <= k``, in numpy.

Follows docs/memory-model.md ("GIST ... the rules our implementation must follow"), which fixes
the choices the paper leaves open as the reference implementation (divsel) makes them.

Speed: distances are computed once, and GIS(d) runs for every threshold at once (one row
of "distance to S" per threshold, updated with one gathered distance row per pick), so the
Python loop runs k times, not k * |thresholds| times.

Failure policy: bad input or configuration raises ``ValueError``; nothing degrades here
(retrieval decides what to do with it). Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

Metric = Literal["cosine", "euclidean"]
UtilityKind = Literal["linear", "coverage", "facility_location"]
DiameterMode = Literal["exact", "approx"]
Stage = Literal["greedy", "diameter_pair", "sweep"]

F32 = np.float32
_F32_EPS = float(np.finfo(np.float32).eps)
DEFAULT_DIAMETER_SWEEPS = 3  # divsel's default when diameter_sweeps is None
_CHUNK_ELEMS = 1 << 22  # bounds the (thresholds x n) working set; thresholds go in chunks
_CANCEL_RTOL = 1e-6  # Gram-trick pairs closer than this (relative) are recomputed directly
# divsel sums in 16 lanes (element i into lane i % 16, lanes left to right, no FMA). Up to
# this many pair-terms we replay that order, so rounding-level ties break as in divsel.
_LANES = 16
_EXACT_BUDGET = 1 << 16


@dataclass(frozen=True)
class GistResult:
    """The selection (in selection order) and how it was reached."""

    selected: tuple[int, ...]
    f: float
    g: float
    div: float  # min pairwise distance, or d_max when |S| <= 1
    threshold: float  # 0 for greedy, d_max for diameter_pair, the winning d for sweep
    stage: Stage
    d_max: float  # exact diameter, or the double-sweep estimate under diameter="approx"


def _as_points(vectors: ArrayLike) -> NDArray[np.float32]:
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # reported as non-finite below
            x = np.ascontiguousarray(vectors, dtype=F32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"vectors must be a numeric (n, dim) array: {exc}") from exc
    if x.ndim != 2:
        raise ValueError(f"vectors must be 2-D (n, dim), got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError("empty input: no vectors to select from")
    if x.shape[1] == 0:
        raise ValueError("zero dimension: vectors have no coordinates")
    if not np.isfinite(x).all():
        row = int(np.argwhere(~np.isfinite(x))[0][0])
        raise ValueError(f"row {row} has a NaN or infinite coordinate")
    return x


def distance_matrix(vectors: ArrayLike, metric: Metric = "cosine") -> NDArray[np.float32]:
    """All pairwise distances: float32, exactly symmetric, zero diagonal.

    cosine: ``clamp(1 - a.b, 0, 2)`` on L2-normalised rows (a zero or overflowing row is a
    ``ValueError``); euclidean: the usual norm. Small inputs replay divsel's summation
    order bit for bit; larger ones use one matmul (numpy's symmetric rank-k update).
    """
    x = _as_points(vectors)
    if metric not in ("cosine", "euclidean"):
        raise ValueError(f"unknown metric {metric!r} (expected 'cosine' or 'euclidean')")
    n, dim = x.shape
    small = n * n * (-(-dim // _LANES) * _LANES) <= _EXACT_BUDGET
    with np.errstate(over="ignore"):  # overflow is +inf: rejected below, or a legal distance
        if metric == "cosine":
            # The matmul path is not bit-exact anyway, so it takes the faster row norms.
            norms = np.sqrt(_lane_sum(x * x) if small else np.einsum("ij,ij->i", x, x))
            bad = ~(np.isfinite(norms) & (norms > 0))
            if bad.any():
                raise ValueError(f"row {int(np.argmax(bad))} cannot be L2-normalised")
            x = x / norms[:, None]
            d = _pairwise(x, metric) if small else F32(1.0) - x @ x.T
            np.minimum(np.maximum(d, F32(0.0), out=d), F32(2.0), out=d)  # clamp(0, 2)
        else:
            d = _pairwise(x, metric) if small else _euclidean_gram(x)
    np.fill_diagonal(d, F32(0.0))
    return d


def _lane_sum(terms: NDArray[np.float32]) -> NDArray[np.float32]:
    # Same additions in the same order as divsel's loops: reducing the outer axis of a
    # contiguous 3-D array adds its slices in order, and cumsum is sequential by definition.
    *lead, dim = terms.shape
    width = -(-dim // _LANES) * _LANES
    if width != dim:
        terms = np.concatenate([terms, np.zeros((*lead, width - dim), dtype=F32)], axis=-1)
    groups = np.moveaxis(terms.reshape(-1, width // _LANES, _LANES), 1, 0)
    lanes = np.add.reduce(np.ascontiguousarray(groups), axis=0)  # (rows, 16)
    return np.cumsum(lanes, axis=1)[:, -1].reshape(lead)


def _pair_values(x: NDArray[np.float32], i: NDArray, j: NDArray, metric: str) -> NDArray:
    if metric == "cosine":
        return F32(1.0) - _lane_sum(x[i] * x[j])
    diff = x[i] - x[j]
    return np.sqrt(_lane_sum(diff * diff))


def _pairwise(x: NDArray[np.float32], metric: str) -> NDArray[np.float32]:
    i, j = np.triu_indices(len(x), 1)
    d = np.zeros((len(x), len(x)), dtype=F32)
    d[i, j] = d[j, i] = _pair_values(x, i, j, metric)
    return d


def _euclidean_gram(x: NDArray[np.float32]) -> NDArray[np.float32]:
    # Gram trick in float64 after centring on the per-column midrange (an exact shift, so
    # dyadic inputs stay exact); pairs that still cancel badly are recomputed directly.
    c = x.astype(np.float64)
    c -= (c.min(axis=0) + c.max(axis=0)) / 2.0
    gram = c @ c.T
    sq = np.diagonal(gram)
    scale = sq[:, None] + sq[None, :]
    d = np.sqrt(np.maximum(scale - 2.0 * gram, 0.0).astype(F32))
    i, j = np.nonzero(np.triu(d * d <= _CANCEL_RTOL * scale, 1))
    if len(i):
        d[i, j] = d[j, i] = _pair_values(x, i, j, "euclidean")
    return d


class _Coverage:
    """g = number of distinct items covered; the marginal is the newly covered count."""

    def __init__(self, incidence: NDArray[np.float64]) -> None:
        self.inc = incidence  # (n, u) 0/1 over the distinct ids actually used

    def start(self, m: int) -> NDArray[np.float64]:
        return np.ones((m, self.inc.shape[1]))  # "still uncovered", per threshold

    def gains(self, uncovered: NDArray[np.float64]) -> NDArray[np.float64]:
        return uncovered @ self.inc.T  # exact small-integer counts

    def commit(self, uncovered: NDArray[np.float64], rows: NDArray, picked: NDArray) -> None:
        uncovered[rows] *= 1.0 - self.inc[picked]


class _Facility:
    """g = sum_i max_{j in S} sim(i, j); marginals summed over i in index order, float64."""

    def __init__(self, sim: NDArray[np.float64]) -> None:
        self.sim = sim  # symmetric, since dist is

    def start(self, m: int) -> NDArray[np.float64]:
        return np.zeros((m, len(self.sim)))  # best similarity so far, per threshold

    def gains(self, best: NDArray[np.float64]) -> NDArray[np.float64]:
        m, n = best.shape
        out = np.empty((m, n))
        step = max(1, _CHUNK_ELEMS // (n * n))
        for lo in range(0, m, step):
            gap = self.sim[None, :, :] - best[lo : lo + step, :, None]
            # Reducing axis 1 accumulates i = 0, 1, ... in order, as a scalar loop would.
            out[lo : lo + step] = np.maximum(gap, 0.0, out=gap).sum(axis=1)
        return out

    def commit(self, best: NDArray[np.float64], rows: NDArray, picked: NDArray) -> None:
        best[rows] = np.maximum(best[rows], self.sim[picked])


_Utility = NDArray[np.float64] | _Coverage | _Facility  # linear is just its weights


def _make_utility(
    kind: str, utilities: object, n: int, dist: NDArray[np.float32], metric: str
) -> _Utility:
    if kind == "linear":
        if utilities is None:
            return np.ones(n)
        try:
            w = np.asarray(utilities, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"linear utilities must be n numeric weights: {exc}") from exc
        if w.ndim != 1 or len(w) != n:
            raise ValueError(f"linear utilities must be {n} weights, got shape {w.shape}")
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"weight {i} is {w[i]!r}: weights must be finite and >= 0")
        return w
    if kind == "coverage":
        return _Coverage(_incidence(utilities, n))
    if kind == "facility_location":
        if utilities is not None:
            raise ValueError("facility_location takes no utilities (pass None)")
        scale = 1.0  # cosine: the paper's own 1 - dist
        if metric == "euclidean":  # the exact diameter, whatever the diameter mode
            exact = float(dist.max())
            scale = exact if np.isfinite(exact) and exact > 0 else 1.0
        sim = 1.0 - dist.astype(np.float64) / scale
        return _Facility(np.maximum(sim, 0.0, out=sim))
    raise ValueError(f"unknown utility {kind!r} (linear, coverage, facility_location)")


def _is_list(value: object) -> bool:
    return isinstance(value, Sequence | np.ndarray) and not isinstance(value, str | bytes)


def _incidence(utilities: object, n: int) -> NDArray[np.float64]:
    if not _is_list(utilities):
        raise ValueError("coverage utilities must be a sequence of n item-id lists")
    rows = list(utilities)  # type: ignore[call-overload]  # _is_list checked it
    if len(rows) != n:
        raise ValueError(f"coverage utilities must have {n} rows, got {len(rows)}")
    sets: list[set[int]] = []
    for r, items in enumerate(rows):
        if not _is_list(items):
            raise ValueError(f"coverage row {r} must be a list of item ids")
        for item in items:
            if isinstance(item, bool | np.bool_) or not isinstance(item, int | np.integer):
                raise ValueError(f"coverage row {r}: item id {item!r} is not an integer")
            if item < 0:
                raise ValueError(f"coverage row {r}: item id {item} is negative")
        sets.append({int(item) for item in items})
    # Only which rows share an id matters, so ids are renumbered densely.
    column = {item: c for c, item in enumerate(sorted(set().union(*sets)))}
    inc = np.zeros((n, len(column)))
    for r, ids in enumerate(sets):
        inc[r, [column[i] for i in ids]] = 1.0
    return inc


def _diameter(dist: NDArray[np.float32], mode: str, sweeps: int | None) -> tuple[float, int, int]:
    n = len(dist)
    if n < 2:
        return 0.0, 0, 0
    if mode == "exact":  # the first row-major maximum is the smallest (u, v), u < v
        u, v = divmod(int(np.argmax(dist)), n)
        return (float(dist[u, v]), u, v) if u < v else (0.0, 0, 1)  # u >= v: all zero
    best, current = (-np.inf, n, n), 0
    for _ in range(min(max(DEFAULT_DIAMETER_SWEEPS if sweeps is None else sweeps, 1), n)):
        a = _farthest(dist, current)
        b = _farthest(dist, a)
        cand = (float(dist[a, b]), min(a, b), max(a, b))
        if cand[0] > best[0] or (cand[0] == best[0] and cand[1:] < best[1:]):
            best = cand
        current = b
    return best


def _farthest(dist: NDArray[np.float32], source: int) -> int:
    row = dist[source].copy()
    row[source] = -np.inf  # the source is excluded, so the pair stays distinct
    return int(np.argmax(row))  # ties to the lowest index


def _grid(d_max: float, eps: float, bound: float) -> NDArray[np.float32]:
    # Repeated multiplication in float64, never log/floor: the entry count is contractual.
    values, p = [], 1.0
    while p <= bound:
        values.append(p * eps * d_max / 2.0)
        p *= 1.0 + eps
    grid = np.asarray(values).astype(F32)
    return grid[np.concatenate([[True], grid[1:] != grid[:-1]])]


def _gis_batch(
    dist: NDArray[np.float32], util: _Utility, thr: NDArray[np.float32], kk: int, d_max: float
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    """GIS(d) for every d in ``thr`` at once: picks (m, kk) -1 padded, g(S) and div(S)."""
    m, n = len(thr), len(dist)
    rows, limit = np.arange(m), thr[:, None]
    model: _Coverage | _Facility | None = None
    if isinstance(util, np.ndarray):
        # Linear gains never change, so the argmax is the first feasible row in one fixed
        # order: weight descending (-0.0 below +0.0, as a total order has it), then index.
        order = np.lexsort((np.arange(n), np.signbit(util), -util))
        rows_d = dist.take(order, axis=0).take(order, axis=1)
    else:
        order, rows_d, model = np.arange(n), dist.copy(), util
    np.fill_diagonal(rows_d, F32(-1.0))  # a picked row drops below every threshold
    near = np.full((m, n), F32(np.inf))  # dist(v, S) per threshold; feasible iff >= d
    state = model.start(m) if model else np.empty(0)
    at = np.empty((m, kk), dtype=np.intp)  # pick positions (in `order`), step by step
    spacing = np.empty((m, kk), dtype=F32)  # distance from each pick to the earlier ones
    gained = np.empty((m, kk))
    for s in range(kk):
        # All kk steps run (GIS(0) never runs out, kk <= n); a row whose candidates ran
        # out keeps re-picking an infeasible row, masked out below.
        feasible = near >= limit
        if model is None:
            j = feasible.argmax(axis=1)
        else:
            gains = model.gains(state)
            j = np.where(feasible, gains, -np.inf).argmax(axis=1)  # ties: lowest index
            gained[:, s] = gains[rows, j]
            has = near[rows, j] >= thr
            model.commit(state, rows[has], j[has])
        at[:, s] = j
        spacing[:, s] = near[rows, j]
        np.minimum(near, rows_d[j], out=near)
    ok = spacing >= limit  # a prefix per row: once out of candidates, always out
    picks = np.where(ok, order[at], -1)
    if isinstance(util, np.ndarray):
        gained = util[picks]  # -1 pads read garbage, masked below
    # g: sequential in pick order, as a replay from g(empty) = 0 sums (cumsum is ordered).
    g = np.cumsum(np.where(ok, gained, 0.0), axis=1)[:, -1]
    low = np.where(ok, spacing, F32(np.inf)).min(axis=1)
    div = np.where(ok.sum(axis=1) >= 2, low.astype(np.float64), d_max)
    return picks, g, div


def _pair_g(util: _Utility, pair: tuple[int, int]) -> float:
    if isinstance(util, np.ndarray):
        return 0.0 + util[pair[0]] + util[pair[1]]
    state, total = util.start(1), 0.0
    for v in pair:
        total += float(util.gains(state)[0, v])
        util.commit(state, np.zeros(1, dtype=np.intp), np.array([v]))
    return total


def _check_params(k: object, lam: object, eps: object, diameter: str, sweeps: object) -> int:
    if isinstance(k, bool | np.bool_):
        raise ValueError("k must be a positive integer, not a bool")
    try:
        k_int = operator.index(k)  # type: ignore[arg-type]
        eps_f, lam_f = float(eps), float(lam)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"k must be a positive integer and eps, lam numbers: {exc}") from exc
    if k_int <= 0:
        raise ValueError(f"k must be a positive integer, got {k_int}")
    # eps is a float32 in the reference, so the range applies to the float32 value.
    if not (abs(eps_f) <= 2.0 and _F32_EPS <= float(F32(eps_f)) <= 1.0):  # NaN fails too
        raise ValueError(f"eps must be in [{_F32_EPS:.7g}, 1], got {eps!r}")
    if not (np.isfinite(lam_f) and lam_f >= 0):
        raise ValueError(f"lam must be finite and >= 0, got {lam!r}")
    if diameter not in ("exact", "approx"):
        raise ValueError(f"unknown diameter {diameter!r} (expected 'exact' or 'approx')")
    if sweeps is not None and not (
        isinstance(sweeps, int | np.integer) and not isinstance(sweeps, bool) and sweeps >= 0
    ):
        raise ValueError(f"diameter_sweeps must be None or an integer >= 0, got {sweeps!r}")
    return k_int


def gist_select(
    vectors: ArrayLike,
    utilities: object = None,
    *,
    k: int,
    lam: float = 0.5,
    eps: float = 0.1,
    metric: Metric = "cosine",
    utility: UtilityKind = "linear",
    exhaustive_thresholds: bool = False,
    diameter: DiameterMode = "exact",
    diameter_sweeps: int | None = None,
    distances: ArrayLike | None = None,
) -> GistResult:
    """Run GIST over the rows of ``vectors``; ``distances`` may supply their matrix.

    ``utilities``: linear weights (None = all ones), coverage item-id lists, or None for
    facility location. ``diameter_sweeps`` (approx only): None means 3 as in divsel, 0
    means 1, above n means n. Raises ``ValueError``; never returns an empty selection.
    """
    if metric not in ("cosine", "euclidean"):
        raise ValueError(f"unknown metric {metric!r} (expected 'cosine' or 'euclidean')")
    if distances is None:
        dist = distance_matrix(vectors, metric)
    else:
        n_rows = len(_as_points(vectors))
        dist = np.ascontiguousarray(distances, dtype=F32)
        if dist.shape != (n_rows, n_rows) or np.isnan(dist).any():
            raise ValueError(f"distances must be an ({n_rows}, {n_rows}) matrix without NaN")
    k = _check_params(k, lam, eps, diameter, diameter_sweeps)
    n, eps32, lam = len(dist), float(F32(eps)), float(lam)
    util = _make_utility(utility, utilities, n, dist, metric)
    kk = min(k, n)

    d_max, u, v = _diameter(dist, diameter, diameter_sweeps)
    sweep = np.zeros(0, dtype=F32)
    if d_max > 0:  # at d_max == 0 every threshold is 0 and would only repeat the greedy
        if exhaustive_thresholds:
            sweep = np.unique(dist / F32(2.0))  # sorted, distinct, 0 included
        else:
            sweep = _grid(d_max, eps32, (4.0 if diameter == "approx" else 2.0) / eps32)
    thr = np.concatenate([np.zeros(1, dtype=F32), sweep])  # row 0 is GIS(0), the greedy

    best: GistResult | None = None
    step = max(1, _CHUNK_ELEMS // max(n, kk * kk))
    for lo in range(0, len(thr), step):
        part = thr[lo : lo + step]
        picks, g, div = _gis_batch(dist, util, part, kk, d_max)
        f = g.copy() if lam == 0 else g + lam * div  # lam == 0: exactly g, never 0 * inf
        if best is None:
            best = _result(picks[0], "greedy", f[0], g[0], div[0], 0.0, d_max)
            if kk >= 2:  # the diametrical pair replaces greedy only when strictly better
                pair = (min(u, v), max(u, v))
                g_pair, div_pair = _pair_g(util, pair), float(dist[pair])
                f_pair = g_pair if lam == 0 else g_pair + lam * div_pair
                if f_pair > best.f:
                    best = _result(pair, "diameter_pair", f_pair, g_pair, div_pair, d_max, d_max)
            f[0] = -np.inf  # row 0 is the incumbent, not a sweep entry
        if (top := f.max()) >= best.f:  # ascending fold with >=: the last top entry wins
            t = len(f) - 1 - int(np.argmax(f[::-1] == top))
            best = _result(picks[t], "sweep", f[t], g[t], div[t], part[t], d_max)
    assert best is not None
    return best


def _result(row: Sequence[int] | NDArray, stage: Stage, *values: float) -> GistResult:
    f, g, div, threshold, d_max = (float(x) for x in values)
    return GistResult(tuple(int(i) for i in row if i >= 0), f, g, div, threshold, stage, d_max)
