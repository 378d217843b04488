"""A fact the user told about someone else, turned by the model into one about the user.

The save gate's grounding checks that the user said a candidate's words; it cannot see
whom they said them of. Small hippocampus models swap the subject: "he's a little golden
guy, two years old" (the hamster) became "The user is a little golden guy, two years
old."; "my sister Anjali is expecting her first baby in March" became "The user is
expecting her first baby in March."; "she hates the vacuum cleaner" (the dog) became "The
user hates the vacuum cleaner." (bench.memory_formation's entity judge). Such a memory is
worse than none: the companion then tells the user they are a pug.

``someone_else`` finds them from the user's own words:

1. only a candidate with the user as its subject ("The user is/has/hates …", not "The
   user's sister …") that names no one else (no relation noun such as "sister" or
   "hamster", no capitalised name but months and days) is checked;
2. each user message is cut into spans that share a subject: sentences, then clauses
   (at commas, "but", "and", "so", "because"); a clause with a subject of its own starts a
   new span, one without ("two years old") continues the one before. A span's subject is
   its first word after fillers ("oh", "also", "lol"…): I/we → the user; he/she/they
   or "my" + a relation noun ("my older sister") → someone else; anything else, or a
   span that also says "I", "me" or "my" → unknown;
3. the span that best supports the candidate's predicate (``grounding.support``, at least
   ``MIN_MATCH``; on a tie, the user's) decides: someone else's → the candidate is
   rejected, with that subject as the reason.

A candidate that only names the user ("The user is Pickle.") is someone else's when the
user called someone of theirs by that name ("my cat Pickle"): ``_named_by_relation``.

In Chinese the same steps read 用户… facts against the user's Chinese clauses (cut at
，、；and sentence ends): a clause opening with 我 (not 我 and a relation) is the user's,
我(的/家) and a relation word (我奶奶, 我室友) or 他/她/它 someone else's, any other
clause has no subject of its own and continues the one before, as Chinese leaves it out:
我奶奶今年九十岁了，身体还很好 written "用户的身体还很好。" is the grandmother's, and is
rejected (no Chinese phrasing to refile it under). A span with the user beside its
subject (和我, 我们) is unknown; 我 as an object (比我还忙, 一直问我) is not. Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from backend.memory.entities import CANONICAL
from backend.memory.grounding import support

# The share of the predicate's content words one span must hold to be its source.
MIN_MATCH = 0.6

RELATIONS = frozenset(
    (
        "sister", "brother", "sibling", "mum", "mom", "mother", "dad", "father", "parent",
        "parents", "grandma", "grandmother", "grandpa", "grandfather", "nan", "nana",
        "granny", "aunt", "auntie", "uncle", "cousin", "niece", "nephew", "son", "daughter",
        "kid", "kids", "child", "children", "baby", "husband", "wife", "partner",
        "boyfriend", "girlfriend", "fiance", "fiancé", "fiancee", "fiancée", "ex", "friend",
        "flatmate", "roommate", "housemate", "neighbour", "neighbor", "boss", "manager",
        "colleague", "coworker", "co-worker", "teammate", "client", "lead", "teacher",
        "tutor", "coach", "physio", "doctor", "therapist", "dog", "cat", "puppy", "kitten",
        "hamster", "rabbit", "bunny", "parrot", "bird", "fish", "pet", "pug", "horse",
    )
)  # fmt: skip
# Relation nouns that name someone in a predicate ("The user has a sister…"); not the
# ones a swapped fact brings along ("The user is expecting her first baby").
_NAMING = RELATIONS - {"baby", "kid", "kids", "child", "children"}
_OTHERS = frozenset(
    ("he", "she", "they", "he's", "she's", "they're", "they've", "he'd", "she'd", "they'd",
     "he'll", "she'll", "they'll")
)  # fmt: skip
_SELF = frozenset(("i", "i'm", "im", "i've", "i'd", "i'll", "we", "we're", "we've", "we'll"))
_FIRST_PERSON = frozenset(("i", "i'm", "im", "i've", "i'd", "i'll", "me", "my", "mine"))
_FILLERS = frozenset(
    ("oh", "ah", "and", "also", "lol", "haha", "yes", "yeah", "yep", "so", "well", "btw",
     "but", "ok", "okay", "anyway", "plus", "then", "actually", "honestly", "um", "hmm",
     "omg", "wow", "because", "cause", "cuz", "though")
)  # fmt: skip
_USER_SUBJECT = re.compile(r"^\s*the user\s+(?P<predicate>.+)$", re.IGNORECASE | re.DOTALL)
_SENTENCE = re.compile(r"[.!?;\n]+")
_CLAUSE = re.compile(r",\s*|\s+(?:but|and|so|because|cause|though)\s+", re.IGNORECASE)
_WORD = re.compile(r"[a-zà-ÿ]+(?:'[a-z]+)?")
_NAME = re.compile(r"(?<![\w'])[A-Z][a-z]+")
# Capitalised, but no one: months, days, and the like.
_NOT_NAMES = frozenset(
    (
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December", "Monday", "Tuesday", "Wednesday",
        "Thursday", "Friday", "Saturday", "Sunday", "Christmas", "Easter", "English",
        "Chinese",
    )
)  # fmt: skip
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# Chinese: a 用户 fact, the user's clauses, and whose each is.
_CJK_USER_SUBJECT = re.compile(r"^\s*用户(?:的)?(?P<predicate>.+)$", re.DOTALL)
_CJK_RELATIONS = sorted((w for w in CANONICAL if _CJK.search(w)), key=len, reverse=True)
_CJK_RELATION = "|".join(map(re.escape, _CJK_RELATIONS))
_CJK_SENTENCE = re.compile(r"[。！？!?；;\n]+")
_CJK_CLAUSE = re.compile(r"[，,、]")
_CJK_FILLER = re.compile(r"^(?:哈哈+|嗯+|啊+|对了|还有|而且|不过|然后|其实|所以|但是|可是)\s*")
_CJK_SOMEONE = re.compile(rf"^我(?:的|家)?(?P<rel>{_CJK_RELATION})")
_CJK_OTHERS = re.compile(r"^(?P<who>他们|她们|他|她|它)")
_CJK_WITH_ME = re.compile(r"(?:和|跟|与|同)我|我们")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


def _subject(clause: str) -> str | None:
    """ "user", someone else's subject words, or None (no subject of its own)."""
    words = _words(clause)
    while words and words[0] in _FILLERS:
        words = words[1:]
    if not words:
        return None
    first = words[0]
    if first in _SELF:
        return "user"
    if first in _OTHERS:
        return first
    relation = next((w for w in words[1:3] if w in RELATIONS), None) if first == "my" else None
    return None if relation is None else f"my {relation}"


