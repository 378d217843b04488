"""The reply first: a background generation yields the CPU to a foreground one.

When the chat and the hippocampus are both local llama.cpp models on a small machine,
they share its few cores. Run side by side, each gets half (llama.cpp's threads spin
while they wait, so oversubscribing is worse still), and the user waits for a reply
prompt that a hippocampus run is slowing down: measured on a 2-core box, the time to
the first token grew from turn to turn (docs/benchmarks.md, "Chat latency").

``ReplyFirst`` is shared by the two model instances. The chat model marks each
generation ``foreground()``; the hippocampus calls ``wait_for_foreground()`` before each
llama.cpp decode step (one batch of its prompt, or one generated token), so it pauses
within one step of a reply starting and resumes ``LINGER_S`` after no reply is running
(a reply sampled again by the guard starts its next attempt within that). Each model
may then use all the cores. Where the machine has room for both, or a role runs on a
server, nothing is shared and both run in parallel (``backend.engine.services``).

Both roles on one server on this machine (``OpenAICompatChatModel``) share one too, at
the grain of requests: the hippocampus opens a request only while no reply streams, as
such servers serve one request at a time.

Thread-safe; no I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# How often a paused background step rechecks its own stop flag (a cancelled run must
# not stay parked behind a long reply).
RECHECK_S = 0.1
# How long background steps stay paused after a reply's generation ends. A reply the
# guard samples again (or a tool round) ends one generation and starts the next within
# milliseconds; a background step let through in between is a whole batch of the
# hippocampus's prompt, which the retry's first token then shared the cores with.
LINGER_S = 0.3


class ReplyFirst:
    """Foreground generations run; background steps wait while any is running."""

    def __init__(self, linger_s: float = LINGER_S) -> None:
        self._changed = threading.Condition()
        self._foreground = 0
        self._linger_s = linger_s
        self._ended_at = float("-inf")  # when the last foreground generation ended
        self.paused_s = 0.0  # total time background steps spent waiting (for benches)

    @property
    def busy(self) -> bool:
        with self._changed:
            return self._foreground > 0

    @contextmanager
    def foreground(self) -> Iterator[None]:
        with self._changed:
            self._foreground += 1
        try:
            yield
        finally:
            with self._changed:
                self._foreground -= 1
                self._ended_at = time.monotonic()
                self._changed.notify_all()

    def wait_for_foreground(self, stop: threading.Event | None = None) -> None:
        """Block while a foreground generation runs, and for ``linger_s`` after one ends
        (or until ``stop`` is set)."""
        with self._changed:
            started = time.perf_counter()
            waited = False
            while not (stop is not None and stop.is_set()):
                if self._foreground > 0:
                    wait = RECHECK_S
                else:
                    wait = self._ended_at + self._linger_s - time.monotonic()
                    if wait <= 0:
                        break
                waited = True
                self._changed.wait(min(wait, RECHECK_S))
            if waited:
                self.paused_s += time.perf_counter() - started
