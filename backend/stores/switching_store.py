"""A ``VectorStore`` whose backing store can be replaced while the app runs.

The re-embedding job (``backend.longterm.reembed``) copies every memory into a new store
with vectors from the newly configured embedder while the app keeps reading and writing
the old one. This wrapper is what the app holds: it forwards every call to ``inner``;
while ``tracking`` it notes which ids each write touched (and which namespaces were
dropped), so the job can carry them over; ``held()`` blocks writes while the job carries
over the last of them and ``switch`` puts the new store in place, so no write falls
between the two stores.

Failure policy: it adds none; every call raises what ``inner`` raises.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from backend.memory.types import Memory, Namespace
from backend.stores.forwarding_store import ForwardingVectorStore
from backend.stores.vector_port import VectorStore


@dataclass
class Written:
    """What writes touched since the last ``take_written``: ids per namespace, and the
    namespaces dropped (their ids then no longer matter)."""

    ids: dict[Namespace, set[str]] = field(default_factory=dict)
    dropped: set[Namespace] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.ids or self.dropped)


class SwitchingVectorStore(ForwardingVectorStore):
    """``inner`` behind a lock for writes; thread-safe."""

    def __init__(self, store: VectorStore, *, standby: VectorStore | None = None) -> None:
        super().__init__(store)
        # The store that will take over (closed with this one until it has).
        self.standby = standby
        # Re-entrant: ``held()`` owners may write through this store themselves.
        self._writes = threading.RLock()
        self._written: Written | None = None  # None: not tracking

    @property
    def tracking(self) -> bool:
        return self._written is not None

    def track(self) -> None:
        """Start noting what writes touch (a no-op if already tracking)."""
        with self._writes:
            if self._written is None:
                self._written = Written()

    def take_written(self) -> Written:
        """What writes touched since tracking started or the last call; resets it."""
        with self._writes:
            taken, self._written = self._written or Written(), Written()
            return taken

    @contextmanager
    def held(self) -> Iterator[None]:
        """Writes from other threads wait until the block ends."""
        with self._writes:
            yield

    def switch(self, store: VectorStore) -> VectorStore:
        """Put ``store`` in place of ``inner``, stop tracking; returns the old store."""
        with self._writes:
            old, self.inner = self.inner, store
            self._written = None
            self.standby = None
            return old

    def close(self) -> None:
        """Close ``inner`` and the standby store, those that can be closed."""
        for store in (self.inner, self.standby):
            close = getattr(store, "close", None)
            if callable(close):
                close()

    def _note(self, ns: Namespace, ids: Sequence[str]) -> None:
        if self._written is not None:
            self._written.ids.setdefault(ns, set()).update(ids)

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        with self._writes:
            try:
                self.inner.upsert(ns, memories)
            finally:  # a batch cut short may be partly written
                self._note(ns, [m.id for m in memories])

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        with self._writes:
            try:
                return self.inner.delete(ns, ids)
            finally:
                self._note(ns, ids)

    def drop_namespace(self, ns: Namespace) -> None:
        with self._writes:
            try:
                self.inner.drop_namespace(ns)
            finally:
                if self._written is not None:
                    self._written.ids.pop(ns, None)
                    self._written.dropped.add(ns)
