"""The UI's turns in flight, by turn id: begun by a form post, streamed by an EventSource.

A turn's lifetime (``TurnEngine.turn``) spans two requests here, so the registry holds
it: ``begin`` enters it, and it is left when the stream ends (``pump``) or, for a turn
whose stream is never opened (the browser went away between the post and the stream),
after ``UNCLAIMED_S``: until then the turn holds its session. Finished turns are kept
``KEEP_S`` for the stop button's and the memory panel's look-ups, then forgotten.

The reply is read from the engine by a task of its own (``pump``), not by the SSE
response: when a client goes away, the response's anyio cancel scope cancels every await
it makes, again and again, which would also cut short the engine's own clean-up (storing
the partial reply, starting the merge that releases the session). The pump instead gets
one plain ``Task.cancel()``, after which the engine finishes the turn normally.

Failure policy: never raises for an unknown or expired turn (``None``); waiting for a
merge is bounded and gives ``None`` on timeout; a model failure reaches the reader as an
``("error", message)`` item.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from backend.engine.turn import Turn, TurnEngine, TurnRequest
from backend.llm.port import LLMError

log = logging.getLogger(__name__)

UNCLAIMED_S = 120.0  # a browser opens the stream within milliseconds of the post
KEEP_S = 600.0  # long enough for a slow hippocampus merge to be shown


@dataclass
class PendingTurn:
    turn: Turn
    user: str
    text: str  # the user's message, for the retry button
    created: float = field(default_factory=time.monotonic)
    claimed: bool = False
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    lifetime: AsyncExitStack = field(default_factory=AsyncExitStack)  # the turn's context
    # A regeneration: the stored reply it redoes (its bubble is that message's).
    message_id: int | None = None
    # An edit's branch: what the edit removed from memory (shown with the turn's report).
    revision: dict[str, Any] | None = None

    @property
    def session_id(self) -> str:
        return self.turn.session.id


class TurnRegistry:
    """Turns of the UI in flight (one per app, created in ``mount_ui``)."""

    def __init__(self, engine: TurnEngine) -> None:
        self._engine = engine
        self._turns: dict[str, PendingTurn] = {}
        self._tasks: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self._turns)

    async def begin(
        self, request: TurnRequest, text: str, *, message_id: int | None = None
    ) -> PendingTurn:
        """Begin the turn (``TurnEngine.turn``'s errors pass through, nothing held) and
        keep it until its stream claims it."""
        lifetime = AsyncExitStack()
        turn = await lifetime.enter_async_context(self._engine.turn(request))
        entry = PendingTurn(turn, request.user_id, text, lifetime=lifetime, message_id=message_id)
        self._turns[turn.turn_id] = entry
        asyncio.get_running_loop().call_later(UNCLAIMED_S, self._expire, turn.turn_id)
        return entry

    def get(self, turn_id: str, user: str) -> PendingTurn | None:
        entry = self._turns.get(turn_id)
        return entry if entry is not None and entry.user == user else None

    def claim(self, turn_id: str, user: str) -> PendingTurn | None:
        """The turn, for the one stream that may read it (``None`` if already read)."""
        entry = self.get(turn_id, user)
        if entry is None or entry.claimed:
            return None
        entry.claimed = True
        return entry

    def finish(self, entry: PendingTurn) -> None:
        """The stream is over (read to the end, failed or stopped)."""
        entry.finished.set()
        asyncio.get_running_loop().call_later(KEEP_S, self._turns.pop, entry.turn.turn_id, None)

    def pump(self, entry: PendingTurn) -> tuple[asyncio.Queue[tuple[str, str]], asyncio.Task[None]]:
        """Read the turn's reply in a task: ``("token", text)`` items, then ``("end", "")``
        or ``("error", message)``. Cancel the task to stop the reply."""
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

        async def run() -> None:
            try:
                async for text in entry.turn.stream():
                    queue.put_nowait(("token", text))
                queue.put_nowait(("end", ""))
            except LLMError as exc:
                log.warning("turn %s: the model failed: %s", entry.turn.turn_id, exc)
                queue.put_nowait(("error", str(exc)))
            finally:
                try:
                    await entry.lifetime.aclose()
                finally:
                    self.finish(entry)

        def ended(task: asyncio.Future[None]) -> None:
            self._tasks.discard(task)
            if not entry.finished.is_set():  # cancelled before it began: end it all the same
                self._close(entry)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(ended)
        return queue, task

    def _close(self, entry: PendingTurn) -> None:
        """Leave the turn's context in a task of its own; the entry is finished."""
        task = asyncio.ensure_future(entry.lifetime.aclose())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self.finish(entry)

    def _expire(self, turn_id: str) -> None:
        entry = self._turns.get(turn_id)
        if entry is None or entry.claimed:
            return
        log.info("turn %s: stream never opened, abandoning it", turn_id)
        entry.claimed = True
        self._close(entry)

    async def wait_finished(self, entry: PendingTurn, timeout: float) -> bool:
        try:
            await asyncio.wait_for(entry.finished.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def wait_merged(self, entry: PendingTurn, timeout: float) -> dict[str, Any] | None:
        """The turn's memory report once merged, or ``None`` (timeout, or it failed)."""
        started = time.monotonic()
        if not await self.wait_finished(entry, timeout):
            return None
        merged = entry.turn.merged
        if merged is None:
            return None
        left = max(0.0, timeout - (time.monotonic() - started))
        try:
            return await asyncio.wait_for(asyncio.shield(merged), left)
        except TimeoutError:
            return None
        except Exception:  # the merge logs its own failures
            return None
