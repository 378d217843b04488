"""Per-session locks that hold across processes, and are let go when a process dies.

Two locks per session (``LockKind``), each ordering one thing between processes (several
app processes behind a load balancer, docs/deployment.md): ``"turn"``, held from a
turn's start until its reply is stored, so replies of one session never interleave; and
``"memory"``, held by the worker that merges the session's turns into its memory state
(backend.engine.memory_worker), so merges run one at a time and in order. Inside one
process the turn engine orders with ``asyncio`` locks first. ``try_acquire`` never
blocks, so a waiter polls from the event loop instead of parking a worker thread.

- PostgreSQL: ``pg_try_advisory_lock`` on a connection kept for as long as the lock is
  held. A process that dies closes its connections, and the server drops their locks
  at once (TCP keepalives cover a machine that vanishes). Costs one connection per lock
  held, from a pool of its own.
- SQLite (a file): a POSIX byte-range lock (``lockf``) at an offset derived from the
  session id, on ``<database>.locks``. The kernel drops it when the process dies.
  SQLite remains documented as single-process; this is cheap, so several processes on
  one file are ordered too.
- ``:memory:``: in-process only (one process by definition).

Keys are 62-bit hashes of the session id: two sessions that collide merely wait for each
other. Failure policy: database errors propagate from ``try_acquire``; ``release`` never
raises (a lock it cannot release cleanly is dropped by closing its connection).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from sqlalchemy import Connection, create_engine, text

from backend.sessions.db import PG_KEEPALIVES, sqlalchemy_url

try:  # POSIX only; elsewhere the SQLite backend orders turns within one process only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

# Lock connections: a few kept open, more opened while many turns are in flight.
LOCK_POOL_SIZE = 4
LOCK_MAX_OVERFLOW = 200


LockKind = Literal["turn", "memory"]
_PREFIX: dict[str, str] = {"turn": "limbic-session", "memory": "limbic-memory"}


def lock_key(session_id: str, kind: LockKind = "turn") -> int:
    """A stable 62-bit key for the session (non-negative: it is also a file offset)."""
    digest = hashlib.blake2b(f"{_PREFIX[kind]}:{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


@dataclass(slots=True)
class LockHandle:
    session_id: str
    key: int
    conn: Connection | None = None  # PostgreSQL: the connection holding the lock


class SessionLocks(Protocol):
    def try_acquire(self, session_id: str, kind: LockKind = "turn") -> LockHandle | None:
        """The lock if it is free now (held by no process, this one included), else None."""
        ...

    def release(self, handle: LockHandle) -> None:
        """Let go of a lock from ``try_acquire``."""
        ...

    def close(self) -> None: ...


class _Held:
    """Keys this process holds: exclusive within the process too."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._keys: set[int] = set()

    def take(self, key: int) -> bool:
        with self._guard:
            if key in self._keys:
                return False
            self._keys.add(key)
            return True

    def drop(self, key: int) -> None:
        with self._guard:
            self._keys.discard(key)


class FileRangeLocks:
    """``lockf`` byte-range locks on one file (``path`` None: in-process locks only)."""

    def __init__(self, path: Path | None) -> None:
        self._held = _Held()
        self._fd: int | None = None
        if path is not None and fcntl is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Kept open for the store's life: closing any descriptor of the file would
            # drop every lock this process holds on it (POSIX record-lock semantics).
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def try_acquire(self, session_id: str, kind: LockKind = "turn") -> LockHandle | None:
        key = lock_key(session_id, kind)
        if not self._held.take(key):
            return None
        if self._fd is not None:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, key)
            except OSError:  # EAGAIN/EACCES: another process holds it
                self._held.drop(key)
                return None
        return LockHandle(session_id, key)

    def release(self, handle: LockHandle) -> None:
        if self._fd is not None:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, handle.key)
            except OSError:  # pragma: no cover - only for a closed descriptor
                log.exception("could not unlock session %s", handle.session_id)
        self._held.drop(handle.key)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class PgAdvisoryLocks:
    """``pg_try_advisory_lock`` on a held connection (module doc)."""

    def __init__(self, url: str) -> None:
        self._held = _Held()
        self._engine = create_engine(
            sqlalchemy_url(url),
            pool_size=LOCK_POOL_SIZE,
            max_overflow=LOCK_MAX_OVERFLOW,
            pool_pre_ping=True,
            connect_args={"connect_timeout": 10, **PG_KEEPALIVES},
        )

    def try_acquire(self, session_id: str, kind: LockKind = "turn") -> LockHandle | None:
        key = lock_key(session_id, kind)
        if not self._held.take(key):
            return None
        try:
            conn = self._engine.connect()
        except BaseException:
            self._held.drop(key)
            raise
        try:
            got = bool(
                conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar_one()
            )
            conn.commit()  # a session-level lock outlives the transaction
        except BaseException:
            self._held.drop(key)
            conn.invalidate()  # closed: the server drops whatever it held
            conn.close()
            raise
        if not got:
            conn.close()
            self._held.drop(key)
            return None
        return LockHandle(session_id, key, conn)

    def release(self, handle: LockHandle) -> None:
        conn: Any = handle.conn
        try:
            unlocked = conn.execute(
                text("SELECT pg_advisory_unlock(:k)"), {"k": handle.key}
            ).scalar_one()
            conn.commit()
            if not unlocked:
                log.error("session %s was not locked on its connection", handle.session_id)
            conn.close()
        except Exception:
            log.warning("could not unlock session %s; closing its connection", handle.session_id)
            conn.invalidate()
            conn.close()
        finally:
            self._held.drop(handle.key)

    def close(self) -> None:
        self._engine.dispose()


def session_locks(target: str) -> SessionLocks:
    """The lock kind for a session database ``target`` (path, ``:memory:`` or URL)."""
    from backend.sessions.db import is_postgres_url

    if is_postgres_url(target):
        return PgAdvisoryLocks(target)
    if target == ":memory:":
        return FileRangeLocks(None)
    return FileRangeLocks(Path(f"{target}.locks"))
