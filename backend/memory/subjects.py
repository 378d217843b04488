"""Whom a fact is about, decided at write time from the user's own words.

The hippocampus writes a fact as a sentence; a small model often leaves its subject
where the message had it ("He's a little golden guy, two years old.", of the hamster) or
moves it onto the user ("The user is expecting her first baby in March.", of the sister).
The save gate's other rules reject both (``fragments``, ``whose_fact``); this module
**resolves** them when the user's words leave no doubt, so that the fact is kept, about
the right one:

- **the people and pets the user named** (``named_in``): "my [words] RELATION [Name]",
  "Name, my RELATION", "my RELATION is called/named Name", "a RELATION called/named Name"
  ("our" as "my"), and 我(的)RELATION叫NAME / 我有一只RELATION叫NAME;
- **a fact that opens with a pronoun** ("He's …", "She says …", "Their …", 他/她) takes
  the one person or pet of the pronoun's gender that the message the fact was said in
  speaks of (by name, relation, or a bare relation word: "hamsters are nocturnal… he's")
  or, when that message opens with the pronoun, the user's turn before it: "He's a little
  golden guy" → "The user's hamster Tudou is a little golden guy". Two candidates, or
  none, or a name in that message the user did not place ("I met Tom at the gym, he's…"),
  resolve nothing, and the fragment rule rejects it as before;
- **a place or an organisation** (``things_in``) stands for the opening pronoun when the
  message speaks of no person or pet and of exactly one of them: "the university", "my
  company" ("the/my/our" and an organisation word), or a name the message puts where a
  place goes ("in Dublin", "Xiamen beach"). "They"/"their" take it ("Also the university
  emailed me. They need 6.5 overall" → "The university needs 6.5 overall"); "he"/"she"
  take it only before "is"/"was" (a learner's pronoun: 他, 她 and 它 sound alike, and "I
  like Xiamen beach, I grow up there. He is very beautiful in summer" is of the city).
  A place the user grew up in is said as such ("I grew up in…", "I'm from…", "my
  hometown…", "…, I grow up there"): "The user's hometown Xiamen is very beautiful…";
- **a fact the user said of someone else, filed as the user's** (``whose_fact``: the
  span's subject is "my sister" or "he") is filed under that one instead: "The user is
  expecting her first baby in March." → "The user's sister Anjali is expecting her first
  baby in March.";
- **someone else's relation, filed as the user's** (``reowned``): "her fiancé's grandma
  needs hip surgery" (the sister's fiancé) written "The user's fiancé's grandma…" takes
  the one person of the possessive's gender the message speaks of, when the user's words
  never say "my fiancé": "The user's sister's fiancé's grandma needs hip surgery…";
- **who it is about** (``about``): the people and pets the final sentence names, with
  their relation: those its own words introduce (``entities.mentions``) and those the user
  named with a relation in the turn ("Xiaoyu moved the wedding" when the user said "my
  sister Xiaoyu"). Stored with the memory (``Memory.about``), so the entity table holds
  a fact that names someone by name alone, and none means the user.

The gender of a relation is read from the word ("sister", "dad"); names and pets are
either. English and Chinese. Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backend.memory.entities import CANONICAL, PETS, Mention, mentions
from backend.memory.grounding import proper_names, support
from backend.memory.hybrid import fold
from backend.memory.types import About

_FEMALE = frozenset(("sister", "mum", "grandma", "aunt", "niece", "daughter", "wife", "girlfriend"))
_MALE = frozenset(("brother", "dad", "grandpa", "uncle", "nephew", "son", "husband", "boyfriend"))
_SURFACE_FEMALE = frozenset(("fiancée", "fiancee"))
_SURFACE_MALE = frozenset(("fiance", "fiancé"))

_NOT_NAMES = frozenset(
    (
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December", "Monday", "Tuesday", "Wednesday",
        "Thursday", "Friday", "Saturday", "Sunday", "Christmas", "Easter", "English",
        "Chinese", "The", "She", "He", "They", "It", "His", "Her", "Their", "I", "And",
        "But", "So", "We", "My", "Our", "Lol", "Haha", "Also", "Just",
    )
)  # fmt: skip
# Capitalised words a message may hold that name no one ("I", "Lol" folded by grounding).
_IGNORED = frozenset(w.casefold() for w in _NOT_NAMES)
_LATIN = sorted((w for w in CANONICAL if w.isascii()), key=len, reverse=True)
_CJK_WORDS = sorted((w for w in CANONICAL if not w.isascii()), key=len, reverse=True)
_REL = "(?P<rel>" + "|".join(re.escape(w) for w in _LATIN) + ")"
_NAME = r"(?P<name>[A-Z][a-z]+(?:\s[A-Z][a-z]+)?)"
_WORDS = r"(?:[a-z][\w-]*\s){0,2}?"
_TAIL = r"(?![\w-])"
_MY = r"(?<![\w'])(?:[Mm]y|[Oo]ur)\s"
_USER_PATTERNS = (
    # "my sister Anjali", "my pug, Pixel", "my physio" (a relation alone)
    re.compile(rf"{_MY}{_WORDS}{_REL}{_TAIL}(?:,?\s{_NAME})?"),
    # "Tudou, my hamster"
    re.compile(rf"{_NAME},\s(?:[Mm]y|[Oo]ur)\s{_WORDS}{_REL}{_TAIL}"),
    # "my cat is called Dumpling", "my dog's name is Pixel"
    re.compile(rf"{_MY}{_WORDS}{_REL}{_TAIL}(?:'s name is|\sis (?:called|named))\s{_NAME}"),
    # "a hamster called Tudou", "a dog named Pixel"
    re.compile(rf"\ban?\s{_WORDS}{_REL}{_TAIL},?\s(?:called|named)\s{_NAME}"),
)
_SELF_NAME = re.compile(
    r"(?:\b[Ii]'m|\b[Ii] am|\bname is|\bname's|\bcall me)\s+([A-Z][a-z]+)(?:\s([A-Z][a-z]+))?"
)
_CJK_REL = "(?P<rel>" + "|".join(re.escape(w) for w in _CJK_WORDS) + ")"
_CJK_USER = re.compile(
    rf"我(?:的|家|有)?(?:一|两)?(?:只|个|位|条)?{_CJK_REL}(?:(?:叫|名叫|叫做)(?P<name>[\u3400-\u9fff]{{1,4}}?)(?=[，。！？,.!?\s]|$))?"
)

# Organisations a user speaks of as "the/my/our WORD"; "they" often stands for them.
_ORGANISATIONS = (
    "university", "uni", "college", "school", "company", "employer", "office", "firm",
    "team", "club", "gym", "hospital", "clinic", "bank", "council", "embassy", "airline",
    "agency", "church", "band", "lab", "department", "startup",
)  # fmt: skip
_ORGANISATION = re.compile(
    r"(?<![\w'])(?P<det>[Tt]he|[Mm]y|[Oo]ur)\s(?:[a-z][\w-]*\s)?"
    r"(?P<org>" + "|".join(_ORGANISATIONS) + r")(?![\w-])"
)
_PLACE_WORDS = (
    "beach", "city", "town", "village", "park", "lake", "island", "province", "county",
    "street", "river", "mountain", "mountains", "district",
)  # fmt: skip
_PLACES = (
    # "in Dublin", "from Xiamen" (not "to": "I talked to Tom" is a person)
    re.compile(r"\b(?:in|from|near)\s" + _NAME),
    # "Xiamen beach", "Hyde Park" is a name already; "Leeds city centre"
    re.compile(_NAME + r"\s(?:" + "|".join(_PLACE_WORDS) + r")\b"),
)
# Where the user grew up: "I grew up in Xiamen", "I'm from Leeds", "my hometown, Cork".
_HOMETOWNS = (
    re.compile(r"\b(?:grew|grow|growing) up in\s" + _NAME),
    re.compile(r"\bborn in\s" + _NAME),
    re.compile(r"\b(?:I'm|I am|I come)(?: originally)? from\s" + _NAME),
    re.compile(r"(?<![\w'])(?:[Mm]y|[Oo]ur) home ?town(?: is|,)?\s" + _NAME),
    re.compile(_NAME + r",\s(?:my|our) home ?town\b"),
)
_THERE = re.compile(r"\b(?:grew|grow|growing) up there\b|\bborn there\b")
# Before these a "he"/"she" with no one in sight is a learner's pronoun for a place.
_DESCRIBES = re.compile(r"^\s*(?:is|was)\b")

# The user's earlier turns a pronoun may reach back to (the newest first).
CONTEXT_TURNS = 3
# The share of a fact's words a message must hold to be the one it was said in.
SOURCE_MATCH = 0.6
# Relation words that, bare, are what a fact says rather than whom ("expecting a baby").
_NOT_SOMEONE = frozenset(("baby", "kid", "child", "pet"))
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)?")
_OPEN_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_FILLERS = frozenset(("oh", "and", "also", "lol", "haha", "yeah", "so", "well", "btw", "but", "um"))
# A fact's opening pronoun → how its subject is said once resolved: (gender, possessive).
_OPENERS: dict[str, tuple[str | None, bool]] = {
    "he": ("m", False), "he's": ("m", False), "he'll": ("m", False), "he'd": ("m", False),
    "his": ("m", True), "she": ("f", False), "she's": ("f", False), "she'll": ("f", False),
    "she'd": ("f", False), "her": ("f", True), "they": (None, False),
    "they're": (None, False), "they've": (None, False), "they'll": (None, False),
    "they'd": (None, False), "their": (None, True),
}  # fmt: skip
_OPENER = re.compile(r"^\s*(?P<word>[A-Za-z]+(?:['’][a-z]+)?)(?P<rest>.*)$", re.DOTALL)
_CJK_OPENER = re.compile(r"^\s*(?P<word>他|她)(?!们)(?P<rest>.*)$", re.DOTALL)
_USER_OPENING = re.compile(r"^\s*[Tt]he user\b(?!'s)(?P<rest>.*)$", re.DOTALL)
_CONTRACTED = {"'s": "is", "'ll": "will", "'d": "would", "'re": "is", "'ve": "has"}
# "they" is one person here: its verb agrees with the name that replaces it.
_PLURAL_VERBS = {
    "are": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't",
    "aren't": "isn't", "weren't": "wasn't", "haven't": "hasn't",
}  # fmt: skip
_BASE_VERBS = frozenset(
    (
        "need", "want", "like", "love", "hate", "live", "work", "say", "think", "make",
        "teach", "go", "play", "run", "study", "own", "keep", "plan", "get", "know",
    )
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Resolved:
    """A fact with its subject resolved: the text to store, and what was resolved."""

    content: str
    # What resolution did ("'He' is Tudou"), for the write report; None: nothing.
    note: str | None = None


def _gender(mention: Mention) -> str | None:
    if mention.relation in _FEMALE or mention.said in _SURFACE_FEMALE:
        return "f"
    if mention.relation in _MALE or mention.said in _SURFACE_MALE:
        return "m"
    return None


def _name(raw: str | None) -> str | None:
    if not raw:
        return None
    words = raw.split()
    while words and words[-1] in _NOT_NAMES:
        words.pop()
    if not words or words[0] in _NOT_NAMES:
        return None
    return " ".join(words)


def named_in(text: str) -> list[Mention]:
    """The people and pets the user names in their own ``text`` (module docstring), in
    order; one entry per name (a name said twice with two relations keeps the first)."""
    text = text.replace("’", "'")
    found: list[tuple[int, Mention]] = []
    for pattern in _USER_PATTERNS:
        for match in pattern.finditer(text):
            said = match.group("rel").lower()
            name = _name(match.group("name"))
            found.append((match.start(), Mention(CANONICAL[said], said, name)))
    for match in _CJK_USER.finditer(text):
        said = match.group("rel")
        found.append((match.start(), Mention(CANONICAL[said], said, match.group("name"))))
    found.sort(key=lambda item: item[0])
    named = {m.relation for _, m in found if m.name}
    out: list[Mention] = []
    seen: set[str] = set()
    for _, mention in found:
        key = (mention.name or f"~{mention.relation}").casefold()
        if key in seen or (mention.name is None and mention.relation in named):
            continue  # "my sister … my sister Anjali": the named one stands for both
        seen.add(key)
        out.append(mention)
    return out


def names_said(text: str) -> list[str]:
    """The capitalised names ``text`` says after a sentence's first word ("Tom", "Chen
    Jing"), months, weekdays, pronouns and fillers aside, each once, in order."""
    folded = proper_names(text)
    out: list[str] = []
    for match in re.finditer(_NAME, text):
        name = _name(match.group("name"))
        if name and name not in out and all(fold(w.casefold()) in folded for w in name.split()):
            out.append(name)
    return out


