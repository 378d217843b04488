"""Logit biases against the user's own words, for the attempt after an echo.

The reply guard (``backend.engine.reply_guard``) stops an attempt that says the message
back and samples again with a hint. A small model often ignores the hint: after a first
echo the 1.5B's second attempt echoed again in about 45% of the turns (the messages part,
five runs of seed 1). A bias makes the message's own words less likely in the next
attempt: with it, 0 of 13 second attempts echoed, and the English ones answered ("To help
you remember to drink more water, here's a suggestion: set an alarm…").

English only. Chinese messages were biased too at first, on their runs without the light
characters: the 1.5B then left the topic or told the message as its own in other words
("我感到非常疲惫，这个月几乎没有时间休息" to "好累啊，这个月几乎天天加班…", "您确实需要向他们
道歉。" to a user scolded for what was not their fault): 2 good replies in 11, worse than
the plain stand-in the turn shows after three echoes (docs/benchmarks.md, "Retries that
keep the cores, a bias against the message's words…").

Only the message's content is biased: words of three letters or more that are not
function words, the first token of each spelling a reply may use (" word", "word",
" Word"). The bias is moderate (``ECHO_BIAS``), not a ban: a name may still be said.

Pure: the caller passes the model's tokenizer (``backend.llm.port.Tokenizing``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from backend.memory.keywords import STOP_WORDS_EN

ECHO_BIAS = -4.0  # added to the logit of each of the message's content tokens
MAX_BIASED = 120  # tokens biased at most (a long message keeps its first words')

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

TokenIds = Callable[[str], "list[int] | None"]


def content_pieces(message: str) -> list[str]:
    """The message's content, as the pieces a reply that copies it would write: its
    English content words, three spellings each; none for a message with Chinese in it."""
    pieces: list[str] = []
    if _CJK.search(message):
        return pieces
    for word in _WORD.findall(message):
        lowered = word.lower()
        stem = lowered.split("'")[0]  # "don't" → "don", "I'll" → "i": the stop words' stems
        if len(stem) < 3 or stem in STOP_WORDS_EN:
            continue
        for spelling in (f" {lowered}", lowered, f" {lowered.capitalize()}"):
            if spelling not in pieces:
                pieces.append(spelling)
    return pieces


def echo_bias(message: str, token_ids: TokenIds) -> dict[str, float]:
    """OpenAI-shaped ``logit_bias`` (token id as a string → bias) against the message's
    content tokens; empty where the tokenizer is not available."""
    bias: dict[str, float] = {}
    for piece in content_pieces(message):
        ids = token_ids(piece)
        if ids is None:
            return {}
        if ids:  # its first token starts the word
            bias.setdefault(str(ids[0]), ECHO_BIAS)
        if len(bias) >= MAX_BIASED:
            break
    return bias
