"""The compact hippocampus: one narrow job a small local model can do well and fast.

The full contract (``prompt``, ``schema``: rewrite the background, compress the whole
short-term history, propose long-term facts) asks a 135M-1.5B model for a long JSON
answer on a long prompt: on a 2-core CPU that took 7-17 s a run and came back unusable
in most runs. The compact contract asks for what only a model can do, and leaves the
rest to code:

- **the model** reads only the user's NEW message (and the catch-up batch of messages no
  run has read yet; no earlier turn: shown one for context, Qwen2.5-0.5B re-proposed its
  facts run after run and resolved "he" no better) and answers a short JSON
  object: up to :data:`MAX_FACTS` facts, each one sentence, and the user's feeling from
  the closed vocabulary. Category and importance are not asked for: every token costs
  time on a CPU, and a small model's labels were noise (everything ``personal_fact`` at
  0.4-1.0); code infers them (``memory.screening``). The output is grammar-constrained
  (:func:`compact_schema`), and with ``hippocampus.compact_subjects`` so is **each
  fact's subject**: a fact opens with "The user" (用户) or with a person, pet, place or
  organisation the user's words name (:func:`fact_openers`: "The user's sister Anjali",
  "Anjali", "Xiamen", "The university"), never with "he" or "she", at no cost in output
  tokens (off by default: on the 0.5B it pushed other people's facts onto "The user",
  docs/benchmarks.md, "Subjects in the grammar"); the prompt's stable
  part (rules and worked examples) comes first, so llama.cpp reuses its KV cache run
  after run;
- **code** keeps the short-term history verbatim (the token budget trims the oldest
  items, as in the failure fallback) and rolls the background forward from the facts
  that pass the save gate's screening (newest last, oldest dropped beyond
  ``BACKGROUND_MAX_CHARS``).

A failed compact run leaves the user's message for the next working run (the merge's
``catch_up="message"``), so its facts are not lost.

Pure: builds messages, parses answers; no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from backend.hippocampus.budget import catch_up_batch, truncate_middle
from backend.hippocampus.extract import MAX_SCAN_POSITIONS
from backend.hippocampus.parse import HippocampusParseError, clean_text
from backend.hippocampus.schema import BACKGROUND_MAX_CHARS
from backend.hippocampus.state import HippocampusResult, SessionMemoryState
from backend.memory.emotions import EMOTION_LABELS, canonical_emotion
from backend.memory.hybrid import cjk_share
from backend.memory.keywords import extract_keywords
from backend.memory.screening import importance_prior, infer_category
from backend.memory.subjects import CONTEXT_TURNS, named_in, names_said, things_in
from backend.memory.types import Candidate, Emotion

MAX_FACTS = 2
FACT_MAX_CHARS = 150
NEW_MESSAGE_MAX_TOKENS = 600
# A fact the user stated in so many words: the screening checks the words themselves.
COMPACT_CONFIDENCE = 0.9
NO_FEELING = "neutral"
# The share of CJK letters from which a run's messages are taken as Chinese (in_chinese).
CHINESE_SHARE = 0.5


# How a fact may open besides a name of the user's words: the user themself.
USER_OPENERS = ("The user", "用户")
# Names the grammar can carry as they are (no quote, backslash or regex syntax).
_SAFE_NAME = re.compile(r"^[^\W\d_][\w' \-\u00c0-\u024f]{0,40}$")


def fact_openers(texts: Iterable[str]) -> tuple[str, ...]:
    """What a compact fact may open with: :data:`USER_OPENERS`, then the people, pets,
    places and organisations ``texts`` (the user's words) name, as the fact would say
    them ("The user's sister Anjali", "Anjali", "The user's physio", "The university",
    "Xiamen"), and any other capitalised name they say ("Tom"). Longest first, so the
    grammar's alternatives read the fullest."""
    found: list[str] = []
    for text in texts:
        for mention in named_in(text):
            if mention.name and mention.said.isascii():
                found += [f"The user's {mention.said} {mention.name}", mention.name]
            elif mention.said.isascii():
                found.append(f"The user's {mention.said}")
            else:  # 我的仓鼠叫土豆: 用户 opens it, or the name alone
                found.append(mention.name or "")
        found += [thing.name for thing in things_in(text) if thing.name]
        found += names_said(text)
    out: list[str] = []
    for name in found:
        if name and _SAFE_NAME.match(name) and name not in out and name not in USER_OPENERS:
            out.append(name)
    return (*USER_OPENERS, *sorted(out, key=len, reverse=True))


def _opening_pattern(openers: Sequence[str]) -> str:
    """A JSON-schema ``pattern`` for a fact that opens with one of ``openers``: a Latin
    opener ends at a space, an apostrophe, a comma or a full stop ("The user's…"), a CJK
    one anywhere ("用户的…"); the rest holds no quote, backslash or control character,
    so the string stays valid JSON under any grammar engine."""
    latin = [o for o in openers if o.isascii()]  # letters, spaces, ' and - (_SAFE_NAME)
    cjk = [o for o in openers if not o.isascii()]
    heads = [f"({'|'.join(latin)})[ ',.]"] if latin else []
    if cjk:
        heads.append(f"({'|'.join(cjk)})")
    return "^(" + "|".join(heads) + ")" + r'[^"\\\x00-\x1F]*$'


def compact_schema(
    messages: int = 1, openers: Sequence[str] | None = None, *, chinese: bool = False
) -> dict[str, Any]:
    """The answer's JSON schema: :data:`MAX_FACTS` facts per message read (a catch-up
    run reads several), at most ``3 * MAX_FACTS``; ``openers``: what a fact may open
    with (:func:`fact_openers`), or None for any sentence. ``chinese`` (the messages are
    in Chinese, :func:`in_chinese`): a fact opens with 用户 or a name in CJK, so that it
    is written in the user's language and the screening can find its words in theirs."""
    item: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": FACT_MAX_CHARS}
    if chinese:
        openers = [o for o in (openers or USER_OPENERS) if not o.isascii()] or ["用户"]
    if openers:
        item["pattern"] = _opening_pattern(openers)
    return {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": min(3, max(1, messages)) * MAX_FACTS,
                "items": item,
            },
            "emotion": {"type": "string", "enum": [*EMOTION_LABELS, NO_FEELING]},
        },
        "required": ["facts", "emotion"],
        "additionalProperties": False,
    }


