"""The save gate's rule 0: screen a turn's candidates before they reach the store.

The hippocampus model proposes; this module decides, from evidence the model cannot
invent (docs/memory-model.md, "The save gate", rule 0):

1. **Content.** Greetings, thanks, filler and other content-free text are rejected
   (``grounding.is_content_free``; what the user said they are in one word stays:
   "I'm vegetarian" → "The user is vegetarian.", ``grounding.said_of_self``), and so are
   fragments that cannot be read on their own:
   a pronoun that names no one ("She makes it every autumn."), an "it" that names nothing
   ("The user is pretty nervous about it.") or a phrase that states nothing ("The user's
   happy place."; ``fragments.fragment_reason``). Chat fillers a fact ends with ("The user
   is Xiaoman btw.") are taken off first (``wording.without_chat_fillers``). So is what
   the user only has at hand ("The user has eggs, spinach and some feta.":
   ``at_hand``), which is no fact about them.
2. **Grounding and subject.** The subject comes from who said it, never from the model's
   label: a candidate supported by the user's statements (``grounding.grounding``: enough
   of its content, and every number and name; a question states nothing: "Can I run on
   Saturday and Sunday?" is no evidence that the user does) is about the user, whatever
   the model said; one the model files under ``persona`` and that is supported by the
   persona's card or its own replies is about the persona; anything else is rejected
   with its support figures — an assistant reply filed as a user fact, a prompt's
   example sentence, an invented title. A candidate that makes the user the subject of
   what the user said of someone else ("The user is a little golden guy", of the
   hamster; ``whose_fact.someone_else``) is filed under that one when the user's words
   name exactly one ("The user's hamster Tudou is a little golden guy"), and rejected
   otherwise; one that opens with a pronoun is resolved the same way before the fragment
   rule reads it, and every kept fact records whom it is about (``subjects``). A user
   fact left in the user's own first-person words is put in the third person
   (``backend.memory.wording``).
3. **Closed vocabularies.** The category is the model's when it is specific; a vague
   ``personal_fact``/``general`` (small models file everything there) yields to a clear
   lexical cue (an allergy is ``health``, a sister is ``relationship``). The emotion label
   is mapped to the closed vocabulary (``emotions.canonical_emotion``) or dropped.
4. **Importance** is calibrated, not copied: half a prior from the category and the
   content (names and numbers make a fact more specific, "now", "tonight", "again" mark
   a passing state), half the model's number. A
   model that rates everything 1.0 moves every fact up by the same amount at most, and
   still cannot lift junk past rules 1 and 2.

A candidate that strings several of the user's facts together ("The user is Noor, the
user teaches chemistry in Leeds.") is cut into one per fact first (``one_fact_each``,
``backend.memory.compound``), so each is screened, recalled and superseded on its own.

Within-turn deduplication and the echo guard need the candidates' vectors, so they are
in ``gate.decide`` (its ``siblings`` and ``recalled``), using the same "same fact" test.

Pure: no I/O, never raises for odd input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from backend.memory.at_hand import at_hand
from backend.memory.compound import facts_of
from backend.memory.emotions import canonical_emotion
from backend.memory.fragments import fragment_reason
from backend.memory.grounding import (
    Grounding,
    grounding,
    is_content_free,
    said_of_self,
    specifics,
)
from backend.memory.subjects import (
    about,
    named_mention,
    own_name,
    refile,
    reowned,
    resolve_opening,
)
from backend.memory.types import Candidate, Emotion, clamp01
from backend.memory.whose_fact import says_nothing, someone_else
from backend.memory.wording import CHAT_FILLER_WORDS, third_person, without_chat_fillers

# Share of a candidate's content tokens the sources must hold (see grounding.py).
MIN_SUPPORT = 0.6

# How important a fact of each category is before the model's opinion.
CATEGORY_PRIOR: dict[str, float] = {
    "health": 0.9,
    "relationship": 0.8,
    "personal_fact": 0.7,
    "work": 0.7,
    "preference": 0.6,
    "interest": 0.6,
    "experience": 0.55,
    "general": 0.5,
    "emotion": 0.35,
}
MODEL_SHARE = 0.5  # the model's importance counts for half
# Words that mark a passing state rather than a lasting fact.
_TRANSIENT = re.compile(
    r"\b(now|today|tonight|again|currently|lately|at the moment|this (morning|evening|"
    r"afternoon|week|weekend))\b|现在|今天|今晚|又",
    re.IGNORECASE,
)
TRANSIENT_PENALTY = 0.35

# Lexical cues for a category, checked in this order (the first match wins).
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        (
            "health",
            r"\b(allerg\w*|intoleran\w*|injur\w*|tendon\w*|tendin\w*|surgery|doctor|"
            r"physio\w*|pain|asthma|diabet\w*|medication|medicine|sprain\w*|fracture\w*|"
            r"illness|sick|symptom\w*|anaphyla\w*|epipen|migraine\w*|insomnia|pregnan\w*|"
            r"achilles|knee|ankle|back pain)\b|过敏|受伤|手术|医生|疼|病",
        ),
        (
            "relationship",
            r"\b(sister|brother|mother|mum|mom|father|dad|parents?|wife|husband|partner|"
            r"boyfriend|girlfriend|fianc\w*|friend\w*|son|daughter|grand\w+|aunt|uncle|"
            r"cousin|niece|nephew|family|married|wedding|coworker|colleague)\b|"
            r"姐姐|妹妹|哥哥|弟弟|妈妈|爸爸|父母|朋友|男朋友|女朋友|老公|老婆|婚礼|结婚",
        ),
        (
            "work",
            r"\b(job|jobs|works?|working|career|boss|office|company|employer|salary|client|"
            r"freelanc\w*|colleagues?|promot\w*|intern\w*|studio|profession\w*)\b|工作|公司|老板|上班",
        ),
        (
            "preference",
            r"\b(likes?|loves?|prefers?|favou?rite|hates?|dislikes?|enjoys?|can't stand)\b|"
            r"喜欢|讨厌|最爱",
        ),
    )
)
_VAGUE = frozenset({"personal_fact", "general"})


@dataclass(frozen=True, slots=True)
class Evidence:
    """What was said in the turns the hippocampus saw: the user's messages, and the
    persona's own words (its card and its replies)."""

    user: tuple[str, ...] = ()
    persona: tuple[str, ...] = ()
    # The user's earlier turns the run did not read as evidence: only to find whom a
    # pronoun stands for ("he" of a hamster named two messages ago), never as support.
    context: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Screened:
    """A candidate after screening: ``rejected`` holds the reason when it must not be
    stored; otherwise ``candidate`` carries the subject, category, emotion and importance
    decided here."""

    candidate: Candidate
    rejected: str | None = None