# Capitalised words after "I'm" that are no name: "I'm British", "I'm Catholic".
_NOT_OWN_NAME_TEXT = """american australian british canadian chinese dutch english french
    german greek indian irish italian japanese korean mexican nigerian pakistani polish
    portuguese russian scottish spanish swedish turkish ukrainian vietnamese welsh european
    asian african catholic christian muslim jewish hindu buddhist vegan vegetarian okay fine
    good great back home here sorry tired just not so still also really very"""
_NOT_OWN = frozenset(_NOT_OWN_NAME_TEXT.split()) | _IGNORED


def own_name(texts: Sequence[str]) -> str | None:
    """The name the user first gave as their own in ``texts`` ("I'm Noor", "my name is
    Zhao Lei"; not the nickname after it: "I'm Xiaoman btw, most people just call me
    Man"), a nationality or a mood aside ("I'm British")."""
    for text in texts:
        for match in _SELF_NAME.finditer(text.replace("’", "'")):
            first, last = (
                w if w and w.casefold() not in _NOT_OWN else None for w in match.groups()
            )
            if first is not None:
                return first if last is None else f"{first} {last}"
    return None


def _own_names(text: str) -> set[str]:
    """The user's own names in ``text`` ("I'm Priya", "my name is Zhao Lei", "call me Ray")."""
    found = _SELF_NAME.finditer(text.replace("’", "'"))
    return {name.casefold() for m in found for name in m.groups() if name}


