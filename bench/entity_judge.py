"""Who each memory is about: ``bench.memory_formation``'s judge of meaning, on gold data.

The gold (``bench/data/formation_gold/<script>.json``, hand-labelled) lists, for every user
turn of a shared conversation, the facts the user stated and whom each is about: the
user, or an entity of the user's life (a person, a pet, a place), each with its relation
to the user and its aliases ("Tudou": the user's hamster; "hamster"). A fact's ``cues``
say what it states, independent of whom: "two years", for "Tudou is two years old".

Every current memory gets one verdict (``judge_memory``), checked in this order:

- **fragment**: the memory states nothing a reader could use on its own:
  - it is a short phrase (``PHRASE_WORDS``) with no verb (``_verbs``: an auxiliary such as
    "is", "has", "will", a common verb or irregular past form ("grew", "swam"), or a word
    ending in "-s" or "-ed" that is not a name, a known noun or adverb, or a possessive),
    unless it is mostly Chinese: "The user's happy place.";
  - or it opens with a pronoun ("he", "she", "they", "it", their possessives, 他/她/它)
    and names no one (no entity alias, no "the user", none of the user's names): "She
    makes it every autumn.", "He's moving here next month.".
- **unsupported**: no gold fact the memory's writer could have seen (stated at or before
  the turn that wrote it; any turn when that is unknown) has every one of its cue groups
  in the memory: the user never said it.
- **wrong_entity**: it states a gold fact, but about someone else: its subject
  (``subject_of``) is none of the ones the fact may be filed under. "The user is a grumpy
  old pug." (Pixel's fact, filed as the user's), "The user is expecting her first baby
  in March." (the sister's), "The user lives in Chengdu." (the grandmother's).
- **correct**: otherwise: it states a fact the user said, about the one the fact is about
  (or names no one at all: "The picture book is about a fox.").

The subject (``subject_of``) is the entity named first in the memory's subject phrase,
the words before its first verb: "The user's dog Pixel hates the vacuum cleaner" → Pixel
(a possessive "the user's" introduces someone else, so it is skipped: "The user's sister's
wedding is in October" → the sister); "Pixel, the user's dog, …" → Pixel; "The user is a
grumpy old pug" → the user. A phrase naming no one but the user's possessive is about the
user ("The user's favourite food is dumplings"). A phrase naming no one: the first entity
the memory names; none at all: no subject.

Matching is plain text processing (NFKC, lower case, ’ → '), so any verdict can be
checked by hand from its printed reason: an alias or a cue matches as a whole word or
phrase (CJK: anywhere), a cue ending in ``*`` as a word prefix. Pure; no I/O but
``load_gold``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.cli.conversation_script import Script
from bench.formation_script import UsageError

GOLD_DIR = Path(__file__).resolve().parent / "data" / "formation_gold"
USER = "user"
# A memory of at most this many words with no verb is a phrase, not a statement; a longer
# one has a verb the word lists do not know ("The user always mix he and she.").
PHRASE_WORDS = 6
Verdict = Literal["correct", "wrong_entity", "fragment", "unsupported"]

_AUX = {
    "is", "are", "was", "were", "be", "been", "being", "am", "has", "have", "had",
    "will", "would", "can", "could", "should", "shall", "may", "might", "must",
    "do", "does", "did", "isn't", "wasn't", "doesn't", "didn't", "won't", "can't",
    "he's", "she's", "it's", "they're", "they've", "they'll", "he'll", "she'll",
    "loves", "likes", "hates", "lives", "works", "wants", "needs", "plans", "makes",
    "got", "get", "gets", "went", "goes", "took", "made", "feels", "felt", "keeps",
    "kept", "runs", "ran", "signed", "started", "moved", "moving", "getting", "going",
    "prefers", "enjoys", "thinks", "says", "said", "calls", "called", "knows",
    # base forms, after "to", "will", a plural subject or "people … call"
    "call", "live", "work", "love", "like", "hate", "want", "need", "make", "take", "go",
    "run", "feel", "keep", "say", "think", "know", "prefer", "enjoy", "plan", "try",
    "use", "play", "eat", "drink", "swim", "cook", "study", "teach", "learn", "write",
    "meet", "visit", "miss", "hope", "wish", "worry", "train", "walk", "sleep", "finish",
    # irregular past forms (no "-ed" to find them by)
    "ate", "became", "began", "bought", "broke", "brought", "came", "caught", "chose",
    "drank", "drove", "fell", "flew", "forgot", "found", "gave", "grew", "heard", "held",
    "hurt", "knew", "left", "lost", "met", "paid", "put", "quit", "read", "rode", "sang",
    "sat", "saw", "sent", "set", "slept", "sold", "spent", "spoke", "stood", "swam",
    "taught", "thought", "told", "tore", "understood", "woke", "won", "wore", "wrote",
}  # fmt: skip
# Words ending in -s or -ed that are not verbs in the memories of a companion app.
_NOT_VERBS = {
    "always", "sometimes", "perhaps", "years", "days", "weeks", "months", "hours",
    "minutes", "times", "kids", "friends", "parents", "things", "this", "thus",
    "its", "his", "hers", "theirs", "yours", "ours", "towards", "afterwards", "less",
    "besides", "news", "lessons", "classes", "sessions", "mornings", "evenings",
    "nights", "weekends", "sundays", "mondays", "tuesdays", "wednesdays", "thursdays",
    "fridays", "saturdays", "dumplings", "noodles", "cats", "dogs", "pets", "colleagues",
    "grandparents", "siblings", "cousins", "brothers", "sisters", "slides", "shoes",
    "kilometres", "kilometers", "km", "miles", "reps", "sets", "exercises", "lots",
    "words", "characters", "tones", "exams", "tests", "needed", "wicked", "bed", "red",
    "shed", "speed", "seed", "need", "feed", "indeed", "hundred", "sacred", "naked",
}  # fmt: skip
_PRONOUN_OPENERS = {
    "he", "she", "they", "it", "his", "her", "their", "its", "him", "them",
    "he's", "she's", "it's", "they're", "they've", "they'll", "he'll", "she'll",
}  # fmt: skip
_CJK_PRONOUNS = ("他们", "她们", "他", "她", "它")
_USER_WORDS = ("the user", "user", "用户")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Entity(_Strict):
    id: str = Field(min_length=1)
    kind: Literal["user", "person", "pet", "place", "thing"]
    relation: str
    aliases: tuple[str, ...] = ()


class TurnRef(_Strict):
    session: int = Field(ge=0)
    turn: int = Field(ge=0)


class GoldFact(_Strict):
    session: int = Field(ge=0)
    turn: int = Field(ge=0)
    user_starts: str
    about: tuple[str, ...] = Field(min_length=1)
    fact: str = Field(min_length=1)
    cues: tuple[tuple[str, ...], ...] = Field(min_length=1)
    replaced_at: TurnRef | None = None


class GoldFile(_Strict):
    script: str
    note: str = ""
    entities: tuple[Entity, ...]
    facts: tuple[GoldFact, ...]


@dataclass(frozen=True, slots=True)
class Fact:
    """A gold fact, placed in the script: ``number`` is its user turn's position."""

    number: int
    about: frozenset[str]
    text: str
    cues: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Gold:
    entities: tuple[Entity, ...]
    facts: tuple[Fact, ...]

    def entity(self, entity_id: str) -> Entity | None:
        return next((e for e in self.entities if e.id == entity_id), None)


