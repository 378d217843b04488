"""GIST selection (arXiv:2405.18754): max ``g(S) + lam * div(S)`` over ``|S| <= k``, in numpy.

The rules are those of memory-model.md ("GIST ... the rules our implementation must
follow"), which pin the choices the paper leaves open exactly as the reference
implementation (divsel) makes them, so ``golden-selection.json`` reproduces.

Speed: the distance matrix is computed once (one float32 matmul for cosine), and the
greedy independent set of *every* threshold runs at once: one row of a boolean
"still feasible" matrix per threshold, updated with one gathered distance row per pick,
so the Python loop runs ``k`` times, not ``k * |thresholds|`` times.

Failure policy: bad input or bad configuration raises ``ValueError``; nothing degrades
silently here (retrieval decides what to do with the error). Pure: no I/O, no clock.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Iterator, Sequence
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
# divsel's default number of approximate-diameter double sweeps when none is given.
DEFAULT_DIAMETER_SWEEPS = 3
# Bounds the (thresholds x n) working set: thresholds are processed in chunks this big.
_CHUNK_ELEMS = 1 << 22
# Pairs whose squared distance is below this fraction of the squared norms are
# recomputed from coordinate differences (the Gram shortcut cancels there).
_CANCEL_RTOL = 1e-6


@dataclass(frozen=True)
class GistResult:
    """The selection and how it was reached (``threshold``: 0, ``d_max`` or the winning d)."""

    selected: tuple[int, ...]
    f: float
    g: float
    div: float
    threshold: float
    stage: Stage
    d_max: float


def _as_points(vectors: ArrayLike) -> NDArray[np.float32]:
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
            x = np.asarray(vectors, dtype=F32)
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
    return np.ascontiguousarray(x)


def distance_matrix(vectors: ArrayLike, metric: Metric = "cosine") -> NDArray[np.float32]:
    """All pairwise distances, float32, exactly symmetric, zero diagonal.

    cosine: ``clamp(1 - a.b, 0, 2)`` on L2-normalised rows (a zero or non-finite row is a
    ``ValueError``); euclidean: the usual norm. ``x @ x.T`` is computed by a symmetric
    rank-k update in numpy, so ``d[i, j] == d[j, i]`` bit for bit.
    """
    x = _as_points(vectors)
    if metric == "cosine":
        with np.errstate(over="ignore"):  # an overflowing row is rejected just below
            norms = np.sqrt(np.einsum("ij,ij->i", x, x))
        bad = ~(np.isfinite(norms) & (norms > 0))
        if bad.any():
            raise ValueError(f"row {int(np.argmax(bad))} cannot be L2-normalised (zero norm)")
        xn = x / norms[:, None]
        d = xn @ xn.T
        np.subtract(F32(1.0), d, out=d)
        np.clip(d, F32(0.0), F32(2.0), out=d)
    elif metric == "euclidean":
        d = _euclidean(x)
    else:
        raise ValueError(f"unknown metric {metric!r} (expected 'cosine' or 'euclidean')")
    np.fill_diagonal(d, F32(0.0))
    return d


def _euclidean(x: NDArray[np.float32]) -> NDArray[np.float32]:
    # Gram trick in float64 after centring on the per-column midrange (exact shift), so
    # dyadic inputs stay exact; pairs that still cancel badly are redone directly.
    c = x.astype(np.float64)
    c -= (c.min(axis=0) + c.max(axis=0)) / 2.0
    gram = c @ c.T
    sq = np.diagonal(gram).copy()
    d2 = sq[:, None] + sq[None, :]
    scale = d2.copy()
    d2 -= 2.0 * gram
    close = np.argwhere(np.triu(d2 <= _CANCEL_RTOL * scale, 1))
    if len(close):
        i, j = close[:, 0], close[:, 1]
        diff = (x[i] - x[j]).astype(np.float64)
        exact = np.einsum("ij,ij->i", diff, diff)
        d2[i, j] = exact
        d2[j, i] = exact
    np.maximum(d2, 0.0, out=d2)
    with np.errstate(over="ignore"):  # beyond float32 range the distance is +inf
        return np.sqrt(d2.astype(F32))


class _Linear:
    """g = sum of weights; the argmax key is a rank so ties go to the lowest index."""

    def __init__(self, weights: NDArray[np.float64]) -> None:
        n = len(weights)
        # Rank by weight descending (-0.0 below +0.0, as a total order does), then index.
        order = np.lexsort((np.arange(n), np.signbit(weights), -weights))
        self.key = np.empty(n, dtype=np.float64)
        self.key[order] = np.arange(n, 0, -1, dtype=np.float64)
        self.weights = weights

    def start(self, m: int) -> None:
        return None

    def scores(self, state: None) -> NDArray[np.float64]:
        return self.key

    def take(self, state: None, j: NDArray[np.intp], has: NDArray[np.bool_], sc: NDArray) -> NDArray:
        return self.weights[j]


class _Coverage:
    """g = number of distinct items covered; marginal = newly covered count."""

    def __init__(self, incidence: NDArray[np.float64]) -> None:
        self.inc = incidence  # (n, u) 0/1, u = distinct ids actually used

    def start(self, m: int) -> NDArray[np.float64]:
        return np.ones((m, self.inc.shape[1]))

    def scores(self, uncovered: NDArray[np.float64]) -> NDArray[np.float64]:
        return uncovered @ self.inc.T

    def take(self, uncovered: NDArray, j: NDArray, has: NDArray, sc: NDArray) -> NDArray:
        rows = np.flatnonzero(has)
        uncovered[rows] *= 1.0 - self.inc[j[rows]]
        return sc[np.arange(len(j)), j]


class _Facility:
    """g = sum_i max_{j in S} sim(i, j), marginals summed over i in order, in float64."""

    def __init__(self, sim: NDArray[np.float64]) -> None:
        self.sim = sim

    def start(self, m: int) -> NDArray[np.float64]:
        return np.zeros((m, self.sim.shape[0]))

    def scores(self, best: NDArray[np.float64]) -> NDArray[np.float64]:
        m, n = best.shape
        out = np.empty((m, n))
        step = max(1, _CHUNK_ELEMS // (n * n))
        for lo in range(0, m, step):
            # Reducing axis 1 accumulates i = 0, 1, ... in order, like a scalar loop.
            gap = self.sim[None, :, :] - best[lo : lo + step, :, None]
            out[lo : lo + step] = np.maximum(gap, 0.0, out=gap).sum(axis=1)
        return out

    def take(self, best: NDArray, j: NDArray, has: NDArray, sc: NDArray) -> NDArray:
        rows = np.flatnonzero(has)
        best[rows] = np.maximum(best[rows], self.sim[j[rows]])  # sim is symmetric
        return sc[np.arange(len(j)), j]


_Utility = _Linear | _Coverage | _Facility


def _make_utility(
    kind: str, utilities: object, n: int, dist: NDArray[np.float32], metric: str
) -> _Utility:
    if kind == "linear":
        if utilities is None:
            return _Linear(np.ones(n))
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
        return _Linear(w)
    if kind == "coverage":
        return _Coverage(_incidence(utilities, n))
    if kind == "facility_location":
        if utilities is not None:
            raise ValueError("facility_location takes no utilities (pass None)")
        scale = 1.0
        if metric == "euclidean":
            exact = float(dist.max())
            scale = exact if np.isfinite(exact) and exact > 0 else 1.0
        sim = 1.0 - dist.astype(np.float64) / scale
        return _Facility(np.maximum(sim, 0.0, out=sim))
    raise ValueError(f"unknown utility {kind!r} (linear, coverage, facility_location)")


def _incidence(utilities: object, n: int) -> NDArray[np.float64]:
    if utilities is None or isinstance(utilities, str | bytes) or not isinstance(
        utilities, Sequence | np.ndarray
    ):
        raise ValueError("coverage utilities must be a sequence of n item-id lists")
    rows = list(utilities)  # type: ignore[arg-type]
    if len(rows) != n:
        raise ValueError(f"coverage utilities must have {n} rows, got {len(rows)}")
    sets: list[set[int]] = []
    for r, items in enumerate(rows):
        if isinstance(items, str | bytes) or not isinstance(items, Sequence | np.ndarray):
            raise ValueError(f"coverage row {r} must be a list of item ids")
        ids: set[int] = set()
        for item in list(items):  # type: ignore[arg-type]
            if isinstance(item, bool | np.bool_) or not isinstance(item, int | np.integer):
                raise ValueError(f"coverage row {r}: item id {item!r} is not an integer")
            if item < 0:
                raise ValueError(f"coverage row {r}: item id {item} is negative")
            ids.add(int(item))
        sets.append(ids)
    # Only which rows share an id matters, so ids are renumbered densely.
    universe = {item: col for col, item in enumerate(sorted(set().union(*sets)))}
    inc = np.zeros((n, len(universe)))
    for r, ids in enumerate(sets):
        inc[r, [universe[i] for i in ids]] = 1.0
    return inc


def _diameter(
    dist: NDArray[np.float32], mode: str, sweeps: int | None
) -> tuple[float, int, int]:
    n = dist.shape[0]
    if n < 2:
        return 0.0, 0, 0
    if mode == "exact":
        # Row-major first maximum = smallest u, then smallest v (the matrix is symmetric).
        u, v = divmod(int(np.argmax(dist)), n)
        return (float(dist[u, v]), u, v) if u < v else (float(dist[0, 1]), 0, 1)
    best = (-np.inf, n, n)
    current = 0
    count = DEFAULT_DIAMETER_SWEEPS if sweeps is None else sweeps
    for _ in range(min(max(count, 1), n)):
        a = _farthest(dist, current)
        b = _farthest(dist, a)
        cand = (float(dist[a, b]), min(a, b), max(a, b))
        if cand[0] > best[0] or (cand[0] == best[0] and cand[1:] < best[1:]):
            best = cand
        current = b
    return best


def _farthest(dist: NDArray[np.float32], source: int) -> int:
    row = dist[source].copy()
    row[source] = -np.inf  # the source itself is excluded, so the pair stays distinct
    return int(np.argmax(row))


def _grid(d_max: float, eps: float, bound: float) -> NDArray[np.float32]:
    # Repeated multiplication in float64, never log/floor: the entry count is contractual.
    values: list[float] = []
    p = 1.0
    while p <= bound:
        values.append(p * eps * d_max / 2.0)
        p *= 1.0 + eps
    grid = np.asarray(values, dtype=np.float64).astype(F32)
    keep = np.ones(len(grid), dtype=bool)
    keep[1:] = grid[1:] != grid[:-1]
    return grid[keep]


def _gis_batch(
    dist: NDArray[np.float32], util: _Utility, thr: NDArray[np.float32], kk: int
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """GIS(d) for every d in ``thr`` at once: picks (m, kk), -1 padded, and g per row."""
    m, n = len(thr), dist.shape[0]
    rows = np.arange(m)
    feasible = np.ones((m, n), dtype=bool)
    picks = np.full((m, kk), -1, dtype=np.intp)
    g = np.zeros(m)
    state = util.start(m)
    limit = thr[:, None]
    for s in range(kk):
        sc = util.scores(state)  # type: ignore[arg-type]
        j = np.where(feasible, sc, -np.inf).argmax(axis=1)  # first maximum: lowest index
        has = feasible[rows, j]
        if not has.any():
            break
        picks[:, s] = np.where(has, j, -1)
        g += np.where(has, util.take(state, j, has, sc), 0.0)  # type: ignore[arg-type]
        feasible &= dist[j] >= limit  # dist(v, S) >= d, non-strict
        feasible[rows, j] = False
    return picks, g


def _div(picks: NDArray[np.intp], dist: NDArray[np.float32], d_max: float) -> NDArray[np.float64]:
    m, kk = picks.shape
    count = (picks >= 0).sum(axis=1)
    if kk < 2:
        return np.full(m, d_max)
    p = np.maximum(picks, 0)
    sub = dist[p[:, :, None], p[:, None, :]]
    valid = (picks >= 0)[:, :, None] & (picks >= 0)[:, None, :] & np.triu(np.ones((kk, kk), bool), 1)
    low = np.where(valid, sub, F32(np.inf)).min(axis=(1, 2)).astype(np.float64)
    return np.where(count >= 2, low, d_max)


def _objective(g: NDArray[np.float64], div: NDArray[np.float64], lam: float) -> NDArray:
    return g.copy() if lam == 0 else g + lam * div  # lam == 0: exactly g, never 0 * inf


def _replay_g(util: _Utility, seq: Sequence[int]) -> float:
    state = util.start(1)
    total = 0.0
    for v in seq:
        sc = np.atleast_2d(util.scores(state))  # type: ignore[arg-type]
        j = np.array([v])
        total += float(util.take(state, j, np.ones(1, bool), sc)[0])  # type: ignore[arg-type]
    return total


def _check_params(k: object, lam: float, eps: float, diameter: str, sweeps: object) -> int:
    if isinstance(k, bool | np.bool_):
        raise ValueError("k must be a positive integer, not a bool")
    try:
        k_int = operator.index(k)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ValueError(f"k must be a positive integer, got {k!r}") from exc
    if k_int <= 0:
        raise ValueError(f"k must be a positive integer, got {k_int}")
    try:
        eps_f, lam_f = float(eps), float(lam)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"eps and lam must be numbers: {exc}") from exc
    # eps is a float32 in the reference, so the range check applies to the float32 value.
    if not (abs(eps_f) <= 2.0 and _F32_EPS <= float(F32(eps_f)) <= 1.0):  # NaN fails
        raise ValueError(f"eps must be in [{_F32_EPS:.7g}, 1], got {eps!r}")
    if not (np.isfinite(lam_f) and lam_f >= 0):
        raise ValueError(f"lam must be finite and >= 0, got {lam!r}")
    if diameter not in ("exact", "approx"):
        raise ValueError(f"unknown diameter {diameter!r} (expected 'exact' or 'approx')")
    if sweeps is not None and (
        isinstance(sweeps, bool | np.bool_) or not isinstance(sweeps, int | np.integer) or sweeps < 0
    ):
        raise ValueError(f"diameter_sweeps must be None or an integer >= 0, got {sweeps!r}")
    return k_int


def _chunks(n_thr: int, n: int, kk: int) -> Iterator[slice]:
    step = max(1, _CHUNK_ELEMS // max(n, kk * kk))
    for lo in range(0, n_thr, step):
        yield slice(lo, min(lo + step, n_thr))


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
    """Run GIST over the rows of ``vectors`` (or over a precomputed ``distances`` matrix).

    ``utilities``: linear weights (None = all ones), coverage item-id lists, or None for
    facility location. ``diameter_sweeps`` applies to ``diameter="approx"``: None means
    3 (divsel's default), 0 means 1, more than n means n. Raises ``ValueError`` on bad
    input or configuration; never returns an empty selection.
    """
    if metric not in ("cosine", "euclidean"):
        raise ValueError(f"unknown metric {metric!r} (expected 'cosine' or 'euclidean')")
    if distances is None:
        dist = distance_matrix(vectors, metric)
    else:
        dist = np.ascontiguousarray(distances, dtype=F32)
        n_vec = _as_points(vectors).shape[0]
        if dist.shape != (n_vec, n_vec) or np.isnan(dist).any():
            raise ValueError(f"distances must be an ({n_vec}, {n_vec}) matrix without NaN")
    n = dist.shape[0]
    k = _check_params(k, lam, eps, diameter, diameter_sweeps)
    eps32, lam = float(F32(eps)), float(lam)
    util = _make_utility(utility, utilities, n, dist, metric)
    kk = min(k, n)

    d_max, u, v = _diameter(dist, diameter, diameter_sweeps)
    sweep = np.zeros(0, dtype=F32)
    if d_max > 0:
        if exhaustive_thresholds:
            sweep = np.unique(dist / F32(2.0))  # sorted, distinct, 0 included
        else:
            bound = (4.0 if diameter == "approx" else 2.0) / eps32
            sweep = _grid(d_max, eps32, bound)
    thr = np.concatenate([np.zeros(1, dtype=F32), sweep])  # row 0 is GIS(0), the greedy

    best: tuple[float, float, float, float, Stage, tuple[int, ...]] | None = None
    for part in _chunks(len(thr), n, kk):
        picks, g = _gis_batch(dist, util, thr[part], kk)
        div = _div(picks, dist, d_max)
        f = _objective(g, div, lam)
        lo = 0
        if best is None:
            best = (f[0], g[0], div[0], 0.0, "greedy", _row(picks, 0))
            if kk >= 2:
                pair = (min(u, v), max(u, v))
                g_pair = _replay_g(util, pair)
                div_pair = float(dist[pair])
                f_pair = float(_objective(np.array([g_pair]), np.array([div_pair]), lam)[0])
                if f_pair > best[0]:
                    best = (f_pair, g_pair, div_pair, d_max, "diameter_pair", pair)
            lo = 1
        if lo < len(f):
            top = f[lo:].max()
            if top >= best[0]:  # ascending fold with >=: the last threshold at the top wins
                t = len(f) - 1 - int(np.argmax(f[::-1] == top))
                best = (f[t], g[t], div[t], float(thr[part][t]), "sweep", _row(picks, t))
    assert best is not None
    f_best, g_best, div_best, threshold, stage, selected = best
    return GistResult(
        selected=selected,
        f=float(f_best),
        g=float(g_best),
        div=float(div_best),
        threshold=float(threshold),
        stage=stage,
        d_max=float(d_max),
    )


def _row(picks: NDArray[np.intp], t: int) -> tuple[int, ...]:
    return tuple(int(i) for i in picks[t] if i >= 0)


if __name__ == "__main__":
    from backend.memory.gist_conformance import main

    sys.exit(main())
