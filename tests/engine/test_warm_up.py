"""At start the local models load and read the prompt prefix every turn shares."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from backend.engine.turn import TurnRequest
from backend.engine.warm_up import warm_up
from backend.llm.embedded_llama import EmbeddedLlamaChatModel
from backend.llm.fake import FakeChatModel
from backend.llm.port import LLMUnavailable, PromptCache
from tests.support import require_embedded_model

from .conftest import make_rig

pytestmark = pytest.mark.anyio


class CachingModel(FakeChatModel):
    """A fake local model with a prompt cache: records what it was primed with."""

    def __init__(self, name: str, fail: bool = False) -> None:
        super().__init__(name)
        self.primed_with: list[list[dict[str, Any]]] = []
        self._fail = fail

    async def prime(self, messages: Sequence[dict[str, Any]]) -> None:
        if self._fail:
            raise LLMUnavailable("no model file")
        self.primed_with.append([dict(m) for m in messages])

    @property
    def primed(self) -> bool:
        return bool(self.primed_with)


async def test_each_local_model_reads_what_its_turns_share(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    chat, hippocampus = CachingModel("chat"), CachingModel("hippocampus")
    rig.engine.chat, rig.engine.hippocampus = chat, hippocampus
    rig.engine.settings = replace(rig.engine.settings, hippocampus_mode="compact")
    await warm_up(rig.engine)
    system = chat.primed_with[0][0]
    assert system == {"role": "system", "content": rig.engine.personas.default.system_prompt}
    assert "pick out the facts" in hippocampus.primed_with[0][0]["content"]
    # The first real turn starts with exactly that prefix.
    rig.chat.enqueue(["hi"])
    rig.engine.chat = rig.chat
    rig.hippocampus.enqueue(['{"facts": [], "emotion": "neutral"}'])
    rig.engine.hippocampus = rig.hippocampus
    await rig.engine.run(TurnRequest(user_id="u1", text="How are you?"))
    assert rig.chat.calls[0].messages[0] == system
    rig.sessions.close()


async def test_a_model_that_cannot_warm_up_is_left_for_its_first_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(tmp_path)
    chat, hippocampus = CachingModel("chat", fail=True), CachingModel("hippocampus")
    rig.engine.chat, rig.engine.hippocampus = chat, hippocampus
    with caplog.at_level(logging.WARNING, logger="backend.engine.warm_up"):
        await warm_up(rig.engine)  # logged, not raised
    assert "chat model did not warm up: no model file" in caplog.text
    assert not chat.primed and hippocampus.primed  # the next model still warms up
    # The model stays the engine's: its first turn is the one that loads it, and answers.
    assert rig.engine.chat is chat
    chat.enqueue(["Fine, thanks!"])
    hippocampus.enqueue(['{"facts": [], "emotion": "neutral"}'])
    turn, report = await rig.engine.run(TurnRequest(user_id="u1", text="How are you?"))
    assert turn.reply == "Fine, thanks!" and report["reply"]["status"] == "complete"
    assert [call.messages[-1]["content"] for call in chat.calls] == ["How are you?"]
    await rig.engine.drain()
    rig.sessions.close()


async def test_the_embedded_model_is_primed_for_real() -> None:
    require_embedded_model()
    model = EmbeddedLlamaChatModel(preset="smollm2-135m", n_ctx=1024, n_threads=1)
    assert isinstance(model, PromptCache) and not model.primed
    await model.prime([{"role": "system", "content": "You are kind."}])
    assert model.primed and model._llama.n_tokens > 0  # the prompt is in its cache
    await model.aclose()
