"""Whether memory is being saved, in plain words: the recent outcomes of the hippocampus
runs, the long-term writes and the query embeddings (issue 26).

A memory that stops forming must never be silent: a hippocampus on a server that turns
every request down still lets the chat go on, so nothing but this tells the user. The
engine records each outcome as it happens (``backend.engine.memory_worker`` after a run
and its writes, ``backend.engine.turn`` after an activation); ``/healthz``, the status
page, the chat UI's banner and the OpenAI-compatible response's header read
``warning()``. One failure is weather (a timeout, a restart); ``FAILURES_TO_WARN`` in a
row is a broken setup. One success clears the warning.

Per process, in memory: a restart forgets the streak, and the next failures rebuild it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend.clock import Clock

FAILURES_TO_WARN = 3
# Full-contract runs with no valid JSON after which "auto" turns to the compact contract.
INVALID_TO_SWITCH = 3


@dataclass
class PartHealth:
    """One part's streak of failures and the last one, in words."""

    streak: int = 0
    last_error: str | None = None
    failed_at: datetime | None = None
    ok_at: datetime | None = None

    def failed(self, error: str, now: datetime) -> None:
        self.streak += 1
        self.last_error, self.failed_at = error, now

    def succeeded(self, now: datetime) -> None:
        self.streak, self.ok_at = 0, now

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.streak < FAILURES_TO_WARN,
            "failures_in_a_row": self.streak,
            "last_error": self.last_error,
            "failed_at": self.failed_at.isoformat() if self.failed_at else None,
            "ok_at": self.ok_at.isoformat() if self.ok_at else None,
        }


def hippocampus_problem(info: Mapping[str, Any]) -> str | None:
    """What went wrong in a hippocampus run (its memory report's info), in words; None
    when it went right."""
    status = info.get("status")
    model = f"the memory model ({info['model']})" if info.get("model") else "the memory model"
    if status == "ok":
        return None
    if status == "timeout":
        return f"{model} did not answer in time"
    if status == "garbage":
        return f"{model} answered with no valid memory JSON ({info.get('error', '')})"
    # An LLMError's message names the model and the server first: say it once.
    error = str(info.get("error") or status)
    return f"the memory model failed: {error}"


class MemoryHealth:
    """The recent outcomes of memory's parts; thread-safe (writes finish in threads)."""

    def __init__(self, clock: Clock, *, failures_to_warn: int = FAILURES_TO_WARN) -> None:
        self._clock = clock
        self._warn_at = failures_to_warn
        self._lock = threading.Lock()
        self.hippocampus = PartHealth()
        self.store = PartHealth()
        self.embedder = PartHealth()
        self._invalid_full_runs = 0
        self.switched: str | None = None  # why the contract changed, once it did

    # -- recording -----------------------------------------------------------------------
    def hippocampus_ran(self, info: Mapping[str, Any]) -> None:
        """One run's outcome (its report's info). A run cut short twice by the replies
        on a one-slot server ("interrupted") says nothing of the setup: the next run
        catches its turn up."""
        if info.get("status") == "interrupted":
            return
        problem = hippocampus_problem(info)
        with self._lock:
            now = self._clock.now()
            if problem is None:
                self.hippocampus.succeeded(now)
            else:
                self.hippocampus.failed(problem, now)
            invalid = info.get("status") == "garbage" and info.get("mode") == "full"
            self._invalid_full_runs = self._invalid_full_runs + 1 if invalid else 0

    def writes_done(self, outcomes: Sequence[Any], write_error: str | None) -> None:
        """A merge's long-term writes: an error (neither applied nor queued) or queued
        writes (the store is down) fail; an applied write succeeds; no write says
        nothing."""
        actions = {getattr(o, "action", None) for o in outcomes}
        with self._lock:
            now = self._clock.now()
            if write_error:
                self.store.failed(f"the memory store failed: {write_error}", now)
            elif "queue" in actions:
                self.store.failed(
                    "the memory store is unreachable; new memories wait in the outbox", now
                )
            elif actions - {"reject", None}:
                self.store.succeeded(now)

    def activation_done(self, degraded: str | None, *, embedder: bool) -> None:
        """An activation's ``degraded`` (``backend.longterm.activation``): no query vector
        with an embedder configured is the embedder failing; the store unavailable is the
        store failing (for reads)."""
        with self._lock:
            now = self._clock.now()
            if degraded and degraded.startswith("store unavailable"):
                detail = degraded.removeprefix("store unavailable: ")
                self.store.failed(f"the memory store is unavailable ({detail})", now)
                return
            self.store.succeeded(now)  # it answered: queued writes will follow
            if not embedder:
                return
            if degraded and degraded.startswith("no query vector"):
                self.embedder.failed("the embedding model did not answer", now)
            else:
                self.embedder.succeeded(now)

    def should_switch_to_compact(self) -> bool:
        """Full-contract runs keep failing validation: time to ask for less."""
        with self._lock:
            return self._invalid_full_runs >= INVALID_TO_SWITCH and self.switched is None

    def note_switch(self, why: str) -> None:
        with self._lock:
            self.switched, self._invalid_full_runs = why, 0

    # -- reading -------------------------------------------------------------------------
    def _parts(self) -> dict[str, PartHealth]:
        return {"hippocampus": self.hippocampus, "store": self.store, "embedder": self.embedder}

    def warning(self) -> str | None:
        """ "Memory is not being saved: <reason>", or None while it is."""
        with self._lock:
            failing = [p for p in self._parts().values() if p.streak >= self._warn_at]
            if not failing:
                return None
            worst = max(failing, key=lambda p: p.streak)
            return f"Memory is not being saved: {worst.last_error}"

    def report(self) -> dict[str, Any]:
        """For ``/healthz`` and the status page."""
        warning = self.warning()
        with self._lock:
            parts = {name: part.as_dict() for name, part in self._parts().items()}
            for part in parts.values():
                part["ok"] = part["failures_in_a_row"] < self._warn_at
            return {
                "ok": warning is None,
                "warning": warning,
                **parts,
                **({"contract_switched": self.switched} if self.switched else {}),
            }
