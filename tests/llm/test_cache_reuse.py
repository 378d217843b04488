"""Reusing llama.cpp's cache past a removed span (a conversation's trimmed start)."""

from __future__ import annotations

from typing import Any

import numpy as np

from backend.llm.cache_reuse import MIN_CHUNK, plan_chunks, reuse_shifted
from tests.support import require_embedded_model


def test_the_rest_after_a_removed_span_is_found() -> None:
    cached = list(range(1, 101))
    prompt = [*range(1, 11), *range(31, 101), 500, 501]  # 11-30 trimmed, two new tokens
    assert plan_chunks(cached, prompt) == [(30, 10, 70)]


def test_two_removed_spans_give_two_chunks() -> None:
    cached = list(range(200))
    prompt = [*range(10), *range(20, 100), *range(140, 200), 900]
    assert plan_chunks(cached, prompt) == [(20, 10, 80), (140, 90, 60)]


def test_a_short_exchange_between_two_blocks_that_went_is_moved_too() -> None:
    # The cache holds exchanges with the notes blocks shown before them (the 900s); the
    # prompt drops the blocks. The middle exchange is shorter than MIN_CHUNK.
    first, short, last = list(range(100, 140)), list(range(200, 212)), list(range(300, 340))
    blocks = [list(range(900 + 20 * i, 915 + 20 * i)) for i in range(3)]
    head = list(range(10))
    cached = [*head, *blocks[0], *first, *blocks[1], *short, *blocks[2], *last]
    prompt = [*head, *first, *short, *last, 7]
    assert plan_chunks(cached, prompt) == [(25, 10, 40), (80, 50, 12), (107, 62, 40)]
    # The first chunk still needs MIN_CHUNK tokens: a short run alone is not taken.
    assert plan_chunks(cached, [*head, *short, 7]) == []


def test_nothing_to_move_when_nothing_long_enough_matches() -> None:
    cached = list(range(100))
    assert plan_chunks(cached, [*range(10), *range(60, 60 + MIN_CHUNK - 1), 7]) == []
    assert plan_chunks(cached, [*range(50), 999]) == []  # a plain prefix: nothing moves
    assert plan_chunks([], [1, 2, 3]) == []


def _conversation(first: int, last: int, question: str) -> str:
    text = "<|im_start|>system\nYou are a kind companion. Keep answers short.<|im_end|>\n"
    for i in range(first, last):
        text += (
            f"<|im_start|>user\nMessage {i}: today I did thing number {i} with my friend "
            f"{i * 7} and it was nice.<|im_end|>\n<|im_start|>assistant\nThat sounds lovely, "
            f"thing {i} with friend {i * 7} must have been fun!<|im_end|>\n"
        )
    return f"{text}<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def test_a_trimmed_conversation_reads_only_what_is_new() -> None:
    require_embedded_model()
    from llama_cpp import Llama

    from backend.llm import presets

    path = str(presets.preset_path("smollm2-135m"))
    before = _conversation(0, 12, "What did I do first?")
    after = _conversation(4, 13, "What did I do last?")  # 4 turns trimmed, one more

    def model() -> Any:
        return Llama(model_path=path, n_ctx=2048, n_threads=1, verbose=False, logits_all=True)

    shifted = model()
    shifted.eval(shifted.tokenize(before.encode(), special=True))
    tokens = shifted.tokenize(after.encode(), special=True)
    reused = reuse_shifted(shifted, tokens)
    assert reused > len(tokens) * 0.8  # all but the new turn and the question
    assert shifted.input_ids[:reused].tolist() == tokens[:reused]
    shifted.eval(tokens[reused:])  # only the new part is read
    fresh = model()
    fresh.eval(tokens)
    # The same next-token distribution as reading it all (the moved keys are re-rotated
    # in f16, so not bit for bit: cosine 0.999 measured).
    a, b = shifted.scores[len(tokens) - 1], fresh.scores[len(tokens) - 1]
    assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) > 0.99
    assert int(np.argmax(b)) in np.argsort(-a)[:3].tolist()