COMPACT_SCHEMA = compact_schema()
"""The schema of a run that reads one message (the usual case)."""

COMPACT_SYSTEM = f"""\
You pick out the facts worth remembering from a user's chat message, for a companion's \
long-term memory. You never talk to the user. Answer with one JSON object only.

Read the NEW MESSAGE. List each lasting fact about the user's life in it: people and \
pets and their names, family, where the user lives, job, health (allergies, injuries, \
conditions), plans and dates, goals, habits, likes and dislikes, numbers they give. \
Write each fact as one short sentence starting with "The user", and keep the user's own \
names, numbers and key words.

Do not list greetings, thanks, small talk, questions, or how the user feels right now. \
Most messages hold no lasting fact: then "facts" is [].

"emotion": the user's feeling in the new message, one of {", ".join(EMOTION_LABELS)}, \
or {NO_FEELING}.
"""

# Worked examples (a few-shot prefix): invented, and never said by any real user, so
# the screening rejects them should a model copy one.
_EXAMPLES: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "NEW MESSAGE:\nbusy weekend! my brother Kenji "
        "started as a nurse in Sapporo, and I'm allergic to cats so visiting him is hard lol",
        {
            "facts": [
                "The user's brother Kenji started as a nurse in Sapporo.",
                "The user is allergic to cats.",
            ],
            "emotion": "joy",
        },
    ),
    (
        "NEW MESSAGE:\nugh my legs are dead after that run lol. can't sleep again",
        {"facts": [], "emotion": "tiredness"},
    ),
    (
        "NEW MESSAGE:\nthe client rejected my sketches AGAIN. I'm a freelance illustrator btw",
        {"facts": ["The user is a freelance illustrator."], "emotion": "frustration"},
    ),
    (
        "NEW MESSAGE:\nhaha thanks, that helps. goodnight!",
        {"facts": [], "emotion": "gratitude"},
    ),
)

