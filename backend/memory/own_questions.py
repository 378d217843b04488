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


# "What do you know about me?": the user asks for themselves as a whole, which no note's
# words match (the relevance floor dropped every note of a first chat, and the 1.5B said
# "I don't have any knowledge of you"). Such a message is answered from the user's most
# important notes (docs/memory-model.md, "Retrieval", step 3).
_PROFILE = re.compile(
    r"\b(?:you|u)\b[^.?!\n]{0,20}\b(?:know|remember|recall|learn(?:ed|t)?|understand|noticed|think)"
    r"\b[^.?!\n]{0,25}\b(?:about|of) (?:me|myself)\b"
    r"|\btell me (?:about myself|what you know)\b"
    r"|\bwho am i\b(?! (?:kidding|to)\b)"
    r"|\bwhat (?:kind|sort) of (?:a )?(?:person|guy|girl|man|woman) am i\b"
    r"|\bsum me up\b|\b(?:describe|summari[sz]e|sum up|introduce)\b[^.?!\n]{0,15}\b(?:me|myself)\b"
    r"|\b(?:write|draft|help with)\b[^.?!\n]{0,40}\b(?:about (?:me|myself)|bio|profile)\b"
    r"|\bmy (?:bio|profile|dating profile)\b"
    r"|你(?:都)?(?:知道|了解|记得)(?:关于)?我(?:的)?(?:什么|哪些|多少|些什么)"
    r"|你对我(?:有)?(?:多少|多)?了解|关于我的(?:事|一切)|我是谁|介绍一下我|描述一下我|说说我",
    re.IGNORECASE,
)


def asks_for_profile(text: str) -> bool:
    """Whether ``text`` asks about the user as a whole ("what do you know about me?",
    "who am I?", "help me write a few lines about myself", 你了解我多少？)."""
    return _PROFILE.search(text.replace("\u2019", "'")) is not None