def _one_of(mentions_: Sequence[Mention], gender: str | None) -> Mention | None:
    fits = [
        m for m in mentions_
        if gender is None or m.relation in PETS or _gender(m) in (None, gender)
    ]  # fmt: skip
    return fits[0] if len(fits) == 1 else None


def things_in(text: str) -> list[Mention]:
    """The organisations and places ``text`` speaks of (module docstring), in order, each
    as a ``Mention`` whose name is how a fact says it ("The university", "The user's
    company", "Dublin"); a place the user grew up in has the relation "hometown"."""
    text = text.replace("’", "'")
    found: list[tuple[int, str]] = []
    for match in _ORGANISATION.finditer(text):
        det = match.group("det").lower()
        org = match.group("org")
        found.append((match.start(), f"The {org}" if det == "the" else f"The user's {org}"))
    homes: set[str] = set()
    for pattern in (*_PLACES, *_HOMETOWNS):
        for match in pattern.finditer(text):
            name = _name(match.group("name"))
            if name is not None:
                found.append((match.start("name"), name))
                if pattern in _HOMETOWNS:
                    homes.add(name)
    found.sort(key=lambda item: item[0])
    names: list[str] = []
    for _, name in found:
        if all(name.casefold() != seen.casefold() for seen in names):
            names.append(name)
    places = [n for n in names if not n.startswith("The ")]
    if len(places) == 1 and _THERE.search(text):  # "I like Xiamen beach, I grow up there"
        homes.add(places[0])
    return [Mention("hometown", "hometown", n) if n in homes else Mention("", "", n) for n in names]


