"""Reuse llama.cpp's prompt cache past a removed span, by shifting it.

llama-cpp-python reuses the previous prompt's evaluated tokens up to the first one that
differs. When a conversation's oldest messages are trimmed, the first difference is
right after the system message, and the whole rest of the window is read again: on a
2-core CPU, ~1,500 tokens of Qwen2.5-0.5B took 16-23 s (docs/benchmarks.md, "Chat
latency"). The tokens after the trimmed span are still in the cache, only at later
positions. ``reuse_shifted`` finds them (chunks of the new prompt that follow the common
prefix and appear later in the cached tokens, in order), removes what lies between from
the cache and moves the chunks down to their new positions — llama.cpp re-rotates their
keys (RoPE) on the next decode, as its own server does with ``--cache-reuse``. Then the
usual prefix match covers them, and only what is really new is evaluated.

Works on the ``Llama`` object's internals (``input_ids``, ``n_tokens``, ``_ctx``) of
llama-cpp-python 0.3.x; callers hold the model's lock. Failure policy: when the model's
cache cannot shift, or nothing worth moving is found, it does nothing (the prompt is
evaluated as before).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

# A chunk must match this many tokens to be taken for the same text (not a coincidence),
# and be at least this long to be worth moving.
MIN_CHUNK = 32
# ... but after a first chunk, this many will do, at the place they match longest: when
# the earlier notes blocks go at once, the exchanges between them are the chunks, and one
# under MIN_CHUNK (a short message and a short answer) ends the search, so the rest of the
# window was read again (bench.reply_quality's long session: 396-460 tokens, 13-20 s
# before the first token; the log said "350 tokens moved in 1 chunks").
MIN_NEXT_CHUNK = 8


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _find(haystack: Sequence[int], needle: Sequence[int], start: int) -> int:
    """The first position >= ``start`` where ``needle`` occurs in ``haystack``, or -1."""
    first, size = needle[0], len(needle)
    for j in range(start, len(haystack) - size + 1):
        if haystack[j] == first and list(haystack[j : j + size]) == list(needle):
            return j
    return -1


def _longest_match(cached: Sequence[int], rest: Sequence[int], start: int) -> int:
    """Where in ``cached`` from ``start`` the first ``MIN_NEXT_CHUNK`` tokens of ``rest``
    occur with the longest common run, or -1."""
    best, best_length = -1, 0
    needle = rest[:MIN_NEXT_CHUNK]
    at = _find(cached, needle, start)
    while at >= 0:
        length = common_prefix(cached[at:], rest)
        if length > best_length:
            best, best_length = at, length
        at = _find(cached, needle, at + 1)
    return best


def plan_chunks(cached: Sequence[int], prompt: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(old_position, new_position, length)`` of each cached chunk the prompt reuses
    after its common prefix, in order; empty when there is nothing to move."""
    prefix = common_prefix(cached, prompt)
    chunks: list[tuple[int, int, int]] = []
    old, new = prefix, prefix
    while new + (MIN_NEXT_CHUNK if chunks else MIN_CHUNK) <= len(prompt):
        found = -1
        if new + MIN_CHUNK <= len(prompt):
            found = _find(cached, prompt[new : new + MIN_CHUNK], old + (0 if chunks else 1))
        if found < 0 and chunks:
            found = _longest_match(cached, prompt[new:], old)
        if found < 0:
            break
        length = common_prefix(cached[found:], prompt[new:])
        chunks.append((found, new, length))
        old, new = found + length, new + length
    return chunks


def reuse_shifted(llama: Any, prompt: Sequence[int]) -> int:
    """Move the cached chunks ``prompt`` reuses into place; the tokens reused (0: none)."""
    import llama_cpp

    cached = llama.input_ids[: llama.n_tokens].tolist()
    chunks = plan_chunks(cached, prompt)
    if not chunks:
        return 0
    ctx = llama._ctx
    if not llama_cpp.llama_memory_can_shift(ctx.memory):
        return 0
    keep_end = chunks[0][1]  # the common prefix stays where it is
    # Free every cached position that is neither the prefix nor a chunk...
    gaps = [(keep_end, chunks[0][0])]
    gaps += [(o1 + n1, o2) for (o1, _, n1), (o2, _, _) in itertools.pairwise(chunks)]
    gaps.append((chunks[-1][0] + chunks[-1][2], -1))
    for p0, p1 in gaps:
        if p1 < 0 or p1 > p0:
            ctx.kv_cache_seq_rm(-1, p0, p1)
    # ...then move each chunk down, left to right, into the freed positions.
    for old, new, length in chunks:
        if old != new:
            ctx.kv_cache_seq_shift(0, old, old + length, new - old)  # one sequence: 0
        llama.input_ids[new : new + length] = cached[old : old + length]
    reused = chunks[-1][1] + chunks[-1][2]
    llama.n_tokens = reused
    moved = sum(length for _, _, length in chunks)
    log.debug("prompt cache: %d tokens moved in %d chunks, %d reused", moved, len(chunks), reused)
    return reused
