"""Which of the user's messages a memory was formed from (issue 30: memory provenance).

A hippocampus run reads several user messages (a batch of turns, the compact contract's
one message); the memories it proposes passed the save gate's grounding against them
(``backend.memory.grounding``). The sources of a memory are the fewest of those messages
that hold as much of its content as all of them together: each message's content tokens
are matched the way grounding matches them, and messages are taken greedily, the one that
adds the most first, until nothing more is added. "The user is allergic to peanuts",
read with "I love peanuts" and "I'm allergic to peanuts", comes from the second alone; a
memory that joins two messages ("Tom, the user's brother, lives in Lyon" from "my brother
is Tom" and "Tom lives in Lyon") comes from both.

A memory none of the messages supports (it came from the background or from a catch-up
of messages no longer in the batch) has no sources: nothing is recorded, so no edit or
deletion of a message removes it.

Pure: no I/O, never raises for any string.
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.memory.grounding import STEM_PREFIX, content_tokens, specifics


def formed_from(content: str, messages: Sequence[tuple[int, str]]) -> tuple[int, ...]:
    """The ids of the ``(id, text)`` messages ``content`` was formed from (above), in the
    order given; empty when none of them holds any of its content."""
    tokens = content_tokens(content) | specifics(content)
    if not tokens or not messages:
        return ()
    covered = [(position, mid, _covered(tokens, text)) for position, (mid, text) in
               enumerate(messages)]  # fmt: skip
    chosen: list[tuple[int, int]] = []
    have: set[str] = set()
    while True:
        # The message that adds the most; of equals, the later one (the newer statement
        # is the one the memory restates).
        position, mid, gain = max(
            ((p, m, c - have) for p, m, c in covered), key=lambda x: (len(x[2]), x[0])
        )
        if not gain:
            break
        chosen.append((position, mid))
        have |= gain
    return tuple(mid for _, mid in sorted(chosen))


def _covered(tokens: frozenset[str], text: str) -> frozenset[str]:
    """The memory's tokens ``text`` holds: the same content token, one sharing its first
    ``STEM_PREFIX`` letters (as grounding matches a paraphrase), or the same name or
    number as a whole word."""
    pool = content_tokens(text) | specifics(text) | frozenset(text.casefold().split())
    stems = {t[:STEM_PREFIX] for t in pool if len(t) >= STEM_PREFIX and t.isalpha()}
    return frozenset(
        t for t in tokens
        if t in pool or (len(t) >= STEM_PREFIX and t.isalpha() and t[:STEM_PREFIX] in stems)
    )  # fmt: skip
