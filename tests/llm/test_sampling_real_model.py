"""A client's generation parameters on the real embedded model (llama.cpp, SmolLM2-135M):
stop sequences cut the reply, a seed makes sampling repeatable, temperature 0 is greedy,
and a logit bias keeps a token out. Replies are at most 40 tokens (seconds in all)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from backend.llm.embedded_llama import EmbeddedLlamaChatModel
from backend.llm.port import LLMBadRequest, Sampling
from tests.support import require_embedded_model

pytestmark = [pytest.mark.anyio, pytest.mark.real_model]

FRUITS = [
    {
        "role": "user",
        "content": "Name five fruits in one line, separated by commas, like: apple, pear, ...",
    }
]
DRAGON = [{"role": "user", "content": "Tell me a short story about a dragon."}]


@pytest.fixture
async def model() -> AsyncIterator[EmbeddedLlamaChatModel]:
    require_embedded_model()
    chat = EmbeddedLlamaChatModel(preset="smollm2-135m", n_ctx=1024, n_threads=1, max_tokens=40)
    yield chat
    await chat.aclose()


async def test_a_stop_sequence_ends_the_reply_before_it(model: EmbeddedLlamaChatModel) -> None:
    free = await model.complete(FRUITS, temperature=0)
    stopped = await model.complete(FRUITS, temperature=0, sampling=Sampling(stop=(",",)))
    assert "," in free.text  # the prompt does make the model write commas
    assert "," not in stopped.text
    assert stopped.text.strip()
    # greedy both times: the same reply, cut where the first comma was
    assert stopped.text == free.text.split(",")[0]
    assert stopped.finish_reason == "stop"


async def test_the_same_seed_gives_the_same_text(model: EmbeddedLlamaChatModel) -> None:
    first = await model.complete(DRAGON, temperature=0.9, sampling=Sampling(seed=11))
    again = await model.complete(DRAGON, temperature=0.9, sampling=Sampling(seed=11))
    assert first.text.strip()
    assert again.text == first.text
    # and the seed is what decides it: other seeds sample other replies
    others = [
        (await model.complete(DRAGON, temperature=0.9, sampling=Sampling(seed=seed))).text
        for seed in (12, 13)
    ]
    assert any(text != first.text for text in others)


async def test_temperature_zero_is_greedy_and_repeatable(model: EmbeddedLlamaChatModel) -> None:
    first = await model.complete(DRAGON, temperature=0)
    # a seed changes nothing at temperature 0: there is nothing to draw
    again = await model.complete(DRAGON, temperature=0, sampling=Sampling(seed=99))
    assert first.text.strip()
    assert again.text == first.text


async def test_a_logit_bias_keeps_a_token_out(model: EmbeddedLlamaChatModel) -> None:
    from llama_cpp import Llama

    vocab = Llama(model_path=str(model.model_path), vocab_only=True, verbose=False)
    (comma,) = vocab.tokenize(b",", add_bos=False, special=False)
    vocab.close()
    free = await model.complete(DRAGON, temperature=0)
    biased = await model.complete(
        DRAGON, temperature=0, sampling=Sampling(logit_bias={str(comma): -100})
    )
    assert "," in free.text
    assert biased.text.strip()
    assert "," not in biased.text


async def test_a_logit_bias_outside_the_vocabulary_is_a_bad_request(
    model: EmbeddedLlamaChatModel,
) -> None:
    with pytest.raises(LLMBadRequest, match="outside the vocabulary"):
        await model.complete(DRAGON, sampling=Sampling(logit_bias={"999999": -100}))
    # the model still answers the next request
    assert (await model.complete(DRAGON, max_tokens=4)).text
