"""Version chains of facts: reading them, and deleting versions without breaking them.

An update supersedes a memory instead of overwriting it (``docs/memory-model.md``): the
new version's ``supersedes`` names the old one, whose ``superseded_by`` names the new
one, and only the newest version of a chain is live (activation skips superseded ones).
A deletion must therefore splice the chain around what it removes: otherwise an older
version stays superseded by a memory that is gone, hidden from activation for good.

Failure policy: a store outage raises ``VectorStoreUnavailable`` to the caller; links to
missing memories (or cycles) end a chain where they are instead of failing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Literal

from backend.longterm.locks import NamespaceLocks
from backend.memory.types import Memory, Namespace
from backend.stores.vector_port import VectorStore

log = logging.getLogger(__name__)


class VersionChains:
    """Reads and splices the version chains of one store."""

    def __init__(self, store: VectorStore, locks: NamespaceLocks) -> None:
        self.store = store
        self.locks = locks

    def _get(self, ns: Namespace, memory_id: str) -> Memory | None:
        found = self.store.get(ns, [memory_id])
        return found[0] if found else None

    def chain(self, ns: Namespace, memory_id: str) -> list[Memory]:
        """Oldest → newest versions of the fact ``memory_id`` belongs to (cycles are cut)."""
        memory = self._get(ns, memory_id)
        if memory is None:
            return []
        seen = {memory.id}
        older: list[Memory] = []
        cursor = memory
        while cursor.supersedes and cursor.supersedes not in seen:
            previous = self._get(ns, cursor.supersedes)
            if previous is None:
                break
            seen.add(previous.id)
            older.insert(0, previous)
            cursor = previous
        newer: list[Memory] = []
        cursor = memory
        while cursor.superseded_by and cursor.superseded_by not in seen:
            following = self._get(ns, cursor.superseded_by)
            if following is None:
                break
            seen.add(following.id)
            newer.append(following)
            cursor = following
        return [*older, memory, *newer]

    def delete(self, ns: Namespace, ids: Iterable[str]) -> int:
        """Delete memories of ``ns``; returns how many existed.

        Version chains are spliced around the deleted ones: the nearest surviving older and
        newer versions are linked to each other (an older version left without a newer one
        becomes live again, instead of staying superseded by a memory that is gone).
        """
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return 0
        # The namespace's write lock, as every other write takes it: a reinforcement
        # running meanwhile must not write back a memory deleted here.
        with self.locks(ns):
            doomed = {m.id: m for m in self.store.get(ns, wanted)}
            if not doomed:
                return 0
            older_of, newer_of = _splices(doomed)
            deleted = self.store.delete(ns, list(doomed))
            relinked: list[Memory] = []
            for memory in self.store.get(ns, list(dict.fromkeys([*older_of, *newer_of]))):
                changes: dict[str, Any] = {}
                if memory.id in older_of and memory.superseded_by in doomed:
                    changes["superseded_by"] = older_of[memory.id]
                if memory.id in newer_of and memory.supersedes in doomed:
                    changes["supersedes"] = newer_of[memory.id]
                if changes:
                    relinked.append(replace(memory, **changes))
            if relinked:
                self.store.upsert(ns, relinked)
        log.info("deleted %d memories in %s (%d relinked)", deleted, ns.key, len(relinked))
        return deleted


def _splices(
    doomed: dict[str, Memory],
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """For the versions that survive next to ``doomed`` ones: each older survivor's new
    successor, and each newer survivor's new predecessor (``None``: no longer any)."""

    def survivor(start: str | None, link: Literal["supersedes", "superseded_by"]) -> str | None:
        seen: set[str] = set()
        while start is not None and start in doomed and start not in seen:
            seen.add(start)
            start = getattr(doomed[start], link)
        return None if start is None or start in doomed else start

    older_of: dict[str, str | None] = {}  # surviving older version → its new successor
    newer_of: dict[str, str | None] = {}  # surviving newer version → its new predecessor
    for memory in doomed.values():
        older = survivor(memory.supersedes, "supersedes")
        newer = survivor(memory.superseded_by, "superseded_by")
        if older is not None:
            older_of[older] = newer
        if newer is not None:
            newer_of[newer] = older
    return older_of, newer_of
