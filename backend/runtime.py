"""Process-wide runtime settings the app applies once at start."""

from __future__ import annotations

from threadpoolctl import threadpool_limits


def limit_blas_threads(threads: int = 1) -> None:
    """Run BLAS single-threaded: the app's matrices are small (a GIST pool of ~50 rows),
    and a multithreaded OpenBLAS waits a scheduler slice per matmul on a busy machine
    (measured in bench/gist_speed.py: 0.9 ms → 13 ms at n = 200 under load)."""
    threadpool_limits(limits=threads, user_api="blas")