@dataclass(frozen=True, slots=True)
class Judged:
    verdict: Verdict
    reason: str
    subject: str | None = None  # the entity id the memory is about, when it names one


@dataclass
class EntityJudgement:
    """The verdicts on the judged memories (the user's side; the persona's are counted
    apart: the gold lists what the user said)."""

    verdicts: list[tuple[str, Judged]] = field(default_factory=list)  # (memory text, verdict)
    persona_memories: int = 0

    def of(self, verdict: Verdict) -> list[tuple[str, Judged]]:
        return [(text, j) for text, j in self.verdicts if j.verdict == verdict]

    @property
    def precision(self) -> float:
        return len(self.of("correct")) / len(self.verdicts) if self.verdicts else 0.0


def gold_path(script: Script) -> Path:
    return GOLD_DIR / f"{script.stem}.json"


def load_gold(path: Path, script: Script) -> Gold:
    """The gold of ``path``, checked against ``script``: every fact's turn exists and its
    message starts with ``user_starts``; every ``about`` names an entity; one ``user``."""
    try:
        data = GoldFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the gold: {exc.strerror or exc}") from None
    except (ValueError, ValidationError) as exc:
        raise UsageError(f"{path}: not a gold file: {exc}") from None
    ids = [e.id for e in data.entities]
    if len(set(ids)) != len(ids) or [e.kind for e in data.entities].count("user") != 1:
        raise UsageError(f"{path}: entity ids must be unique, with one of kind 'user'")
    user_id = next(e.id for e in data.entities if e.kind == "user")
    numbers = {(t.session, t.index): t.number for t in script.turns}
    facts = []
    for n, item in enumerate(data.facts):
        where = f"{path}: facts[{n}]"
        number = numbers.get((item.session, item.turn))
        if number is None:
            raise UsageError(f"{where}: the script has no user turn {item.turn} in session "
                             f"{item.session}")  # fmt: skip
        text = script.sessions[item.session][item.turn].text.strip()
        if not text.startswith(item.user_starts.strip()):
            raise UsageError(f"{where}: the message is {text[:40]!r}, not {item.user_starts!r}")
        unknown = set(item.about) - set(ids)
        if unknown:
            raise UsageError(f"{where}: 'about' names no entity: {sorted(unknown)}")
        about = frozenset(USER if a == user_id else a for a in item.about)
        facts.append(Fact(number, about, item.fact, item.cues))
    entities = tuple(
        e.model_copy(update={"id": USER}) if e.kind == "user" else e for e in data.entities
    )
    return Gold(entities, tuple(facts))


