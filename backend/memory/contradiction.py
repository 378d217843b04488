"""Same topic, another value: a new fact that updates an older one without saying so.

The save gate's rule 4 (docs/memory-model.md): an older fact is superseded when the
hippocampus names it (``supersedes``) *or* when the new fact is on the same topic with a
contradicting value. Small local models never name what they update, so this module
finds the second case from the text alone, conservatively (a wrong supersession hides a
true fact):

- **values** (:func:`values`): month names (English and Chinese, "10月", "十月"),
  weekdays, and numbers with their unit when one follows (:data:`UNITS`: "72 kg",
  "3km", "6 am"); a number without one ("score 5.5", "weight is 69.5 now") is compared
  with the numbers of the same measure whatever their unit;
- **same topic**: for months and weekdays (the date of one event), the two facts share
  at least ``MIN_SHARED`` content tokens besides their values
  (``grounding.content_tokens``), or one token and either a word announcing a change
  ("moved", "postponed", "now") or vectors at least ``TOPIC_COSINE`` apart. For
  numbers, stricter, since a fact holds many numbers that are not the value of one slot
  ("swam 400 m today" does not update "can swim 50 m"): the content tokens besides the
  numbers must overlap by a Jaccard of at least ``NUMBER_TOPIC_JACCARD``;
- **the same kind of statement**: a goal ("would like to weigh 66 kg", "target",
  "aim") never updates a current value, nor the other way round;
- **contradiction**: for some kind of value (months; weekdays; numbers of one unit) both
  facts have values and they have none in common.

"The wedding moved to December" against "the wedding is in October"; "weighs 69.5 kg"
against "weighs 72 kg". Not "runs 3 km" against "has run for 2 years" (other units).

**A habit given up** (:func:`ceased`) is an update with no value: the new fact says the
user stopped, quit, gave up or no longer does something (停了, 戒了, 不再), and every
content word of what was stopped (up to the clause's end; numbers, units and time
words aside) is in the older fact, which says no such thing itself: "stopped the 16:8
fasting" updates "is intermittent fasting", "quit smoking" updates "smokes a pack a
day"; "stopped running on consecutive days" does not update "runs 3 km along the
river" (consecutive, days).

Pure: no I/O, never raises.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict

import numpy as np

from backend.memory.grounding import content_tokens
from backend.memory.scoring import cosine

MIN_SHARED = 2
TOPIC_COSINE = 0.55
NUMBER_TOPIC_JACCARD = 0.5
# Words that announce a change of date: one shared topic word is then enough.
_UPDATE = re.compile(
    r"\b(moved|changed|rescheduled|postponed|pushed|brought forward|delayed|now)\b|改到|推迟|提前",
    re.IGNORECASE,
)
_CEASED = re.compile(
    r"\b(?:stopped|stops|quit|quits|gave up|given up|no longer|not \w+ing anymore)\b"
    r"(?P<what>[^.,;!?()]*)|(?:停了|戒了|戒掉了?|不再)(?P<zh>[^，。；！？,.;!?]*)",
    re.IGNORECASE,
)
# Where what was stopped ends: a reason or a second clause is not part of it.
_CLAUSE_END = re.compile(
    r"\b(?:because|since|so|and|but|after|when|as)\b|因为|所以|但", re.IGNORECASE
)
_GOAL = re.compile(
    r"\b(goal|target|aim|aims|aiming|want|wants|wanted|would like|hope|hopes|hoping|plan|"
    r"plans|planning|dream|needs?|required?|requirement)\b|目标|想要|希望|计划|打算",
    re.IGNORECASE,
)

_MONTHS = tuple(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)
_MONTH_ABBREVIATIONS = {m[:3]: m for m in _MONTHS if m != "may"} | {"sept": "september"}
_ZH_MONTHS = ("一", "二", "三", "四", "五", "六", "七", "八", "九", "十", "十一", "十二")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_UNIT = re.compile(r"(\d+(?:\.\d+)?)\s*([^\W\d_]+)?")
_ZH_MONTH = re.compile(r"(十[一二]?|[一二三四五六七八九])月|(\d{1,2})\s*月")
_WORD = re.compile(r"[^\W\d_]+")
_MAY = re.compile(r"(?<![.!?]\s)(?<!^)\bMay\b")
# Words right after a number that say what it measures. A number followed by any other
# word is compared with the numbers of the same topic, whatever their unit.
UNITS = frozenset(
    [
        "kg",
        "kgs",
        "kilo",
        "kilos",
        "kilograms",
        "lb",
        "lbs",
        "pounds",
        "km",
        "k",
        "m",
        "metres",
        "meters",
        "miles",
        "mi",
        "cm",
        "mm",
        "g",
        "percent",
        "years",
        "year",
        "yrs",
        "months",
        "month",
        "weeks",
        "week",
        "days",
        "hours",
        "hrs",
        "h",
        "minutes",
        "min",
        "mins",
        "seconds",
        "sec",
        "secs",
        "bpm",
        "am",
        "pm",
        "reps",
        "sets",
        "laps",
        "steps",
    ]
)
_ORDINALS = frozenset({"st", "nd", "rd", "th"})
# When something was said, not what: no part of a topic ("last time I got 5.5").
_TIME_WORDS = frozenset(
    [
        "last",
        "time",
        "times",
        "next",
        "first",
        "ago",
        "recent",
        "recently",
        "usual",
        "usually",
        "got",
        "get",
        "gets",
    ]
)


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def values(text: str) -> dict[str, frozenset[str]]:
    """The values of ``text`` by kind: ``month``, ``weekday``, ``number:<unit>``."""
    found: dict[str, set[str]] = defaultdict(set)
    lowered = _normalise(text)
    words = _WORD.findall(lowered)
    for word in words:
        if word == "may":  # the month only when capitalised mid-sentence, not the verb
            if _MAY.search(text):
                found["month"].add(word)
        elif word in _MONTHS:
            found["month"].add(word)
        elif word in _MONTH_ABBREVIATIONS:
            found["month"].add(_MONTH_ABBREVIATIONS[word])
        elif word in _WEEKDAYS:
            found["weekday"].add(word)
    for match in _ZH_MONTH.finditer(lowered):
        if match.group(1):
            found["month"].add(_MONTHS[_ZH_MONTHS.index(match.group(1))])
        elif match.group(2) and 1 <= int(match.group(2)) <= 12:
            found["month"].add(_MONTHS[int(match.group(2)) - 1])
    for match in _NUMBER_UNIT.finditer(lowered):
        number, unit = match.group(1), match.group(2) or ""
        if unit.startswith("月"):
            continue  # a Chinese month, counted above
        if unit in _ORDINALS:
            unit = "day"  # "December 20th"
        elif unit not in UNITS:
            unit = ""  # "weight is 69.5 now": what it measures is the topic's business
        found[f"number:{unit}"].add(str(float(number)))
    return {kind: frozenset(v) for kind, v in found.items()}


def _value_words(kinds: dict[str, frozenset[str]]) -> set[str]:
    words = set(kinds.get("month", ())) | set(kinds.get("weekday", ()))
    return words | {w[:3] for w in words}


def _topic_tokens(text: str, ignore: set[str]) -> set[str]:
    return {
        t
        for t in content_tokens(text)
        if t not in ignore and t not in _TIME_WORDS and t not in UNITS and not t[:1].isdigit()
    }


def _numbers(kinds: dict[str, frozenset[str]]) -> set[str]:
    return {v for kind, found in kinds.items() if kind.startswith("number:") for v in found}


def same_topic(
    a: str, b: str, vector_a: np.ndarray | None = None, vector_b: np.ndarray | None = None
) -> bool:
    """Whether two facts talk about the same event (the loose test, for dates)."""
    ignore = _value_words(values(a)) | _value_words(values(b))
    shared = _topic_tokens(a, ignore) & _topic_tokens(b, ignore)
    if len(shared) >= MIN_SHARED:
        return True
    if shared and (_UPDATE.search(a) or _UPDATE.search(b)):
        return True  # "the wedding moved to September 20" against "the wedding is on June 14"
    similarity = cosine(vector_a, vector_b)
    return bool(shared) and similarity is not None and similarity >= TOPIC_COSINE


def same_measure(a: str, b: str) -> bool:
    """Whether two facts state one measured value (the strict test, for numbers)."""
    ignore = _value_words(values(a)) | _value_words(values(b))
    left, right = _topic_tokens(a, ignore), _topic_tokens(b, ignore)
    union = left | right
    return bool(union) and len(left & right) / len(union) >= NUMBER_TOPIC_JACCARD


def ceased(new: str, old: str) -> bool:
    """Whether ``new`` says the user gave up what ``old`` says they do (module docstring)."""
    match = _CEASED.search(_normalise(new))
    if match is None or _CEASED.search(_normalise(old)):
        return False
    what = match.group("what") if match.group("what") is not None else match.group("zh")
    what = _CLAUSE_END.split(what, maxsplit=1)[0].replace("了", "")
    stopped = _topic_tokens(what, set())  # "quit smoking last year": smoking
    return bool(stopped) and stopped <= content_tokens(old)


def contradicts(
    new: str, old: str, vector_new: np.ndarray | None = None, vector_old: np.ndarray | None = None
) -> str | None:
    """The kind of value on which ``new`` contradicts ``old`` on the same topic, or ``None``."""
    if bool(_GOAL.search(new)) != bool(_GOAL.search(old)):
        return None
    if ceased(new, old):
        return "ceased"
    new_values, old_values = values(new), values(old)
    announced = bool(_UPDATE.search(new))
    clashes = [
        kind
        for kind in sorted(new_values.keys() & old_values.keys())
        if not new_values[kind] & old_values[kind]
        # "moved his exam to April 28 because the March date was full": a change names
        # the old date too; a date the old fact lacks is enough.
        or (announced and kind in ("month", "weekday") and new_values[kind] - old_values[kind])
    ]
    for kind in clashes:
        if kind.startswith("number:"):
            if same_measure(new, old):
                return kind
        elif same_topic(new, old, vector_new, vector_old):
            return kind
    # A number without a unit may measure what one with a unit does ("weight is 69.5
    # now" against "weight is 72 kg").
    new_numbers, old_numbers = _numbers(new_values), _numbers(old_values)
    unitless = "number:" in new_values or "number:" in old_values
    if unitless and new_numbers and old_numbers and not new_numbers & old_numbers:
        return "number:" if same_measure(new, old) else None
    return None
