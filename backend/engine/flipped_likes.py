"""A reply that turns round a like or dislike the user just stated.

"Saffron hates the rain." answered with "Your cat Saffron really loves the rain, right?"
(Qwen2.5-Coder-0.5B on the default install, issue 24) reads as if the companion was not
listening. This finds it by polarity: the message states a liking (love, like, enjoy,
adore) or a dislike (hate, dislike, can't stand, detest) of something, negation turning
it round ("doesn't like the rain" is a dislike); a reply sentence that states the
opposite of the same thing flips it. The thing is the first content word after the verb
("the rain" → "rain", "going to the gym" → "going"). A thing the message both likes and
dislikes ("I love rain, Saffron hates rain") is left alone: whose is whose is not read.
English only; pure.
"""

from __future__ import annotations

import re

_LIKE = r"love|loves|loved|loving|like|likes|liked|enjoy|enjoys|enjoyed|adore|adores|adored"
_DISLIKE = (
    r"hate|hates|hated|hating|dislike|dislikes|disliked|detest|detests|can't stand|"
    r"cannot stand|can not stand|loathe|loathes"
)
_VERB = re.compile(rf"\b(?:(?P<like>{_LIKE})|(?P<dislike>{_DISLIKE}))\b")
_NEGATION = re.compile(r"\b(?:not|never|no longer|n't)\s*(?:\w+\s)?$|n't\s*(?:\w+\s)?$")
_SKIPPED = frozenset((
    "the", "a", "an", "my", "your", "his", "her", "their", "its", "our", "this", "that",
    "these", "those", "it", "them", "all", "so", "much", "really", "very", "just", "when",
    "being", "to",
))  # fmt: skip
# "would like to", "like a", "looks like": not a liking.
_NOT_A_LIKING = re.compile(
    r"(?:would|'d|feel|feels|look|looks|seem|seems|sound|sounds)\s+(?:you\s+|i\s+|they\s+)?$"
)


def _normal(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split())


def stances(text: str) -> set[tuple[str, bool]]:
    """(thing, liked) for each liking or dislike ``text`` states."""
    flat = _normal(text)
    out: set[tuple[str, bool]] = set()
    for match in _VERB.finditer(flat):
        before = flat[: match.start()]
        liked = match.group("like") is not None
        if liked and _NOT_A_LIKING.search(before):
            continue
        if _NEGATION.search(before):
            liked = not liked
        after = re.findall(r"[a-z][a-z'-]*", flat[match.end() :])[:5]
        thing = next((w for w in after if w not in _SKIPPED and len(w) > 2), None)
        if thing is not None:
            out.add((thing.rstrip("s") if len(thing) > 4 else thing, liked))
    return out


def stated(message: str) -> dict[str, bool]:
    """The message's likings and dislikes, by thing; a thing it says both of is left out."""
    said = stances(message)
    return {thing: liked for thing, liked in said if (thing, not liked) not in said}


def flips(sentence: str, message_stances: dict[str, bool]) -> bool:
    """The sentence states the opposite of a liking or dislike the message stated."""
    return any(message_stances.get(thing) is (not liked) for thing, liked in stances(sentence))


# A sentence is held this many words while the message stated a liking, for its verb to
# come ("Your cat Saffron really loves…": the fifth word), and to its end once it has.
HOLD_WORDS = 8


def may_flip(fragment: str, message_stances: dict[str, bool]) -> bool:
    """Hold the sentence so far: it may yet turn round what the message said."""
    if not message_stances:
        return False
    flat = _normal(fragment)
    return _VERB.search(flat) is not None or len(flat.split()) < HOLD_WORDS