# --- text ------------------------------------------------------------------------------


def _normal(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().replace("’", "'").split())


def _pattern(phrase: str) -> re.Pattern[str]:
    """A whole word or phrase (CJK: anywhere); ``word*``: a word prefix."""
    phrase = _normal(phrase)
    prefix = phrase.endswith("*")
    body = re.escape(phrase.rstrip("*"))
    if _CJK.search(phrase):
        return re.compile(body)
    return re.compile(rf"(?<![a-z0-9]){body}" + ("" if prefix else r"(?![a-z0-9])"))


def _finds(text: str, phrases: Iterable[str]) -> list[tuple[int, int]]:
    spans = []
    for phrase in phrases:
        if phrase.strip():
            spans += [m.span() for m in _pattern(phrase).finditer(text)]
    return spans


def states(text: str, fact: Fact) -> bool:
    """Every cue group of ``fact`` has an alternative in ``text``."""
    flat = _normal(text)
    return all(_finds(flat, group) for group in fact.cues)


def _mentions(flat: str, gold: Gold) -> list[tuple[int, int, str]]:
    """(start, end, entity id) of every entity named in ``flat``, in order."""
    found = []
    for entity in gold.entities:
        names = (*entity.aliases, *(_USER_WORDS if entity.id == USER else ()))
        found += [(s, e, entity.id) for s, e in _finds(flat, names)]
    # A longer name at the same place wins ("the user" over "user").
    found.sort(key=lambda m: (m[0], -(m[1] - m[0])))
    kept: list[tuple[int, int, str]] = []
    for mention in found:
        if not kept or mention[0] >= kept[-1][1]:
            kept.append(mention)
    return kept


def _verbs(flat: str, named: Sequence[tuple[int, int, str]]) -> list[int]:
    """Where the verbs of ``flat`` start (module docstring)."""
    inside = [(s, e) for s, e, _ in named]
    starts = []
    for match in _WORD.finditer(flat):
        word, start = match.group(), match.start()
        if any(s <= start < e for s, e in inside):
            continue
        if word in _AUX:
            starts.append(start)
        elif word.endswith("'s") or word in _NOT_VERBS or len(word) < 4:
            continue
        elif word.endswith("ed") or (word.endswith("s") and not word.endswith(("ss", "us", "is"))):
            starts.append(start)
    return starts


def subject_of(text: str, gold: Gold) -> str | None:
    """The entity ``text`` is about (module docstring), or None when it names no one."""
    flat = _normal(text)
    named = _mentions(flat, gold)
    verbs = _verbs(flat, named)
    end = verbs[0] if verbs else len(flat)
    possessive_user = False
    for start, stop, entity in named:
        if start >= end:
            break
        if entity == USER and flat[stop : stop + 2] == "'s":
            possessive_user = True
            continue
        return entity
    if possessive_user:
        return USER
    return named[0][2] if named else None


def fragment_reason(text: str, gold: Gold | None = None) -> str | None:
    """Why ``text`` is a fragment (module docstring), or None."""
    flat = _normal(text)
    named = _mentions(flat, gold) if gold is not None else []
    first = _WORD.match(flat)
    opener = flat.startswith(_CJK_PRONOUNS)
    opener = opener or (first is not None and first.group() in _PRONOUN_OPENERS)
    names_someone = bool(named) or any(_finds(flat, _USER_WORDS))
    if opener and not names_someone:
        return "opens with a pronoun that names no one"
    # Mostly Chinese: no verb test (an English fact with a gloss, "a bridesmaid (伴娘)",
    # is tested as English).
    if len(_CJK.findall(flat)) > len(_WORD.findall(flat)):
        return None if len(_CJK.findall(flat)) > 3 else "no statement"
    if len(_WORD.findall(flat)) <= PHRASE_WORDS and not _verbs(flat, named):
        return "no statement (a short phrase with no verb)"
    return None


