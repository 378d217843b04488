"""A question the user asks about themselves: its best notes pass the relevance floor.

"Which mistake do I keep making that I should drill?" shares no word with "The user always
mix up went and gone." and MiniLM puts them at cosine 0.10, under the floor (the tutor
demo, which then answered "Sorry, I don't have any specific mistake to drill."). The
cross-encoder reads no relevance in it either (logit -11, as for every note of that
store). When the user asks what the companion knows of them, a note the words miss is
worth more than a quiet prompt: the best few candidates of such a question pass the
floor (``retrieve.OWN_QUESTION_KEEP``). Small talk and venting, where the floor earns its
keep ("I had a rough day, my boss yelled at me"), are not questions about the user.

A question about the user: a sentence that asks (a question mark, or a question word or
an auxiliary first) and speaks of the user in the first person (I, my; 我), or asks
to be reminded ("remind me", "do you remember"). Pure.
"""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
_ASKS = re.compile(
    r"\?|？|^\W*(?:what|which|when|where|who|whose|why|how|do|does|did|am|is|are|was|were|"
    r"can|could|should|shall|will|would|have|has)\b|[吗呢]\W*$|什么|哪|几|多少|怎么",
    re.IGNORECASE,
)
# "me" is not enough: "can you tell me a joke?" asks nothing about the user.
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|mine|myself)\b|我", re.IGNORECASE)
_RECALL = re.compile(r"\bremind me\b|\bremember\b|记得|记不记得", re.IGNORECASE)


def asks_about_user(text: str) -> bool:
    """Whether ``text`` asks something about the user themselves (module docstring)."""
    flat = text.replace("\u2019", "'")
    if _RECALL.search(flat):
        return True
    return any(
        _ASKS.search(sentence.strip()) and _FIRST_PERSON.search(sentence)
        for sentence in _SENTENCE.findall(flat)
    )