def _place_words(text: str) -> set[str]:
    """The folded words of the places ``text`` names: names no one is called."""
    return {
        fold(word.casefold())
        for thing in things_in(text)
        if thing.name and not thing.name.startswith("The ")
        for word in thing.name.split()
    }


def _one_thing(text: str, gender: str | None, predicate: str) -> Mention | None:
    """The one place or organisation of ``text`` an opening pronoun can stand for."""
    things = things_in(text)
    if len(things) != 1:
        return None
    if gender is not None and not _DESCRIBES.match(predicate):
        return None
    return things[0]


def _present(text: str) -> list[Mention] | None:
    """The people and pets ``text`` speaks of (``named_in``, and a bare relation word the
    patterns do not hold: "hamsters are nocturnal"), or None when it also names someone
    the user did not place ("I met Tom at the gym"), who may be the one meant."""
    found = named_in(text)
    placed = {fold(w) for m in found if m.name for w in m.name.casefold().split()}
    placed |= _place_words(text)
    if proper_names(text) - placed - _IGNORED - _own_names(text):
        return None
    relations = {m.relation for m in found}
    for word in _WORD.findall(text.lower().replace("’", "'")):
        base = word if word in CANONICAL else word[:-1] if word[:-1] in CANONICAL else None
        if base is not None and base not in _NOT_SOMEONE and CANONICAL[base] not in relations:
            relations.add(CANONICAL[base])
            found.append(Mention(CANONICAL[base], base, None))
    return found