def infer_category(content: str, proposed: str) -> str:
    """The model's category when specific; else the first lexical cue's, else the model's."""
    if proposed not in _VAGUE:
        return proposed
    for category, cue in _CUES:
        if cue.search(content):
            return category
    return proposed


def importance_prior(category: str, content: str) -> float:
    """What code alone thinks a fact is worth: the category's prior, +0.1 for a fact with
    names or numbers, else -0.35 for a passing state ("can't sleep again", "punishing me
    now"; with a number, "now" marks an update: "weight is 69.5 now")."""
    prior = CATEGORY_PRIOR.get(category, CATEGORY_PRIOR["general"])
    if specifics(content):
        prior += 0.1  # and no passing state: "weight is 69.5 now" is an update
    elif _TRANSIENT.search(content):
        prior -= TRANSIENT_PENALTY
    return clamp01(prior)


def calibrate_importance(model_importance: float, category: str, content: str) -> float:
    """Half the prior (``importance_prior``), half the model's number (module docstring)."""
    prior = importance_prior(category, content)
    return clamp01((1 - MODEL_SHARE) * prior + MODEL_SHARE * model_importance)


def _closed_emotion(emotion: Emotion | None) -> Emotion | None:
    if emotion is None:
        return None
    label = canonical_emotion(emotion.label)
    return None if label is None else Emotion(label=label, intensity=emotion.intensity)


def _describe(result: Grounding) -> str:
    text = f"support {result.support:.2f}"
    if result.missing_specifics:
        text += ", never said: " + ", ".join(result.missing_specifics[:5])
    return text