def _grouped(
    sentences: Sequence[str],
    clauses: re.Pattern[str],
    subject_of: Callable[[str], str | None],
    joiner: str,
) -> list[tuple[str | None, str]]:
    """(subject, text) spans: each sentence cut at ``clauses``; a clause with a subject of
    its own (``subject_of``) starts a span, one without continues the one before."""
    spans: list[tuple[str | None, str]] = []
    for sentence in sentences:
        current: tuple[str | None, str] | None = None
        for clause in clauses.split(sentence):
            if not clause.strip():
                continue
            own = subject_of(clause)
            if current is None or own is not None:
                if current is not None:
                    spans.append(current)
                current = (own, clause)
            else:
                current = (current[0], f"{current[1]}{joiner}{clause}")
        if current is not None:
            spans.append(current)
    return spans


def _spans(message: str) -> list[tuple[str | None, str]]:
    """(subject, text) of each span of ``message`` (module docstring, step 2)."""
    spans = _grouped(_SENTENCE.split(message), _CLAUSE, _subject, ", ")
    return [(_unless_mine(subject, text), text) for subject, text in spans]


def _unless_mine(subject: str | None, text: str) -> str | None:
    """A span whose subject is someone else but that also says I/me/my ("my sister and I
    are…") is about the user too: unknown."""
    if subject is None or subject == "user":
        return subject
    words = _words(text)
    if subject.startswith("my "):
        words.remove("my")  # the subject's own
    return None if _FIRST_PERSON & set(words) else subject