# For a message in Chinese (:func:`in_chinese`), the rules and examples say so. Only then:
# in every run's prompt they leaked into English runs (the 0.5B wrote "用户在vent mostly。"
# for an English message, and late_night_diary's probes fell from 7/7 to 4/7), and said
# with the message alone, after the cached prefix, they were followed less (more facts of
# a sister or a boyfriend written as the user's). A Chinese run reads its own prefix.
_CHINESE_RULE = 'A message in Chinese gets its facts in Chinese, each starting with "用户".'
_CHINESE_EXAMPLES: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "NEW MESSAGE:\n累死了😩 我在医院当护士，夜班太多了。我家狗狗豆豆都十二岁了",
        {"facts": ["用户在医院当护士。", "用户的狗豆豆十二岁了。"], "emotion": "tiredness"},
    ),
)


def _in_chinese_rules(system: str) -> str:
    """``system`` with the Chinese rule after the one on how a fact is written."""
    anchor = "names, numbers and key words."
    return system.replace(anchor, f"{anchor} {_CHINESE_RULE}", 1)


def in_chinese(texts: Sequence[str]) -> bool:
    """Whether the messages a run reads are mostly CJK: their facts are then asked for in
    Chinese. An English fact of a Chinese message is a translation, and translations
    fail the screening's support test (docs/memory-formation.md, "Supported"): the
    default 0.5B wrote "The user's boyfriend is a firefighter." for 我男朋友叫阿杰，他是消防员,
    and "The user is going to考驾照." for 我下周五要去考驾照."""
    return cjk_share(" ".join(texts)) >= CHINESE_SHARE


def new_messages(state: SessionMemoryState, user_message: str) -> tuple[str, ...]:
    """What this run reads for facts: the catch-up batch (messages a failed run never
    read, oldest first), then the new message."""
    older = tuple(item.text for item in catch_up_batch(state.missed) if item.role == "user")
    return (*older, user_message)


def run_openers(state: SessionMemoryState, user_message: str) -> tuple[str, ...]:
    """:func:`fact_openers` of what this run may name: the new messages and the user's
    last few verbatim turns (whom a "he" of the new message may mean)."""
    earlier = [i.text for i in state.short_term if i.role == "user" and not i.compressed]
    return fact_openers([*earlier[-CONTEXT_TURNS:], *new_messages(state, user_message)])


# With ``compact_subjects`` the rules say what the grammar allows (measured together).
COMPACT_SYSTEM_NAMED = COMPACT_SYSTEM.replace(
    'starting with "The user",',
    'starting with "The user" (or with the name of the person, pet or place it is about),',
)


