"""One owner per data directory: an OS-level lock held by the process that opens the
embedded stores, for as long as it has them open (docs/reliability.md, "One owner per
data directory").

Chroma's embedded (persistent) store, like the SQLite session database, belongs to ONE
process: a second process writing the same directory corrupts what the first one has
cached (``Error finding id`` on every later read, until a restart). So the process that
opens them takes an exclusive ``flock`` on ``<data_dir>/.owner.lock`` and writes who it
is to ``<data_dir>/owner.json`` (pid, the server's URL when it is a server, command,
start time). Another process that finds the lock taken gets ``DataDirBusy``, whose
message names the owner; the CLI uses that owner's HTTP API instead when it is a server.

Only the lock decides: ``flock`` dies with its process (even on SIGKILL), so a stale
``owner.json`` left by a killed owner never blocks the next start. Locks are per open
file: a second acquisition in the same process is refused too. The lock file itself is
never deleted (deleting a lock file that another process may be about to lock is a race).

With a Chroma server AND PostgreSQL (the cluster setup, docs/deployment.md) nothing in the
data directory is shared between processes that way, so ``needs_owner_lock`` is False.

POSIX (Linux, macOS): ``fcntl.flock``. Windows: ``msvcrt.locking`` on the first byte of
the lock file (also released by the OS when the process ends).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "LOCK_FILE",
    "OWNER_FILE",
    "DataDirBusy",
    "DataDirLock",
    "OwnerRecord",
    "acquire_data_dir",
    "current_owner",
    "needs_owner_lock",
]

LOCK_FILE = ".owner.lock"
OWNER_FILE = "owner.json"

# current_owner() takes the lock for an instant to see whether anyone holds it; an
# acquire that meets such a probe tries again for this long before calling it busy.
_RETRY_S = 0.5
# How long current_owner() waits for a new owner's record to appear.
_RECORD_WAIT_S = 1.0


@dataclass(frozen=True)
class OwnerRecord:
    pid: int
    url: str | None  # the server's base URL; None for a process that serves no HTTP
    command: str  # serve, chat, mcp, demo, ...
    started_at: str  # ISO 8601, UTC

    def describe(self) -> str:
        where = f", serving {self.url}" if self.url else ""
        return f"pid {self.pid}, `limbic-memory {self.command}` since {self.started_at}{where}"


class DataDirBusy(Exception):
    """Another process (or another acquisition in this one) holds the data directory."""

    def __init__(self, data_dir: Path, owner: OwnerRecord | None) -> None:
        self.data_dir = data_dir
        self.owner = owner
        super().__init__(_busy_message(data_dir, owner))


def _busy_message(data_dir: Path, owner: OwnerRecord | None) -> str:
    who = f"({owner.describe()})" if owner else "(its owner record is missing)"
    if owner is not None and owner.pid == os.getpid():
        who = f"(this process, {owner.describe()})"
    if owner is not None and owner.url:
        advice = (
            f"use that server (the CLI's chat, mcp, personas import and demo commands go "
            f"through {owner.url} on their own), or stop it first"
        )
    else:
        advice = "wait for it to finish or stop it, then try again"
    return (
        f"the data directory {data_dir} is in use by another limbic-memory process {who}. "
        "Its embedded store cannot be opened by two processes at once: "
        f"{advice} (docs/reliability.md, 'One owner per data directory')"
    )


# --- the OS lock ---------------------------------------------------------------------------

if sys.platform == "win32":  # pragma: no cover - not a target of the test suite
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    _PROBE_FLAGS = os.O_RDWR

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)

    _PROBE_FLAGS = os.O_RDONLY  # flock needs no write access: a probe creates nothing


def _lock_with_retry(fd: int) -> bool:
    deadline = time.monotonic() + _RETRY_S
    while True:
        if _try_lock(fd):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


# --- the owner record ------------------------------------------------------------------------


def _read_record(data_dir: Path) -> OwnerRecord | None:
    try:
        raw: Any = json.loads((data_dir / OWNER_FILE).read_text(encoding="utf-8"))
        return OwnerRecord(
            pid=int(raw["pid"]),
            url=str(raw["url"]) if raw.get("url") else None,
            command=str(raw.get("command") or "?"),
            started_at=str(raw.get("started_at") or "?"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_record(data_dir: Path, record: OwnerRecord) -> None:
    """Replaced atomically: a reader sees the old record or the new one, never half."""
    target = data_dir / OWNER_FILE
    temporary = data_dir / f".{OWNER_FILE}.{os.getpid()}.tmp"
    try:
        temporary.write_text(json.dumps(asdict(record), indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, target)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else (or cannot tell: assume it does)
    return True


# --- the API ---------------------------------------------------------------------------------


class DataDirLock:
    """The held lock (``acquire_data_dir``); ``release()`` it, or use it as a context
    manager. Released by the OS too when the process ends."""

    def __init__(self, data_dir: Path, fd: int, record: OwnerRecord) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd
        self.record = record

    @property
    def held(self) -> bool:
        return self._fd is not None

    def set_url(self, url: str) -> None:
        """Record the server's base URL, once it listens there."""
        if self._fd is None:
            raise RuntimeError("the data directory lock is released")
        self.record = OwnerRecord(self.record.pid, url, self.record.command, self.record.started_at)
        _write_record(self.data_dir, self.record)

    def release(self) -> None:
        """Remove the owner record, then let go of the lock. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                (self.data_dir / OWNER_FILE).unlink(missing_ok=True)
            _unlock(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # dropped without release(): the lock goes with it
        fd = getattr(self, "_fd", None)
        if fd is not None:
            self._fd = None
            with contextlib.suppress(OSError):
                os.close(fd)


def acquire_data_dir(data_dir: Path, *, command: str, url: str | None = None) -> DataDirLock:
    """Take ``data_dir`` for this process (creating the directory if needed) and record
    the owner. Raises ``DataDirBusy`` (its ``owner``: who holds it) when it is taken."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _lock_with_retry(fd):
            raise DataDirBusy(data_dir, _holder_record(data_dir))
        record = OwnerRecord(
            pid=os.getpid(),
            url=url,
            command=command,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        _write_record(data_dir, record)
    except BaseException:
        _unlock(fd)
        os.close(fd)
        raise
    return DataDirLock(data_dir, fd, record)


def current_owner(data_dir: Path) -> OwnerRecord | None:
    """Who holds ``data_dir`` now; None when nobody does (a stale ``owner.json`` left by a
    killed owner is ignored: only the lock counts)."""
    data_dir = Path(data_dir)
    try:
        fd = os.open(data_dir / LOCK_FILE, _PROBE_FLAGS)
    except FileNotFoundError:
        return None  # never owned (or not a data directory yet)
    except OSError:
        return _read_record(data_dir)  # cannot probe: trust the record
    try:
        if _try_lock(fd):
            _unlock(fd)
            return None
    finally:
        os.close(fd)
    return _holder_record(data_dir)


def _holder_record(data_dir: Path) -> OwnerRecord | None:
    """The record of the process that holds the lock: a new owner writes it just after
    locking, so a missing one (or one of a dead process, left by the previous owner) is
    waited for a moment."""
    deadline = time.monotonic() + _RECORD_WAIT_S
    while True:
        record = _read_record(data_dir)
        if (record is not None and _alive(record.pid)) or time.monotonic() >= deadline:
            return record
        time.sleep(0.02)


def needs_owner_lock(settings: Any) -> bool:
    """True when the store is embedded: a local Chroma directory (no ``storage.chroma_url``)
    or a SQLite session database (no ``storage.database_url``). A Chroma server together
    with PostgreSQL (the cluster setup) is shared by many processes by design: False."""
    storage = settings.storage
    return storage.chroma_url is None or storage.database_url is None