def _names_someone(predicate: str) -> bool:
    names = {m.group() for m in _NAME.finditer(predicate)} - _NOT_NAMES
    return bool(_NAMING & set(_words(predicate))) or bool(names)


# "The user is Pickle." (bench.reply_quality's long session: Pickle is the user's cat): a
# name the user gave someone else ("my cat Pickle") is not the user's.
_IS_NAME = re.compile(r"^(?:is|'s)\s+(?P<name>[A-Z][a-z]+)\s*[.!]?$")


def _named_by_relation(name: str, messages: Sequence[str]) -> str | None:
    """ "my <relation>" when the user's messages call someone of theirs ``name`` ("my cat
    Pickle", "my little sister Mei"), else None."""
    pattern = re.compile(rf"\bmy\s+(?:[a-z]+\s+)?([a-z]+)\s+{re.escape(name)}\b", re.IGNORECASE)
    for message in messages:
        for match in pattern.finditer(message.replace("’", "'")):
            if match.group(1).lower() in RELATIONS:
                return f"my {match.group(1).lower()}"
    return None


def says_nothing(content: str) -> bool:
    """ "Pickle is Pickle.": what ``The user is Pickle.`` refiled under Pickle says."""
    match = re.fullmatch(r"\s*(.+?)\s+is\s+(.+?)\s*[.!]?\s*", content)
    return match is not None and match.group(1).lower() == match.group(2).lower()


def _cjk_subject(clause: str) -> str | None:
    """ "user", someone else's (我奶奶, 他), or None (no subject of its own)."""
    text = _CJK_FILLER.sub("", clause.strip())
    if (match := _CJK_SOMEONE.match(text)) is not None:
        return f"我{match.group('rel')}"
    if text.startswith("我"):
        return "user"
    match = _CJK_OTHERS.match(text)
    return None if match is None else match.group("who")


def _cjk_spans(message: str) -> list[tuple[str | None, str]]:
    """(subject, text) of each span of a Chinese ``message`` (module docstring)."""
    spans = _grouped(_CJK_SENTENCE.split(message), _CJK_CLAUSE, _cjk_subject, "，")
    # Someone else's span with the user beside its subject ("我妹妹和我…", 我们): unknown.
    # 我 as an object ("比我还忙", "一直问我") leaves it someone else's.
    return [
        (None if s not in (None, "user") and _CJK_WITH_ME.search(t.strip()[len(s) :]) else s, t)
        for s, t in spans
    ]


def _whose_span(
    predicate: str,
    messages: Sequence[str],
    spans_of: Callable[[str], list[tuple[str | None, str]]],
) -> str | None:
    """The subject of the span that best supports ``predicate`` (on a tie, the user's),
    when it is someone else's and supports it enough (step 3); else None."""
    best, whose = 0.0, None
    for message in messages:
        for subject, text in spans_of(message):
            score = support(predicate, [text])
            if score > best or (score == best and subject == "user"):
                best, whose = score, subject
    if best < MIN_MATCH or whose in (None, "user"):
        return None
    return whose


def _someone_else_cjk(content: str, messages: Sequence[str]) -> str | None:
    match = _CJK_USER_SUBJECT.match(content)
    if match is None:
        return None
    predicate = match.group("predicate")
    if re.search(_CJK_RELATION, predicate):  # 用户的猫…, 用户男朋友…: names its one
        return None
    return _whose_span(predicate, messages, _cjk_spans)


def someone_else(content: str, messages: Sequence[str]) -> str | None:
    """Whom the user said ``content``'s predicate of, when not themselves (module
    docstring); None when it is theirs, or when that cannot be told."""
    if _CJK.search(content):
        return _someone_else_cjk(content, messages)
    match = _USER_SUBJECT.match(content)
    if match is None:
        return None
    predicate = match.group("predicate")
    named = _IS_NAME.match(predicate.strip())
    if named is not None and named.group("name") not in _NOT_NAMES:
        return _named_by_relation(named.group("name"), messages)
    if _names_someone(predicate):
        return None
    return _whose_span(predicate, messages, _spans)