def build_compact_messages(
    state: SessionMemoryState,
    user_message: str,
    *,
    named_subjects: bool = False,
    chinese: bool = False,
) -> list[dict[str, str]]:
    """The compact request: rules, the worked examples, then this turn's data.
    ``named_subjects``: the rules for ``hippocampus.compact_subjects``; ``chinese``: the
    messages are in Chinese (:func:`in_chinese`), and their facts are asked for in it."""
    system = COMPACT_SYSTEM_NAMED if named_subjects else COMPACT_SYSTEM
    examples = _EXAMPLES
    if chinese:
        system = _in_chinese_rules(system)
        examples = (*_EXAMPLES, *_CHINESE_EXAMPLES)
    messages: list[dict[str, str]] = [{"role": "system", "content": system}]
    for prompt, answer in examples:
        messages.append({"role": "user", "content": prompt})
        messages.append({"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)})
    texts = [truncate_middle(t, NEW_MESSAGE_MAX_TOKENS) for t in new_messages(state, user_message)]
    if len(texts) > 1:
        data = "NEW MESSAGES (oldest first):\n" + "\n".join(f"- {t}" for t in texts)
    else:
        data = f"NEW MESSAGE:\n{texts[0]}"
    messages.append({"role": "user", "content": data})
    return messages


def _fact(raw: Any) -> Candidate | None:
    """A candidate from one answer item: a string (or an object with ``fact``). The
    category comes from the text's cues and the importance is code's prior: a small
    model's own labels were noise, so screening's calibration sees the prior twice."""
    if isinstance(raw, Mapping):
        raw = raw.get("fact", raw.get("content"))
    if not isinstance(raw, str) or not clean_text(raw):
        return None
    content = clean_text(raw)[: 2 * FACT_MAX_CHARS]
    category = infer_category(content, "personal_fact")
    return Candidate(
        content=content,
        category=category,
        importance=importance_prior(category, content),
        confidence=COMPACT_CONFIDENCE,
        subject="user",
        keywords=tuple(extract_keywords(content)[:5]),
    )


def parse_compact(raw: str | Mapping[str, Any], previous: SessionMemoryState) -> HippocampusResult:
    """The compact answer as a result: the model's facts as candidates, short-term and
    background carried over (``roll_background`` adds the facts that pass screening).

    Raises ``HippocampusParseError`` when the answer holds no object with ``facts``.
    """
    data: Any = raw if isinstance(raw, Mapping) else _compact_object(raw)
    if not isinstance(data, Mapping) or "facts" not in data:
        raise HippocampusParseError("no compact hippocampus object (with 'facts') in the answer")
    dropped: list[str] = []
    facts = data.get("facts")
    candidates: list[Candidate] = []
    if not isinstance(facts, list):
        dropped.append("facts: not a list, ignored")
        facts = []
    for index, item in enumerate(facts[: 3 * MAX_FACTS]):
        candidate = _fact(item)
        if candidate is None:
            dropped.append(f"facts[{index}]: unusable, ignored")
        elif candidate.content.casefold() not in {c.content.casefold() for c in candidates}:
            candidates.append(candidate)
    label = data.get("emotion")
    emotion_label = canonical_emotion(label) if isinstance(label, str) else None
    return HippocampusResult(
        background=previous.background,
        short_term=previous.short_term,
        long_term=tuple(candidates),
        user_emotion=None if emotion_label is None else Emotion(emotion_label, 0.6),
        dropped=tuple(dropped),
    )


def _compact_object(raw: str) -> Any:
    """The first JSON object with ``facts`` in a text answer (a model without a grammar
    may wrap it in prose or a fence), or ``None``."""
    text = raw.strip()
    decoder = json.JSONDecoder()
    position = text.find("{")
    for _ in range(MAX_SCAN_POSITIONS):
        if position == -1:
            return None
        try:
            value, _end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, Mapping) and "facts" in value:
            return value
        position = text.find("{", position + 1)
    return None


def roll_background(previous: str, facts: Sequence[str]) -> str:
    """The background with ``facts`` added (newest last), each once, the oldest sentences
    dropped beyond ``BACKGROUND_MAX_CHARS``."""
    lines = [line for line in previous.split("\n") if line.strip()]
    known = {line.strip().casefold() for line in lines}
    for fact in facts:
        if fact.strip() and fact.strip().casefold() not in known:
            lines.append(fact.strip())
            known.add(fact.strip().casefold())
    while lines and len("\n".join(lines)) > BACKGROUND_MAX_CHARS:
        lines.pop(0)
    return "\n".join(lines)
