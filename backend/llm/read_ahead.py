"""Read the start of the next prompt into llama.cpp's cache while the user types.

After a turn is merged, short-term memory may have been trimmed and a new background
summary is due in the next prompt (``backend.engine.next_prompt``): ~400 tokens that the
next reply would otherwise read before its first token, 4-7 s of Qwen2.5-Coder-1.5B on
two cores (docs/benchmarks.md, "Reply quality", the long session). Everything in that
prompt up to the new user message is known once the merge is saved, so the model reads
it then, in the pause before the user's next message, and the reply reads only the
message and its notes.

The read goes in chunks of ``READ_CHUNK`` tokens and stops before the next chunk as soon
as a generation wants the model (``wanted``): a reply waits at most one chunk for it
(~0.5 s of the 1.5B on two cores), and what was read stays in the cache.

Works on the ``Llama`` object's internals (``input_ids``, ``n_tokens``, ``eval``) of
llama-cpp-python 0.3.x, as ``backend.llm.cache_reuse`` does; callers hold the model's
lock. Failure policy: a prompt that would not leave room to reply is not read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from backend.llm.cache_reuse import common_prefix, reuse_shifted

# Tokens per decode step of a read-ahead: a starting reply waits for at most one step.
READ_CHUNK = 64
# Room left in the context for the message, its notes and the reply: a longer prefix is
# not read (the turn will be trimmed or fail anyway).
REPLY_ROOM = 512


def read_prefix(llama: Any, tokens: Sequence[int], wanted: Callable[[], bool]) -> int:
    """Evaluate ``tokens`` into ``llama``'s cache after what it already holds of them,
    ``READ_CHUNK`` at a time, until done or ``wanted()``; the tokens evaluated."""
    tokens = list(tokens)
    if not tokens or len(tokens) + REPLY_ROOM > llama.n_ctx():
        return 0
    reuse_shifted(llama, tokens)
    start = common_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens)
    # The cache past the common part belongs to the previous prompt: ``eval`` frees it.
    llama.n_tokens = start
    read = 0
    for i in range(start, len(tokens), READ_CHUNK):
        if wanted():
            break
        batch = tokens[i : i + READ_CHUNK]
        llama.eval(batch)
        read += len(batch)
    return read
