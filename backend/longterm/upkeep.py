"""Upkeep of a namespace in ``LongTermMemory``: vectors for memories stored without one,
and the decay pass that deletes faded memories.

Failure policy: an embedder that is still down backfills nothing (``0``, tried again on
the next pass); a store outage raises ``VectorStoreUnavailable`` to the caller (the
maintenance loop logs it and tries again later).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from backend.memory.decay import should_fade
from backend.memory.types import Namespace

if TYPE_CHECKING:
    from backend.longterm.memory import LongTermMemory

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DecayReport:
    checked: int = 0
    faded: int = 0
    pinned_kept: int = 0


def backfill(ltm: LongTermMemory, ns: Namespace, limit: int = 256) -> int:
    """Give vectors to memories stored without one; returns how many got one."""
    missing = ltm.store.missing_vectors(ns, limit)
    if not missing:
        return 0
    vectors = ltm.embed([m.content for m in missing])
    if vectors is None:
        return 0
    with ltm._lock(ns):
        current = {m.id: m for m in ltm.store.get(ns, [m.id for m in missing])}
        updated = [
            replace(current[m.id], embedding=vectors[i])
            for i, m in enumerate(missing)
            if m.id in current and current[m.id].embedding is None
        ]
        ltm.store.upsert(ns, updated)
    return len(updated)


def decay_pass(ltm: LongTermMemory, ns: Namespace) -> DecayReport:
    """Delete memories whose strength fell below the fade threshold, never pinned ones."""
    now = ltm.clock.now()
    checked = pinned_kept = 0
    fading: list[str] = []
    for memory in ltm.store.iter_all(ns):
        checked += 1
        if should_fade(memory, now):
            fading.append(memory.id)
        elif memory.pinned and should_fade(replace(memory, pinned=False), now):
            pinned_kept += 1
    if fading:
        with ltm._lock(ns):
            ltm.store.delete(ns, fading)
        log.info("decay pass %s: %d of %d faded", ns.key, len(fading), checked)
    return DecayReport(checked=checked, faded=len(fading), pinned_kept=pinned_kept)
