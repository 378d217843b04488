"""GIST speed: our numpy ``gist_select`` against the Rust reference ``divsel``.

    python bench/gist_speed.py [--sizes 50 200 1000] [--repeats 200] [--dim 384] [--k 8]

Both sides start from raw vectors (ours includes the distance matrix, as divsel computes
its distances too): cosine, linear utility with random weights, lam 0.5, eps 0.1, unit
vectors from a fixed seed. Prints a Markdown table of median wall times (after a
warm-up), the ratio ours/divsel and whether both returned the same selection. On a busy
machine multithreaded OpenBLAS can stall for a scheduler slice per matmul, so BLAS runs
single-threaded by default, as in the app (``--blas-threads 0`` leaves it alone).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from backend.memory.gist import gist_select
from backend.runtime import limit_blas_threads

SEED = 20240528  # fixed: every run times the same inputs


def _median_seconds(call: Callable[[], object], repeats: int) -> float:
    for _ in range(max(3, repeats // 10)):  # warm-up: caches, BLAS and rayon thread pools
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def run(sizes: list[int], repeats: int, dim: int, k: int) -> list[str]:
    import divsel

    rng = np.random.default_rng(SEED)
    # Multithreaded BLAS stalls when the CPUs are oversubscribed, so the conditions print too.
    from threadpoolctl import threadpool_info

    blas_threads = ",".join(
        str(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"
    )
    rows = [
        f"GIST, cosine, linear utility, dim {dim}, k {k}, lam 0.5, eps 0.1, median of "
        f"{repeats} runs; numpy {np.__version__}, divsel {divsel.__version__}, "
        f"{platform.machine()} x{os.cpu_count()}, BLAS threads {blas_threads}, "
        f"load average {os.getloadavg()[0]:.1f}",
        "",
        "| n | ours | divsel | ours/divsel | same selection |",
        "|---:|---:|---:|---:|:---:|",
    ]
    for n in sizes:
        vectors = rng.standard_normal((n, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        weights = rng.random(n)
        options = {"k": k, "lam": 0.5, "eps": 0.1, "metric": "cosine", "utility": "linear"}
        ours = gist_select(vectors, weights, **options)  # type: ignore[arg-type]
        ref = divsel.gist_select_full(vectors, weights, **options)
        same = list(ours.selected) == ref["selected"] and ours.stage == ref["stage"]
        ours_call = functools.partial(gist_select, vectors, weights, **options)
        ref_call = functools.partial(divsel.gist_select_full, vectors, weights, **options)
        t_ours, t_ref = _median_seconds(ours_call, repeats), _median_seconds(ref_call, repeats)
        rows.append(
            f"| {n} | {_fmt(t_ours)} | {_fmt(t_ref)} | {t_ours / t_ref:.2f} | "
            f"{'yes' if same else 'NO'} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--repeats", type=int, default=200, help="timed runs per cell")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads (default 1, as the app runs: backend.runtime.limit_blas_threads)",
    )
    args = parser.parse_args(argv)
    if args.blas_threads > 0:
        limit_blas_threads(args.blas_threads)
    try:
        rows = run(args.sizes, max(1, args.repeats), args.dim, args.k)
    except ImportError:
        print("divsel is not installed: pip install 'limbic-memory[bench]'", file=sys.stderr)
        return 2
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
