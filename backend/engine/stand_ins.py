"""The replies the app says itself when every attempt of the model failed the guard.

``lost_thread`` is the last resort of ``turn_reply`` (``reply_guard``: the last attempt
said the message back, or only a retry's hint): a plain request to go on, or "I don't
remember that one" to a question about what the user said.

Such a reply is shown and stored, but never put back in front of the model
(``is_stand_in``; ``prompt.build_main_messages`` leaves it out of the history): in the
long session's Chinese stretch the 1.5B took "嗯，我刚才有点分心了。你接着说？" for the
conversation's voice and opened the next four replies with it or its like ("嗯，我刚才有
点…", "是的，我明白了。你…"), each one a retry and two of them the stand-in again
(docs/benchmarks.md, "Stand-ins out of the history").

Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Four of each: with two, the long session's Chinese stretch said one of them a second
# time, which the reader takes for a loop (bench.reply_quality, seed 1: self-repeat).
_LOST_THREAD = (
    "Sorry, I lost my train of thought there. Tell me a bit more?",
    "Hmm, my mind wandered for a second. Go on, I'm listening?",
    "I want to get this right. Can you tell me a little more?",
    "Sorry, I drifted off for a moment there. What were you saying?",
)
_LOST_THREAD_ZH = (
    "抱歉，我刚才走神了。你能再多说一点吗？",
    "嗯，我刚才有点分心了。你接着说？",
    "不好意思，我没跟上。你再跟我说说？",
    "我想好好听你说，能再多讲一点吗？",
)
# ... to a question about what the user told it, with no note that answers it: an honest
# "I don't remember" ("and who's getting married in June, do you remember?" got "Sorry, I
# lost my train of thought there." after two help-desk attempts: the long session).
_NOT_REMEMBERED = (
    "Hmm, I don't remember that one. Remind me?",
    "That one's slipped my mind, sorry. Tell me again?",
    "I'm drawing a blank on that one. What was it?",
    "Hmm, that's not coming back to me. Tell me again?",
)
_NOT_REMEMBERED_ZH = (
    "嗯，这个我不记得了。你再跟我说说？",
    "抱歉，这个我忘了。能再告诉我一次吗？",
    "我一时想不起来了，你提醒我一下？",
    "这个我记不清了，能再说一遍吗？",
)
# Not "a good way to remember to drink more water" (the messages part: "Hmm, I don't
# remember that one. Remind me?" to it).
_ASKS_MEMORY = re.compile(
    r"\b(?:do you |you )?remember\b(?! to\b)|\bremind me\b|\bdid i (?:tell|mention|say)\b|"
    r"\bwhat(?:'s| is| was) my\b|\bmy \w+(?:'s)? name\b|\bagain\?|记得|记不记得|我.{0,6}叫什么",
    re.IGNORECASE,
)


def lost_thread(user_text: str, earlier: Sequence[str] = ()) -> str:
    """The reply when the guard left out every sentence of the last attempt (it only said
    a retry's hint back) or that attempt said the message back: a
    plain request to go on (to a question about what the user said, "I don't remember
    that one"), in Chinese to a message in Chinese: one the session has not said yet, or
    else the one it said longest ago (``earlier``: the session's earlier replies, oldest
    first)."""
    cjk = any("\u3400" <= ch <= "\u9fff" for ch in user_text)
    if _ASKS_MEMORY.search(user_text):
        choices = _NOT_REMEMBERED_ZH if cjk else _NOT_REMEMBERED
    else:
        choices = _LOST_THREAD_ZH if cjk else _LOST_THREAD
    said = [" ".join(reply.split()) for reply in earlier]
    # One not said yet; else the one said longest ago.
    last_said = {c: max((i for i, r in enumerate(said) if r == c), default=-1) for c in choices}
    return min(choices, key=lambda c: last_said[c])


_STAND_INS = frozenset((*_LOST_THREAD, *_LOST_THREAD_ZH, *_NOT_REMEMBERED, *_NOT_REMEMBERED_ZH))


def is_stand_in(text: str) -> bool:
    """Whether ``text`` is one of ``lost_thread``'s replies (whitespace aside)."""
    return " ".join(text.split()) in _STAND_INS
