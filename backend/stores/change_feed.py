"""Long-term writes made by other app processes, for the lexical index kept in each one.

The lexical index (``backend.stores.lexical_index``) is an in-process cache of each
namespace, kept current by the writes *this* process makes. With several app processes
on one Chroma server, process B would not see what A wrote: its keyword channel and its
salient list would miss A's memories. So every write is also logged in the shared
session database:

- ``namespace_generations``: a counter per namespace, bumped by each write;
- ``namespace_changes``: the memory ids each generation touched.

``ChangeLoggingVectorStore`` wraps the vector store and logs after each write the store
accepted. ``SharedLexicalIndex`` wraps the index: each ``ensure`` (the activation asks
first thing) reads the namespace's counter, one primary-key lookup; when another process
moved it, the changed ids are fetched from the store and re-indexed (ids the store no
longer has are dropped). Changes older than the prune horizon are deleted by the
maintenance pass; a process that slept past them, or a namespace dropped elsewhere,
reloads the namespace whole.

Ordering: turn t's writes are logged before its merge releases the session, so turn
t+1, in whichever process, sees them. Failure policy: a change that cannot be logged is
logged as a warning and the write stands (other processes see it once the memory
changes again, or after their next restart); a counter that cannot be read leaves the
index as it is (activation must not fail for it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backend.memory.hybrid import CorpusStats
from backend.memory.types import Memory, Namespace
from backend.sessions.db import SessionDatabase
from backend.stores.forwarding_store import ForwardingVectorStore
from backend.stores.lexical_index import InMemoryLexicalIndex
from backend.stores.vector_port import VectorStore

log = logging.getLogger(__name__)

RESET = "*"  # a change that means "reload the whole namespace" (it was dropped)
# Changes are kept this long: a process idle for longer reloads a namespace whole.
PRUNE_AFTER_S = 7 * 24 * 3600.0
# Own generations remembered per namespace (forgotten ones are merely re-read).
MAX_OWN = 10_000


class ChangeFeed:
    """The per-namespace change log in the session database (module doc)."""

    def __init__(self, db: SessionDatabase) -> None:
        self._db = db
        self._guard = threading.Lock()
        self._own: dict[str, set[int]] = {}  # generations this process wrote

    def record(self, ns: Namespace, ids: Sequence[str]) -> int:
        """Log a write of ``ids`` to ``ns``; the namespace's new generation."""
        now = self._db.dialect.now_s
        with self._db.write() as conn:
            conn.execute(
                text(
                    "INSERT INTO namespace_generations (namespace, generation, floor)"
                    " VALUES (:ns, 0, 0) ON CONFLICT (namespace) DO NOTHING"
                ),
                {"ns": ns.key},
            )
            generation = int(
                conn.execute(
                    text(
                        "UPDATE namespace_generations SET generation = generation + 1"
                        " WHERE namespace = :ns RETURNING generation"
                    ),
                    {"ns": ns.key},
                ).scalar_one()
            )
            rows = [{"ns": ns.key, "g": generation, "id": i} for i in dict.fromkeys(ids)]
            if rows:
                conn.execute(
                    text(
                        "INSERT INTO namespace_changes (namespace, generation, memory_id,"
                        f" changed_at) VALUES (:ns, :g, :id, {now})"
                    ),
                    rows,
                )
        with self._guard:
            own = self._own.setdefault(ns.key, set())
            own.add(generation)
            if len(own) > MAX_OWN:  # a namespace written here but never activated
                own.difference_update(sorted(own)[: MAX_OWN // 2])  # re-read, harmless
        return generation

    def generation(self, ns: Namespace) -> int:
        rows = self._db.read(
            "SELECT generation FROM namespace_generations WHERE namespace = :ns", {"ns": ns.key}
        )
        return int(rows[0][0]) if rows else 0

    def changes(self, ns: Namespace, after: int, upto: int) -> set[str] | None:
        """Ids other processes changed in generations ``after < g <= upto``; ``None``
        when they are no longer all known (pruned, or the namespace was dropped)."""
        floor = self._db.read(
            "SELECT floor FROM namespace_generations WHERE namespace = :ns", {"ns": ns.key}
        )
        if floor and after < int(floor[0][0]):
            return None
        rows = self._db.read(
            "SELECT generation, memory_id FROM namespace_changes WHERE namespace = :ns"
            " AND generation > :after AND generation <= :upto",
            {"ns": ns.key, "after": after, "upto": upto},
        )
        with self._guard:
            own = self._own.get(ns.key, set())
            ids = {memory_id for generation, memory_id in rows if generation not in own}
            own.difference_update(range(after + 1, upto + 1))  # seen: no longer needed
        return None if RESET in ids else ids

    def prune(self, older_than_s: float = PRUNE_AFTER_S) -> int:
        """Delete changes older than ``older_than_s`` (raising each namespace's floor)."""
        cutoff = {"cutoff": float(older_than_s)}
        now = self._db.dialect.now_s
        with self._db.write() as conn:
            conn.execute(
                text(
                    "UPDATE namespace_generations SET floor = (SELECT MAX(c.generation)"
                    " FROM namespace_changes c WHERE c.namespace = namespace_generations.namespace"
                    f" AND c.changed_at < {now} - :cutoff) WHERE EXISTS (SELECT 1 FROM"
                    " namespace_changes c WHERE c.namespace = namespace_generations.namespace"
                    f" AND c.changed_at < {now} - :cutoff)"
                ),
                cutoff,
            )
            result = conn.execute(
                text(f"DELETE FROM namespace_changes WHERE changed_at < {now} - :cutoff"), cutoff
            )
        return result.rowcount


class ChangeLoggingVectorStore(ForwardingVectorStore):
    """A ``VectorStore`` that logs each accepted write in a ``ChangeFeed``."""

    def __init__(self, store: VectorStore, feed: ChangeFeed) -> None:
        super().__init__(store)
        self.feed = feed

    def _log(self, ns: Namespace, ids: Sequence[str]) -> None:
        try:
            self.feed.record(ns, ids)
        except SQLAlchemyError as exc:
            log.warning("could not log a change to %s for other processes: %s", ns.key, exc)

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self.inner.upsert(ns, memories)
        if memories:
            self._log(ns, [m.id for m in memories])

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        removed = self.inner.delete(ns, ids)
        if ids:
            self._log(ns, ids)
        return removed

    def drop_namespace(self, ns: Namespace) -> None:
        self.inner.drop_namespace(ns)
        self._log(ns, [RESET])


class SharedLexicalIndex:
    """An ``InMemoryLexicalIndex`` that catches up with other processes' writes on each
    ``ensure`` (module doc). ``store``: the vector store to fetch changed memories from."""

    def __init__(
        self, feed: ChangeFeed, store: VectorStore, inner: InMemoryLexicalIndex | None = None
    ) -> None:
        self.inner = inner or InMemoryLexicalIndex()
        self.feed = feed
        self.store = store
        self._guard = threading.Lock()
        self._seen: dict[Namespace, int] = {}
        self._ns_locks: dict[Namespace, threading.Lock] = {}

    def _ns_lock(self, ns: Namespace) -> threading.Lock:
        with self._guard:
            return self._ns_locks.setdefault(ns, threading.Lock())

    def ensure(self, ns: Namespace, load: Callable[[], Iterable[Memory]]) -> None:
        try:
            current = self.feed.generation(ns)
        except SQLAlchemyError as exc:
            log.warning("change feed unreadable; lexical index of %s as it is: %s", ns.key, exc)
            self.inner.ensure(ns, load)
            return
        if self.inner.is_loaded(ns) and self._seen.get(ns, -1) >= current:
            return  # the common case: nobody else wrote
        with self._ns_lock(ns):
            seen = self._seen.get(ns, -1)
            if not self.inner.is_loaded(ns) or seen < 0:
                self._reload(ns, load, current)
                return
            if seen >= current:
                return
            changed = self.feed.changes(ns, seen, current)
            if changed is None:
                self._reload(ns, load, current)
                return
            if changed:
                found = self.store.get(ns, sorted(changed))
                self.inner.upsert(ns, found)
                self.inner.delete(ns, sorted(changed - {m.id for m in found}))
            self._seen[ns] = current

    def _reload(self, ns: Namespace, load: Callable[[], Iterable[Memory]], current: int) -> None:
        # ``current`` was read before loading: changes after it are applied next time.
        self.inner.forget(ns)
        self.inner.ensure(ns, load)
        self._seen[ns] = current

    def forget(self, ns: Namespace) -> None:
        with self._ns_lock(ns):
            self.inner.forget(ns)
            self._seen.pop(ns, None)

    def is_loaded(self, ns: Namespace) -> bool:
        return self.inner.is_loaded(ns)

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        self.inner.upsert(ns, memories)

    def delete(self, ns: Namespace, ids: Sequence[str]) -> None:
        self.inner.delete(ns, ids)

    def drop_namespace(self, ns: Namespace) -> None:
        self.forget(ns)

    def size(self, ns: Namespace) -> int:
        return self.inner.size(ns)

    def search(
        self, ns: Namespace, tokens: Iterable[str], n: int, *, min_importance: float = 0.0
    ) -> list[tuple[str, float]]:
        return self.inner.search(ns, tokens, n, min_importance=min_importance)

    def stats(self, ns: Namespace, tokens: Iterable[str]) -> CorpusStats:
        return self.inner.stats(ns, tokens)

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> list[str] | None:
        return self.inner.salient(ns, since=since, min_importance=min_importance, n=n)