def screen_one(
    candidate: Candidate, evidence: Evidence, *, min_support: float = MIN_SUPPORT
) -> Screened:
    """Rules 1-4 of the module docstring for one candidate."""
    content = without_chat_fillers(candidate.content.strip())
    if is_content_free(content) and not said_of_self(content, evidence.user):
        return Screened(candidate, "content-free: a greeting, thanks or filler")
    referent = None
    if candidate.named and candidate.subject != "persona":  # the hippocampus named it
        referent = named_mention(candidate.named, evidence.user, evidence.context)
        if referent is None:
            return Screened(
                candidate, f"its subject {candidate.named!r} is not in the user's words"
            )
    # "He's a little golden guy": the one the user's words leave no doubt about.
    resolved = (
        None
        if candidate.subject == "persona"
        else resolve_opening(content, evidence.user, evidence.context, referent)
    )
    fragment = fragment_reason(content if resolved is None else resolved.content)
    if fragment is not None:
        return Screened(candidate, f"a fragment: {fragment}")
    if at_hand(content):
        return Screened(candidate, "passing: only what the user has at hand (groceries)")
    by_user = grounding(content, evidence.user, questions=False)
    if by_user.ok(min_support):
        subject = "user"
    else:
        by_persona = grounding(content, evidence.persona)
        if candidate.subject == "persona" and by_persona.ok(min_support):
            subject = "persona"
        elif by_persona.ok(min_support):
            return Screened(candidate, "said by the companion, not by the user")
        else:
            return Screened(candidate, f"not grounded in what the user said ({_describe(by_user)})")
    if resolved is not None:  # grounded as written; stored with its subject named
        content = resolved.content
    if subject == "user":  # the user's words, as a fact about them (``wording``)
        content = third_person(content)
        other = someone_else(content, evidence.user)
        if other is not None:
            refiled = refile(content, other, evidence.user, evidence.context, referent)
            if refiled is None or says_nothing(refiled.content):
                return Screened(candidate, f"about someone else: the user said it of {other!r}")
            content = refiled.content
        # "her fiancé's grandma…" written "The user's fiancé's grandma…": the sister's.
        owned = reowned(content, evidence.user, evidence.context)
        if owned is not None:
            content = owned.content
    category = infer_category(content, candidate.category)
    return Screened(
        replace(
            candidate,
            content=content,
            keywords=tuple(k for k in candidate.keywords if k.casefold() not in CHAT_FILLER_WORDS),
            subject=subject,
            about=about(content, evidence.user, evidence.context) if subject == "user" else (),
            category=category,
            emotion=_closed_emotion(candidate.emotion),
            importance=calibrate_importance(candidate.importance, category, content),
        )
    )


def one_fact_each(candidate: Candidate) -> list[Candidate]:
    """``candidate`` cut into one candidate per fact (``compound.facts_of``), each with
    the keywords its own words hold (all of them when it holds none). One that names an
    older fact it updates, or someone other than the user, is kept whole: which piece
    the model meant is not ours to guess."""
    if candidate.supersedes or candidate.named:
        return [candidate]
    # Read in the third person: "I'm Tess, 36, and I sit at a desk all day" is two facts
    # as much as "The user is Tess, 36, and the user sits…" (the fitness conversation).
    user = candidate.subject != "persona"
    facts = facts_of(third_person(candidate.content) if user else candidate.content)
    if len(facts) == 1:
        return [candidate]
    pieces = []
    for fact in facts:
        folded = fact.casefold()
        keywords = tuple(k for k in candidate.keywords if k in folded) or candidate.keywords
        pieces.append(replace(candidate, content=fact, keywords=keywords))
    return pieces


def screen(
    candidates: Iterable[Candidate], evidence: Evidence, *, min_support: float = MIN_SUPPORT
) -> list[Screened]:
    """Screen each candidate (same order), a compound one fact by fact; see the module
    docstring. The user's name, given in these messages and in no accepted fact, is added
    last (``name_fact``)."""
    screened = [
        screen_one(piece, evidence, min_support=min_support)
        for candidate in candidates
        for piece in one_fact_each(candidate)
    ]
    named = name_fact(evidence, accepted(screened))
    if named is not None:
        screened.append(screen_one(named, evidence, min_support=min_support))
    return screened


def name_fact(evidence: Evidence, facts: Sequence[Candidate]) -> Candidate | None:
    """ "The user is Noor." when the user said "I'm Noor" in the messages the run read and
    none of ``facts`` names them so: the 0.5B hippocampus often leaves the name out ("The
    user teaches chemistry in Leeds." alone, on the default install's first chat), and a
    companion that forgets who it talks to is the first thing a user sees. Worded so
    because every word of it is in "The user's name is Noor." or "The user is called Noor."
    too: the gate takes it for the fact already stored (``gate.same_fact``)."""
    name = own_name(evidence.user)
    said = re.compile(rf"\b{re.escape(name)}\b", re.IGNORECASE) if name else None
    if said is None or any(said.search(fact.content) for fact in facts):
        return None
    return Candidate(
        f"The user is {name}.",
        category="personal_fact",
        importance=0.9,
        confidence=0.9,
        keywords=("name", *name.lower().split()),
    )


def accepted(screened: Sequence[Screened]) -> list[Candidate]:
    """The candidates that passed."""
    return [s.candidate for s in screened if s.rejected is None]
