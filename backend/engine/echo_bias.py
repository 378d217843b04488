"""Logit biases against the user's own words, for the attempt after an echo.

The reply guard (``backend.engine.reply_guard``) stops an attempt that says the message
back and samples again with a hint. A small model often ignores the hint: in the long
session's Chinese stretch the 1.5B said "我奶奶今年八十三岁了，身体还挺好的" back three
times in a row ("你的奶奶今年八十三岁", "奶奶今年八十三岁", "您的奶奶今年八十三岁"), and
the turn ended on a stand-in (docs/benchmarks.md, "Trims no read-ahead saw"). The hint
asks; a bias makes the message's own words less likely in the next attempt, so it says
something of its own ("她老人家身体真硬朗！").

Only the message's content is biased: English words of three letters or more that are
not function words (the first token of each spelling a reply may use: " word", "word",
" Word"), and Chinese runs without the light characters and pronouns ("的", "了", "我",
…). The bias is moderate (``ECHO_BIAS``), not a ban: a name may still be said.

Pure: the caller passes the model's tokenizer (``backend.llm.port.Tokenizing``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

ECHO_BIAS = -4.0  # added to the logit of each of the message's content tokens
MAX_BIASED = 120  # tokens biased at most (a long message keeps its first words')

# Characters that carry little of a Chinese sentence's own content, and the pronouns a
# reply says anyway ("你", "我").
_CJK_LIGHT = frozenset("的了是在有和就也都不吗呢吧啊呀哦嗯这那个一很还要会说到着过只真我你他她它们")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_FUNCTION_TEXT = """the and but for not you your yours are was were has have had his her hers
    him she they them their our ours its this that these those then than with from into onto about
    what when where which who whom why how all any can could would should will just some
    been being did does doing done there here very too also only out over under again
    i'm i've i'll i'd it's that's don't can't won't didn't isn't wasn't"""
_FUNCTION = frozenset(_FUNCTION_TEXT.split())

TokenIds = Callable[[str], "list[int] | None"]


def content_pieces(message: str) -> list[str]:
    """The message's content, as the pieces a reply that copies it would write: its
    content words (three spellings each) and its Chinese runs split at light characters."""
    pieces: list[str] = []
    for word in _WORD.findall(message):
        lowered = word.lower()
        if len(lowered) < 3 or lowered in _FUNCTION:
            continue
        for spelling in (f" {lowered}", lowered, f" {lowered.capitalize()}"):
            if spelling not in pieces:
                pieces.append(spelling)
    for run in _CJK.findall(message):
        for part in re.split("[" + "".join(sorted(_CJK_LIGHT)) + "]+", run):
            if part and part not in pieces:
                pieces.append(part)
    return pieces


def echo_bias(message: str, token_ids: TokenIds) -> dict[str, float]:
    """OpenAI-shaped ``logit_bias`` (token id as a string → bias) against the message's
    content tokens; empty where the tokenizer is not available."""
    bias: dict[str, float] = {}
    for piece in content_pieces(message):
        ids = token_ids(piece)
        if ids is None:
            return {}
        # An English spelling: its first token starts the word; a Chinese run: all of it.
        chosen = ids[:1] if piece.isascii() else ids
        for token in chosen:
            bias.setdefault(str(token), ECHO_BIAS)
        if len(bias) >= MAX_BIASED:
            break
    return bias
