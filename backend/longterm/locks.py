"""Per-namespace write locks, shared by every part of ``LongTermMemory`` that writes.

A read-modify-write of one namespace (the gate deciding on neighbours, a reinforcement,
an edit, a deletion that splices a version chain, a namespace reset) holds the
namespace's lock, so that two of them never interleave: a reinforcement running
meanwhile must not write back a memory a deletion just removed. Namespaces never block
each other. The locks are per process; see ``docs/memory-model.md`` for the model and
``docs/reliability.md`` for what holds between processes.
"""

from __future__ import annotations

import threading

from backend.memory.types import Namespace


class NamespaceLocks:
    """One ``threading.Lock`` per namespace, created on first use (never removed: a
    namespace's lock is a few dozen bytes)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def __call__(self, ns: Namespace) -> threading.Lock:
        """The lock of ``ns`` (``with locks(ns): ...``)."""
        with self._guard:
            return self._locks.setdefault(ns.key, threading.Lock())