def _referent(
    gender: str | None, predicate: str, texts: Sequence[str], context: Sequence[str]
) -> Mention | None:
    """The one person or pet of ``gender`` the fact's own text speaks of (the newest of
    the new messages, then of the recent turns, that says its ``predicate``; else the
    newest message), or the text before it when that one opens with the pronoun and speaks
    of no one."""
    every = [*reversed(texts), *reversed(context[-CONTEXT_TURNS:])]
    start = next((i for i, t in enumerate(every) if support(predicate, [t]) >= SOURCE_MATCH), 0)
    for text in every[start : start + 2]:
        found = _present(text)
        if found is None:
            return None
        if found:
            return _one_of(found, gender)
        if not _opens_with_pronoun(text):
            thing = _one_thing(text, gender, predicate)
            if thing is not None:
                return thing
            # "Also the university emailed me. They need 6.5": whoever "they" is was said
            # in this message, in words no pattern reads; the turn before is not it.
            return None
    return None


def _opens_with_pronoun(text: str) -> bool:
    """Whether ``text`` starts (after fillers) with a third-person pronoun, so that it
    speaks of someone an earlier turn named ("he runs on his wheel all night lol")."""
    words = _OPEN_WORD.findall(text.lower().replace("’", "'"))
    while words and words[0] in _FILLERS:
        words = words[1:]
    if text.lstrip().startswith(("他", "她")):
        return True
    return bool(words) and words[0] in (*_OPENERS, "him", "them")


def named_mention(named: str, texts: Sequence[str], context: Sequence[str] = ()) -> Mention | None:
    """The person or pet of the user's words the hippocampus named as a fact's subject
    ("Mei", "sister", "my sister"), with its relation where the user gave one; None when
    the user's words name no such one (the fact is then rejected)."""
    wanted = re.sub(r"^(?:the user's|my|our)\s+", "", named.strip(), flags=re.IGNORECASE)
    folded = wanted.casefold()
    every = [*reversed(texts), *reversed(context)]
    for text in every:
        for mention in named_in(text):
            if (mention.name or "").casefold() == folded or folded in (
                mention.said,
                mention.relation,
            ):
                return mention
            if mention.name is None and CANONICAL.get(folded) == mention.relation:
                return mention
    if any(_says_name(text, wanted) for text in every):
        return Mention("", "", wanted)  # a name the user said with no relation
    return None


