from __future__ import annotations

import asyncio

import pytest

from backend.llm.fake import FakeChatModel
from backend.llm.port import (
    Completion,
    Finish,
    LLMStreamInterrupted,
    Sampling,
    TextDelta,
    ToolCall,
    Usage,
)

pytestmark = pytest.mark.anyio

HELLO = [{"role": "user", "content": "hi"}]


async def test_enqueued_chunks_stream_in_order_and_calls_are_recorded() -> None:
    model = FakeChatModel()
    model.enqueue(["Hel", "lo", Usage(3, 2)])
    messages = [{"role": "user", "content": "hi"}]
    deltas = [d async for d in model.stream(messages, json_schema={"type": "object"}, max_tokens=9)]
    messages[0]["content"] = "changed later"

    assert deltas == [TextDelta("Hel"), TextDelta("lo"), Usage(3, 2), Finish("stop")]
    (call,) = model.calls
    assert call.messages == HELLO  # a copy, not the caller's list
    assert call.json_schema == {"type": "object"}
    assert call.max_tokens == 9
    assert call.tools is None


async def test_tool_calls_and_complete() -> None:
    model = FakeChatModel()
    call = ToolCall("c1", "memory_recall", '{"query": "tea"}')
    model.enqueue([call])
    tool = {"type": "function", "function": {"name": "memory_recall", "parameters": {}}}
    completion = await model.complete(HELLO, tools=[tool])
    assert completion == Completion(text="", tool_calls=(call,), finish_reason="tool_calls")
    assert model.calls[0].tools == [tool]


async def test_exceptions_are_raised_where_they_stand() -> None:
    model = FakeChatModel()
    model.enqueue(["par", "tial", LLMStreamInterrupted("cut", partial_text="partial")])
    received = []
    with pytest.raises(LLMStreamInterrupted):
        async for delta in model.stream(HELLO):
            received.append(delta)
    assert received == [TextDelta("par"), TextDelta("tial")]


async def test_wait_for_blocks_until_released() -> None:
    model = FakeChatModel()
    gate = asyncio.Event()
    script = model.enqueue(["late"], wait_for=gate)
    task = asyncio.create_task(model.complete(HELLO))
    await script.started.wait()
    await asyncio.sleep(0.01)
    assert not task.done()
    gate.set()
    assert (await task).text == "late"
    assert script.finished.is_set()


async def test_first_token_delay() -> None:
    model = FakeChatModel()
    model.enqueue(["a", "b"], first_token_delay_s=0.05, delay_s=0.01)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await model.complete(HELLO)
    assert loop.time() - start >= 0.06


async def test_default_reply_and_missing_script() -> None:
    assert (await FakeChatModel(default=["ok"]).complete(HELLO)).text == "ok"
    with pytest.raises(AssertionError, match="no reply enqueued"):
        await FakeChatModel().complete(HELLO)


async def test_sampling_is_recorded_and_images_are_off_unless_asked() -> None:
    model = FakeChatModel()
    sampling = Sampling(stop=(",",), seed=7, logit_bias={"28": -100})
    model.enqueue(["a"])
    model.enqueue(["b"])
    await model.complete(HELLO, temperature=0.0, sampling=sampling)
    await model.complete(HELLO)
    assert model.calls[0].sampling == sampling
    assert model.calls[0].temperature == 0.0
    assert model.calls[1].sampling is None
    assert not model.supports_images
    assert FakeChatModel(supports_images=True).supports_images
