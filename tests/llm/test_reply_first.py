"""Two local models take turns on the CPU: the hippocampus pauses while a reply generates."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from backend.llm.embedded_llama import EmbeddedLlamaChatModel
from backend.llm.port import TextDelta
from backend.llm.reply_first import ReplyFirst
from tests.support import require_embedded_model


def test_a_background_step_runs_at_once_when_no_reply_runs() -> None:
    gate = ReplyFirst()
    gate.wait_for_foreground()  # returns: nothing to wait for
    assert not gate.busy and gate.paused_s == 0.0


def test_a_background_step_waits_for_the_reply_to_end() -> None:
    gate = ReplyFirst()
    resumed = threading.Event()

    def background_step() -> None:
        gate.wait_for_foreground()
        resumed.set()

    with gate.foreground():
        worker = threading.Thread(target=background_step)
        worker.start()
        assert not resumed.wait(0.3)  # paused while the reply runs
    assert resumed.wait(2)  # and resumes when it ends
    worker.join()
    assert gate.paused_s > 0.2


def test_a_background_step_stays_paused_between_two_attempts_of_a_reply() -> None:
    # The guard's retry ends one generation and starts the next: a background step let
    # through in the gap took a prompt batch's time from the retry's first token.
    gate = ReplyFirst(linger_s=1.0)
    ran: list[str] = []

    def background_step() -> None:
        gate.wait_for_foreground()
        ran.append("hippocampus")

    with gate.foreground():
        worker = threading.Thread(target=background_step)
        worker.start()
        time.sleep(0.05)
    time.sleep(0.1)  # the gap between the rejected attempt and the next
    with gate.foreground():
        ran.append("retry starts")
    worker.join(5)
    assert ran == ["retry starts", "hippocampus"]


def test_a_background_step_runs_once_the_linger_is_over() -> None:
    gate = ReplyFirst(linger_s=0.2)
    with gate.foreground():
        pass
    started = time.perf_counter()
    gate.wait_for_foreground()
    assert time.perf_counter() - started >= 0.15
    gate.wait_for_foreground()  # long after: at once


def test_a_stopped_background_step_does_not_stay_parked() -> None:
    gate = ReplyFirst()
    stop = threading.Event()
    with gate.foreground():
        worker = threading.Thread(target=gate.wait_for_foreground, args=(stop,))
        worker.start()
        stop.set()
        worker.join(2)
        assert not worker.is_alive()


@pytest.mark.anyio
async def test_the_hippocampus_model_generates_nothing_while_a_reply_streams() -> None:
    require_embedded_model()
    gate = ReplyFirst()
    common: dict[str, Any] = {"preset": "smollm2-135m", "n_ctx": 1024, "temperature": 0.0}
    chat = EmbeddedLlamaChatModel(**common, seed=1, reply_first=gate)
    hippocampus = EmbeddedLlamaChatModel(**common, seed=2, reply_first=gate, background=True)
    await chat.load()
    await hippocampus.load()
    background: list[float] = []

    async def run_background() -> None:
        prompt = [{"role": "user", "content": "Write a long story about a lighthouse."}]
        async for delta in hippocampus.stream(prompt, max_tokens=400):
            if isinstance(delta, TextDelta):
                background.append(time.perf_counter())

    task = asyncio.ensure_future(run_background())
    while len(background) < 3:  # the hippocampus is generating
        await asyncio.sleep(0.01)
    reply: list[float] = []
    prompt = [{"role": "user", "content": "Tell me three short facts about cats."}]
    async for delta in chat.stream(prompt, max_tokens=60):
        if isinstance(delta, TextDelta):
            reply.append(time.perf_counter())
    ended = time.perf_counter()
    await asyncio.sleep(0.5)
    # At most the one decode step in flight when the reply began came out during it.
    during = [t for t in background if reply[0] < t < ended]
    assert len(during) <= 1, f"{len(during)} background tokens during the reply"
    assert gate.paused_s > 0
    assert any(t > ended for t in background)  # and it went on afterwards
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await chat.aclose()
    await hippocampus.aclose()