def _phrase(mention: Mention, content: str) -> str:
    """How the resolved subject is written: "The user's hamster Tudou", or "The user's
    physio" for one known by relation only; a name the fact already goes on to say keeps
    its relation out ("Tudou" when the rest says "Tudou")."""
    if mention.name is None:
        return f"The user's {mention.said}"
    if not mention.relation:  # a name the user gave without saying who it is
        return mention.name
    if re.search(rf"(?<![\w-]){re.escape(mention.name)}(?![\w-])", content):
        return mention.name
    return f"The user's {mention.said} {mention.name}"


def _cjk_phrase(mention: Mention) -> str:
    return f"用户的{mention.said}{mention.name or ''}"


def _agree(rest: str, plural: bool) -> str:
    """The verb after a resolved "they" in the singular ("They need" → "… needs")."""
    if not plural:
        return rest
    match = re.match(r"(\s+)([a-z']+)", rest)
    if match is None:
        return rest
    verb = match.group(2)
    if verb in _PLURAL_VERBS:
        singular = _PLURAL_VERBS[verb]
    elif verb in _BASE_VERBS:
        singular = verb + ("es" if verb.endswith(("s", "sh", "ch", "o")) else "s")
        singular = "studies" if verb == "study" else singular
    else:
        return rest
    return match.group(1) + singular + rest[match.end() :]


def _opening(
    content: str, texts: Sequence[str], context: Sequence[str], referent: Mention | None
) -> Resolved | None:
    match = _CJK_OPENER.match(content)
    if match is not None:
        gender = "m" if match.group("word") == "他" else "f"
        found = referent or _referent(gender, match.group("rest"), texts, context)
        if found is None:
            return None
        new = _cjk_phrase(found) + match.group("rest")
        return Resolved(new, f"{match.group('word')!r} is {found.name or found.said}")
    match = _OPENER.match(content.replace("’", "'"))
    if match is None:
        return None
    word = match.group("word")
    lower = word.lower()
    if lower not in _OPENERS:
        return None
    gender, possessive = _OPENERS[lower]
    found = referent or _referent(gender, match.group("rest"), texts, context)
    if found is None:
        return None
    rest = match.group("rest")
    subject = _phrase(found, rest)
    if possessive:
        head = f"{subject}'s"
    elif "'" in lower:
        ending = lower[lower.index("'") :]
        verb = _CONTRACTED[ending]
        if ending == "'s" and re.match(r"\s+(been|got)\b", rest):
            verb = "has"
        head = f"{subject} {verb}"
    else:
        head = subject
        rest = _agree(rest, lower == "they")
    return Resolved(head + rest, f"{word!r} is {found.name or found.said}")


def resolve_opening(
    content: str,
    texts: Sequence[str],
    context: Sequence[str] = (),
    referent: Mention | None = None,
) -> Resolved | None:
    """``content`` with an opening pronoun replaced by the one person or pet of the user's
    words it can stand for (module docstring), or None when there is no such pronoun or
    no single referent. ``texts``: the messages the run read; ``context``: earlier turns;
    ``referent``: the one the hippocampus named (``named_mention``), taken as it is."""
    return _opening(content, texts, context, referent)


def refile(
    content: str,
    whose: str,
    texts: Sequence[str],
    context: Sequence[str] = (),
    referent: Mention | None = None,
) -> Resolved | None:
    """A fact the user said of ``whose`` ("my sister", "he's": ``whose_fact``) and the
    model filed as the user's, with that one as its subject: "The user is expecting …" →
    "The user's sister Anjali is expecting …". None when ``whose`` names no single one.
    ``referent``: the one the hippocampus named (``named_mention``), taken as it is."""
    match = _USER_OPENING.match(content)
    if match is None:
        return None
    words = whose.split()
    if referent is not None:
        found: Mention | None = referent
    elif words[0] == "my":
        relation = CANONICAL.get(words[-1])
        candidates = [
            m for text in [*reversed(texts), *reversed(context)] for m in named_in(text)
            if m.relation == relation
        ]  # fmt: skip
        named = [m for m in candidates if m.name]
        names = {m.name for m in named}
        if len(names) > 1:
            return None
        found = named[0] if named else (candidates[0] if candidates else None)
    else:
        gender, _ = _OPENERS.get(words[0].lower().replace("’", "'"), (None, False))
        found = _referent(gender, match.group("rest"), texts, context)
    if found is None:
        return None
    new = _phrase(found, match.group("rest")) + match.group("rest")
    return Resolved(new, f"the user said it of {found.name or found.said}")


