"""A local model reads the start of the next prompt between turns, and gives way."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from backend.llm.embedded_llama import EmbeddedLlamaChatModel
from backend.llm.port import ReadAhead
from backend.llm.read_ahead import READ_CHUNK, REPLY_ROOM, read_prefix
from tests.support import require_embedded_model

pytestmark = pytest.mark.anyio


class Cache:
    """The parts of a ``Llama`` that ``read_prefix`` uses: its tokens and ``eval``."""

    def __init__(self, cached: list[int], n_ctx: int = 4096) -> None:
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.input_ids[: len(cached)] = cached
        self.n_tokens = len(cached)
        self._n_ctx = n_ctx
        self.batches: list[list[int]] = []

    def n_ctx(self) -> int:
        return self._n_ctx

    def eval(self, tokens: list[int]) -> None:
        self.batches.append(list(tokens))
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)


def test_only_what_the_cache_lacks_is_read_in_chunks() -> None:
    prompt = list(range(1, 301))
    # The previous prompt and its reply: the first 100 tokens agree, then it differs.
    cache = Cache([*prompt[:100], 9999, 9998])
    assert read_prefix(cache, prompt, lambda: False) == 200
    assert [len(b) for b in cache.batches] == [READ_CHUNK] * 3 + [200 - 3 * READ_CHUNK]
    assert cache.batches[0][0] == 101 and cache.input_ids[: cache.n_tokens].tolist() == prompt


def test_a_generation_that_wants_the_model_stops_the_read_between_chunks() -> None:
    prompt = list(range(1, 301))
    cache = Cache([])
    wanted = iter([False, False, True])
    assert read_prefix(cache, prompt, lambda: next(wanted)) == 2 * READ_CHUNK
    # What was read stays: the reply that comes reads only the rest.
    assert cache.input_ids[: cache.n_tokens].tolist() == prompt[: 2 * READ_CHUNK]


def test_a_prompt_that_leaves_no_room_to_reply_is_not_read() -> None:
    cache = Cache([1, 2, 3], n_ctx=1024)
    assert read_prefix(cache, list(range(1, 1024 - REPLY_ROOM + 2)), lambda: False) == 0
    assert cache.batches == [] and cache.n_tokens == 3


HISTORY = [
    {"role": "system", "content": "You are Tilly, a warm companion. Keep replies short."},
    {"role": "user", "content": "My cat Pickle knocked my tea off the desk again."},
    {"role": "assistant", "content": "Oh no, Pickle! Was it a full cup?"},
]


async def test_the_next_prompt_read_ahead_is_not_read_again_by_the_reply() -> None:
    require_embedded_model()
    model = EmbeddedLlamaChatModel(
        preset="smollm2-135m", chat_format="chatml", n_ctx=1024, n_threads=1, max_tokens=4
    )
    assert isinstance(model, ReadAhead)
    assert await model.read_ahead(HISTORY) == 0  # not loaded: warming up is prime's job
    await model.prime(HISTORY[:1])
    llama = model._llama
    read = await model.read_ahead(HISTORY)
    assert read > 0 and llama.n_tokens > read  # the system message was in the cache
    assert model.tokens_read["ahead"] == read
    primed = model.tokens_read["prompt"]  # the system message, read by prime
    evaluated: list[int] = []
    plain_eval = llama.eval

    def counting(tokens: Any) -> None:
        evaluated.append(len(tokens))
        plain_eval(tokens)

    llama.eval = counting
    message = {"role": "user", "content": "Half full. She looked very pleased."}
    async for _ in model.stream([*HISTORY, message]):
        pass
    # The reply read only the new message and its own prompt: one batch, then a token a
    # step (llama-cpp-python evaluates each sampled token).
    new = llama.tokenize(b"<|im_start|>user\nHalf full. She looked very pleased.<|im_end|>\n")
    assert evaluated[0] <= len(new) + 4 and all(n == 1 for n in evaluated[1:])
    assert model.tokens_read["prompt"] - primed == evaluated[0]  # what benches report
    await model.aclose()


async def test_a_read_ahead_gives_way_to_a_generation() -> None:
    require_embedded_model()
    model = EmbeddedLlamaChatModel(
        preset="smollm2-135m", chat_format="chatml", n_ctx=1024, n_threads=1, max_tokens=4
    )
    await model.prime(HISTORY[:1])
    before = model._llama.n_tokens
    with model._wanting():  # a generation waits for the model, or runs
        assert await model.read_ahead(HISTORY) == 0
    assert model._llama.n_tokens == before
    # Without ChatML rendered here the prompt's start is not known: nothing is read.
    other = EmbeddedLlamaChatModel(preset="smollm2-135m", n_ctx=1024, n_threads=1)
    await other.prime(HISTORY[:1])
    assert await other.read_ahead(HISTORY) == 0
    await asyncio.gather(model.aclose(), other.aclose())
