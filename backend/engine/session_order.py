"""Ordering across processes: wait for a session's cross-process lock from asyncio.

``backend.sessions.locks`` gives non-blocking ``try_acquire``; this polls it from
the event loop (a short back-off), so a turn that waits parks no worker thread — the
merge it waits for may need one. Inside a process the turn engine's ``asyncio.Lock``
comes first, so only turns of *other* processes are ever polled for.

Failure policy: database errors propagate to the caller (the turn fails before any
model is called); a cancelled wait never leaks a lock it happened to get.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from backend.sessions.locks import LockHandle, LockKind, SessionLocks

log = logging.getLogger(__name__)

# A reply or a merge takes seconds; polling this often adds at most ~100 ms to the next
# turn (or merge) of a session that just moved to another process.
FIRST_POLL_S = 0.01
MAX_POLL_S = 0.1


async def acquire_session(
    locks: SessionLocks, session_id: str, kind: LockKind = "turn"
) -> LockHandle:
    """The session's cross-process lock of this kind, once no other process holds it."""
    delay = FIRST_POLL_S
    while True:
        attempt = asyncio.ensure_future(asyncio.to_thread(locks.try_acquire, session_id, kind))
        try:
            handle = await asyncio.shield(attempt)
        except asyncio.CancelledError:
            attempt.add_done_callback(lambda done: _release_late(locks, done))
            raise
        if handle is not None:
            return handle
        await asyncio.sleep(delay)
        delay = min(MAX_POLL_S, delay * 2)


def _release_late(locks: SessionLocks, done: asyncio.Future[Any]) -> None:
    """A lock obtained after the waiter was cancelled goes back at once."""
    if not done.cancelled() and done.exception() is None and done.result() is not None:
        locks.release(done.result())


async def release_session(locks: SessionLocks, handle: LockHandle) -> None:
    await asyncio.to_thread(locks.release, handle)