_USERS_RELATION = re.compile(r"^\s*The user's (?P<rel>[^\W\d_]+)(?P<rest>(?:'s)?\b.*)$", re.DOTALL)
_POSSESSIVES = {"her": "f", "his": "m", "their": None}


def reowned(content: str, texts: Sequence[str], context: Sequence[str] = ()) -> Resolved | None:
    """A fact that opens with "The user's RELATION" where the user said "her/his/their
    RELATION" and never "my RELATION", with the relation given to its owner: the one
    person of the possessive's gender the message speaks of, besides the ones the fact
    itself names (module docstring). None when that is not so."""
    match = _USERS_RELATION.match(content.replace("’", "'"))
    if match is None:
        return None
    said = match.group("rel").lower()
    if said not in CANONICAL or CANONICAL[said] in PETS:
        return None
    said_now = [t.replace("’", "'") for t in texts]
    mine = re.compile(rf"{_MY}{_WORDS}{re.escape(said)}{_TAIL}")
    if any(mine.search(text) for text in [*said_now, *(t.replace("’", "'") for t in context)]):
        return None
    owned = re.compile(
        rf"(?<![\w'])(?P<pos>[Hh]er|[Hh]is|[Tt]heir)\s{_WORDS}{re.escape(said)}{_TAIL}"
    )
    hits = ((t, owned.search(t)) for t in reversed(said_now))
    source, hit = next(((t, h) for t, h in hits if h is not None), ("", None))
    if hit is None:
        return None
    gender = _POSSESSIVES[hit.group("pos").lower()]
    found = _present(source)
    if not found:
        return None
    words = [*_WORD.findall(content.lower()), said]
    in_fact = {CANONICAL[w] for w in words if w in CANONICAL}  # the fiancé, his grandma
    owner = _one_of([m for m in found if m.relation not in in_fact], gender)
    if owner is None:
        return None
    head = _phrase(owner, match.group("rest"))
    return Resolved(
        f"{head}'s {said}{match.group('rest')}",
        f"the user said it of {owner.name or owner.said}'s {said}",
    )


def about(
    content: str, texts: Iterable[str] = (), context: Iterable[str] = ()
) -> tuple[About, ...]:
    """Whom ``content`` is about: the people and pets it names, each once, with their
    relation (module docstring). Empty: the user alone."""
    out: list[About] = []
    seen: set[str] = set()

    def add(name: str | None, relation: str) -> None:
        key = (name or f"~{relation}").casefold()
        if key not in seen:
            seen.add(key)
            out.append(About(name, relation))

    own = mentions(content)
    for mention in own:
        add(mention.name, mention.relation)
    # A name the sentence says alone, that the user introduced with its relation.
    for text in [*texts, *context]:
        for mention in named_in(text):
            if mention.name and _says_name(content, mention.name):
                add(mention.name, mention.relation)
    # "The user's sister's wedding…" with the sister named in the turn is hers.
    named = {a.relation for a in out if a.name}
    return tuple(a for a in out if a.name or a.relation not in named)


def _says_name(content: str, name: str) -> bool:
    if name.isascii():
        return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", content) is not None
    return name in content


def still_about(recorded: Sequence[About], content: str) -> tuple[About, ...]:
    """What of ``recorded`` an edited ``content`` still says: a name it still names, or a
    relation (any word of it) it still says. A user who edits "Tudou runs all night" into
    "Biscuit runs all night" leaves Tudou's facts."""
    kept: list[About] = []
    for entry in recorded:
        if entry.name is not None:
            if _says_name(content, entry.name):
                kept.append(entry)
        elif any(
            _says_name(content.lower(), word)
            for word, canonical in CANONICAL.items()
            if canonical == entry.relation or word == entry.relation
        ):
            kept.append(entry)
    return tuple(kept)
