"""A candidate that cannot be read on its own is no memory (the save gate's rule 0).

Small hippocampus models write pieces of sentences: "The user's happy place." (a phrase
with nothing said of it), or "She makes it every autumn." (a pronoun, left behind by the
message it came from, that names no one once the message is gone). Stored, such a note
is read months later beside unrelated ones and tells the companion nothing, or something
wrong about whoever it guesses "she" is (issue: memories about the right one).

``fragment_reason`` finds both:

- **a dangling pronoun**: the candidate opens with a third-person pronoun ("he", "she",
  "they", their possessives and contractions, "its"; 他/她/它; not "it", which mostly
  names nothing on purpose: "It's normal to feel scared of thunder.") and names no one: no
  capitalised name after its first word, and not "the user";
- **a dangling object**: a short, one-clause candidate whose last words are a preposition
  and "it", "this" or "that", with no name and no number ("The user is pretty nervous
  about it.", "The user has had enough of this."): what "it" was is lost with the
  message, and the note says only that the user feels something about something. One
  with a second clause keeps its "it", which may point back ("The user got a new job and
  is nervous about it.");
- **no statement**: a short phrase (``PHRASE_WORDS``) with no verb (an auxiliary, a
  common verb or irregular past form, or a word ending in "-ed", or in "-s" after the
  first word, that is not a possessive) and nothing specific (no number, no name), so
  nothing is said about anything: "The user's happy place.", "Tudou's wheel.". A short
  fact with a value and whose it is stays: "The user's birthday: 12 March."; a value of
  no one's does not: "25 km on the trainer.".

Chinese candidates are checked for the pronoun only. Pure; no I/O.
"""

from __future__ import annotations

import re
import unicodedata

from backend.memory.grounding import proper_names

_PRONOUNS = frozenset(
    (
        "he", "she", "they", "his", "her", "their", "its", "him", "them", "he's", "she's",
        "they're", "they've", "they'll", "he'll", "she'll", "he'd", "she'd", "they'd",
    )
)  # fmt: skip
_CJK_PRONOUNS = ("他们", "她们", "它们", "他", "她", "它")
_VERBS = frozenset(
    (
        "is", "are", "was", "were", "be", "been", "being", "am", "has", "have", "had",
        "will", "would", "can", "could", "should", "shall", "may", "might", "must", "do",
        "does", "did", "isn't", "aren't", "wasn't", "weren't", "doesn't", "didn't",
        "won't", "can't", "got", "get", "went", "go", "made", "make", "took", "take", "ran",
        "run", "feel", "felt", "keep", "kept", "said", "say", "think", "thought", "know",
        "knew", "love", "like", "hate", "live", "work", "want", "need", "plan", "prefer",
        "enjoy",
        # irregular past forms: no "-ed" to find them by
        "ate", "became", "began", "bought", "broke", "brought", "came", "caught", "chose",
        "drank", "drove", "fell", "flew", "forgot", "found", "gave", "grew", "heard", "held",
        "hurt", "left", "lost", "met", "paid", "put", "quit", "read", "rode", "sang", "sat",
        "saw", "sent", "set", "slept", "sold", "spent", "spoke", "stood", "swam", "taught",
        "told", "tore", "understood", "woke", "won", "wore", "wrote",
    )
)  # fmt: skip
# Longer than this, a candidate with no verb the lists know has one they do not.
PHRASE_WORDS = 6
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_DIGIT = re.compile(r"\d")
_USER = re.compile(r"\buser\b")
_DANGLING_OBJECT = re.compile(
    r"\b(?:about|of|with|for|over|on|by|from|at|into|to)\s+(?:it|this|that)\s*[.!?…]*\s*$"
)
# Words that open a second clause, where "it" may find what it stands for.
_CLAUSE_WORDS = frozenset(
    ("and", "but", "because", "since", "so", "after", "before", "when", "while", "which",
     "who", "where", "if", "although", "though", "until", "as")
)  # fmt: skip
DANGLING_WORDS = 10  # longer than this, a candidate says enough around its "it"


def _flat(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("’", "'")


def _has_verb(words: list[str]) -> bool:
    for n, word in enumerate(words):
        if word in _VERBS:
            return True
        if word.endswith("'s") or len(word) < 4:
            continue
        if word.endswith("ed") or (n > 0 and word.endswith("s") and not word.endswith("ss")):
            return True
    return False


def fragment_reason(content: str) -> str | None:
    """Why ``content`` cannot be read on its own (module docstring), or None."""
    text = _flat(content).strip()
    lower = text.lower()
    words = _WORD.findall(lower)
    names_someone = bool(proper_names(text)) or bool(_USER.search(lower)) or "用户" in text
    opener = (words[:1] and words[0] in _PRONOUNS and lower.startswith(words[0])) or (
        text.startswith(_CJK_PRONOUNS)
    )
    if opener and not names_someone:
        return "a pronoun that names no one (who is meant is lost with the message)"
    if _CJK.search(text):
        return None
    if _dangling_object(text, lower, words):
        return 'an object that names nothing (what "it" was is lost with the message)'
    if len(words) > PHRASE_WORDS or proper_names(text):
        return None
    if _DIGIT.search(text) and (names_someone or any(w.endswith("'s") for w in words)):
        return None  # "The user's birthday: 12 March.": a value, and whose it is
    if not _has_verb(words):
        return "no statement: nothing is said of it"
    return None


def _dangling_object(text: str, lower: str, words: list[str]) -> bool:
    return (
        _DANGLING_OBJECT.search(lower) is not None
        and len(words) <= DANGLING_WORDS
        and "," not in text
        and not _DIGIT.search(text)
        and not proper_names(text)
        and not _CLAUSE_WORDS.intersection(words)
    )
