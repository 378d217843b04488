"""A user fact in the third person: what a small extractor leaves in the user's own words.

A local hippocampus copies the user's sentence half-way: "The user is Noor, I teach
chemistry in Leeds." mixes two persons, and on the memories page (and in the prompt's
notes, read by the companion) "I" would be the companion. Once the save gate has decided
that a fact is the user's, its first-person words are put in the third person:

- "my" → "the user's", "mine" → "the user's", "myself" → "themself", "me" → "the user";
- 我 → 用户 and 我的 → 用户的 (我们, "we", and 自我, "self", stay);
- "I" (and "I'm", "I've", "I'd", "I'll") → "the user" with the verb after it made
  third-person singular: "I teach" → "the user teaches", "I am" → "the user is", "I have"
  → "the user has", "I don't" → "the user doesn't"; past tenses, modals and unknown
  irregular forms are left as they are ("I moved", "I can", "I went").

Only whole words are touched, only in a fact whose subject is the user, and never inside
a quotation ("The user said: my dog ...", text in quotes).

``without_chat_fillers`` takes off what a small extractor copies from the end of a chat
message and no note should keep: "The user is Xiaoman btw.", "The user's name is Zhao Lei
by the way.", "The user is pretty nervous honestly.", "…比我还忙哈哈。". Pure.
"""

from __future__ import annotations

import re

_BE_HAVE_DO = {
    "am": "is",
    "'m": " is",
    "have": "has",
    "'ve": " has",
    "do": "does",
    "don't": "doesn't",
    "haven't": "hasn't",
    "was": "was",
    "go": "goes",
}
# Words after "I" that stay as they are: modals, past forms that do not end in -ed.
_KEEP = frozenset(
    [
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "did",
        "didn't",
        "can't",
        "won't",
        "wouldn't",
        "couldn't",
        "shouldn't",
        "wasn't",
        "had",
        "went",
        "got",
        "made",
        "said",
        "took",
        "came",
        "saw",
        "knew",
        "thought",
        "told",
        "felt",
        "left",
        "lost",
        "met",
        "paid",
        "ran",
        "sent",
        "spent",
        "taught",
        "bought",
        "brought",
        "found",
        "gave",
        "grew",
        "heard",
        "kept",
        "sold",
        "stood",
        "wrote",
        "broke",
        "began",
        "fell",
        "forgot",
        "drove",
        "ate",
        "rode",
        "slept",
        "sat",
    ]
)
# Adverbs between "I" and its verb ("I just started", "I really love").
_ADVERBS = frozenset(
    [
        "just",
        "really",
        "also",
        "still",
        "never",
        "always",
        "usually",
        "often",
        "recently",
        "finally",
        "only",
        "even",
        "sometimes",
        "already",
        "actually",
        "mostly",
        "rarely",
    ]
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|My|me|mine|myself)\b|(?<!自)我(?!们)")
# Chinese: 我 (not 我们, "we") → 用户, as a compact fact copies the user's clause ("用户上次打电话
# 她一直问我什么时候找男朋友": shown as "你…问我…", the companion's 我).
_CJK_I = re.compile(r"(?<!自)我(?!们)(?:的)?")  # 自我 ("self", 自我介绍) is no "I"
_I_CLAUSE = re.compile(
    r"\bI('m|'ve|'d|'ll)?\b(\s+)((?:(?:" + "|".join(_ADVERBS) + r")\s+)*)([A-Za-z']+)"
)


# A quotation stays word for word: "The user said: my dog ...", or text in quotes.
_QUOTED = re.compile(r"(\bsaid\s*:.*$|\"[^\"]*\"|“[^”]*”|「[^」]*」)", re.DOTALL)


# Chat fillers a fact may end with (lower case or all capitals: "Haha" may be a name).
_FILLERS_AT_END = re.compile(
    r"(?:[\s,;:~\-–—]+(?:btw|BTW|by the way|lol|LOL|lmao|LMAO|rofl|tbh|TBH|ngl|imo|omg|OMG|"
    r"to be honest|honestly|(?:ha){2,}|(?:HA){2,}|(?:he){2,}|xd|XD)\b)+"
    r"(?P<end>[\s.!?…]*)$"
)
_CJK_FILLERS_AT_END = re.compile(r"(?:哈{2,}|呵{2,}|嘿{2,}|嘻{2,})(?P<end>[。！？!?…\s]*)$")
# The words ``without_chat_fillers`` takes off, for the keywords extracted before it.
CHAT_FILLER_WORDS = frozenset(
    ("btw", "lol", "lmao", "rofl", "tbh", "ngl", "imo", "omg", "honestly", "haha", "hahaha",
     "hahahaha", "hehe", "hehehe", "xd")
)  # fmt: skip


def without_chat_fillers(text: str) -> str:
    """``text`` without the chat fillers it ends with ("…Xiaoman btw." → "…Xiaoman."),
    its closing punctuation kept; a text that is nothing but fillers stays as it is."""
    for pattern in (_FILLERS_AT_END, _CJK_FILLERS_AT_END):
        match = pattern.search(text)
        if match is None or not text[: match.start()].strip():
            continue
        end = match.group("end").strip()
        text = text[: match.start()].rstrip(" ,;:~-–—") + (end or "")
    return text


def third_person(text: str) -> str:
    """``text`` with the user's first-person words in the third person (see above);
    quotations are left as they are."""
    if not _FIRST_PERSON.search(text):
        return text
    parts = _QUOTED.split(text)  # odd indices: the quotations
    return "".join(p if i % 2 else _rewrite(p) for i, p in enumerate(parts))


def _rewrite(text: str) -> str:
    text = _I_CLAUSE.sub(_clause, text)
    text = re.sub(r"\bI\b", "the user", text)
    text = re.sub(r"\b[Mm]y\b", "the user's", text)
    text = re.sub(r"\bmine\b", "the user's", text)
    text = re.sub(r"\bmyself\b", "themself", text)
    text = re.sub(r"\bme\b", "the user", text)
    text = _CJK_I.sub(lambda m: "用户的" if m.group().endswith("的") else "用户", text)
    return _capitalised(text)


def _clause(match: re.Match[str]) -> str:
    contraction, space, adverbs, verb = match.groups()
    if contraction == "'m":
        return f"the user is{space}{adverbs}{verb}"
    if contraction in ("'ve", "'d", "'ll"):
        auxiliary = {"'ve": "has", "'d": "would", "'ll": "will"}[contraction]
        return f"the user {auxiliary}{space}{adverbs}{verb}"
    return f"the user{space}{adverbs}{_third_singular(verb)}"


def _third_singular(verb: str) -> str:
    lower = verb.lower()
    if lower in _BE_HAVE_DO:
        return _BE_HAVE_DO[lower]
    if lower in _KEEP or lower.endswith("ed") or not lower.isalpha() or len(lower) < 2:
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _capitalised(text: str) -> str:
    """A sentence that now starts with "the user" starts with a capital again."""
    return re.sub(r"(^|[.!?]\s+)the user", lambda m: m.group(1) + "The user", text)