def judge_memory(text: str, gold: Gold, written_at: int | None = None) -> Judged:
    """One memory's verdict (module docstring). ``written_at``: the number of the user
    turn whose run wrote it (None: unknown, every fact of the script counts)."""
    reason = fragment_reason(text, gold)
    if reason is not None:
        return Judged("fragment", reason)
    seen = [f for f in gold.facts if written_at is None or f.number <= written_at]
    stated = [f for f in seen if states(text, f)]
    subject = subject_of(text, gold)
    if not stated:
        return Judged("unsupported", "states no fact the user said by then", subject)
    if subject is None or any(subject in f.about for f in stated):
        return Judged("correct", f"states {stated[0].text!r}", subject)
    fact = stated[0]
    whose = ", ".join(sorted(fact.about))
    return Judged("wrong_entity", f"about {subject}; {fact.text!r} is about {whose}", subject)


def judge_store(memories: Iterable[tuple[str, str, int | None]], gold: Gold) -> EntityJudgement:
    """Verdicts on current memories given as (content, subject field, turn that wrote it)."""
    judged = EntityJudgement()
    for content, subject, written_at in memories:
        if subject == "persona":
            judged.persona_memories += 1
            continue
        judged.verdicts.append((content, judge_memory(content, gold, written_at)))
    return judged


# --- the entity table ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableEntity:
    """One row of the app's entity table, as the judge reads it."""

    name: str | None
    relation: str
    described_as: tuple[str, ...]


@dataclass
class TableJudgement:
    """The app's entity table against the gold entities (``judge_table``)."""

    expected: list[str] = field(default_factory=list)  # gold ids the memories name
    found: list[str] = field(default_factory=list)  # ... in the table, right relation
    wrong_relation: list[tuple[str, str]] = field(default_factory=list)  # (gold id, row)
    duplicates: list[str] = field(default_factory=list)  # gold ids with two rows or more
    unknown: list[str] = field(default_factory=list)  # rows that match no gold entity


def _row_label(row: TableEntity) -> str:
    return f"{row.name} ({row.relation})" if row.name else row.relation


def _matches(row: TableEntity, entity: Entity) -> bool:
    """A named row by one of the entity's aliases; an unnamed one by its relation word,
    the last word of an alias ("coach" for "swim coach")."""
    aliases = {_normal(a) for a in entity.aliases}
    if row.name:
        return _normal(row.name) in aliases
    words = {_normal(w) for w in (row.relation, *row.described_as)}
    return any(a in words or a.split()[-1] in words for a in aliases)


def judge_table(rows: Sequence[TableEntity], gold: Gold, memories: Iterable[str]) -> TableJudgement:
    """Is every named person and pet of the user's (gold relation "the user's …", a gold
    id that is a name: "Xiaoyu", not "physio") that a current memory names in the table,
    once, with its relation? The relation is right
    when the row's relation or one of the words the memories used occurs in the gold
    relation ("sister" in "the user's older sister"); the table's own mapping of words to
    relations is not trusted."""
    flat = [_normal(text) for text in memories]
    judged = TableJudgement()
    matched: set[int] = set()
    for entity in gold.entities:
        if entity.kind not in ("person", "pet") or not entity.relation.startswith("the user's"):
            continue
        if not entity.id[:1].isupper():
            continue  # known by relation only: "the user's physio"
        if not any(_finds(text, entity.aliases) for text in flat):
            continue
        judged.expected.append(entity.id)
        rows_of = [n for n, row in enumerate(rows) if _matches(row, entity)]
        matched.update(rows_of)
        if len(rows_of) > 1:
            judged.duplicates.append(entity.id)
        relation = _normal(entity.relation)
        right = [
            n
            for n in rows_of
            if any(_finds(relation, [w]) for w in (rows[n].relation, *rows[n].described_as))
        ]
        if right:
            judged.found.append(entity.id)
        elif rows_of:
            judged.wrong_relation.append((entity.id, _row_label(rows[rows_of[0]])))
    judged.unknown = [_row_label(row) for n, row in enumerate(rows) if n not in matched]
    return judged
