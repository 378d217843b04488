"""The judge of ``bench.memory_formation``: what a replayed conversation left in the store.

Pure and independent of the app: no I/O, and nothing from the app's save gate or its
grounding code (this module judges the gate, so it must not share its notion of "same
fact" or "supported"). Everything below is plain text processing with fixed word lists,
so a reader can check any verdict by hand from the printed reason.

Definitions
-----------

Content words of a text (``content_words``):
  - English: the text is NFKC-normalised and lower-cased, split into runs of letters and
    runs of digits (``3km`` → ``3``, ``km``; ``he/she`` → ``he``, ``she``); stop words
    (``STOP_WORDS``: articles, pronouns, auxiliaries, prepositions, conjunctions,
    reporting and naming verbs such as "said", "called") and subject words
    (``SUBJECT_WORDS``: "user", "they", "their", "he", "she", "assistant", ...) are
    removed; each remaining word is stemmed by ``stem`` (common irregular past forms
    mapped to the base form, ``IRREGULAR``, then a few suffix rules: ``-ies``/``-ied`` →
    ``-y``, then ``-ing``, ``-ed``, ``-es``, ``-s``; a doubled final consonant and a final
    ``e`` are dropped, so "moved", "moving" and "move" all become ``mov``);
  - Chinese (CJK ideographs): runs of ideographs, cut at CJK stop characters
    (``CJK_STOP_CHARS``) and subject words ("用户", "他", "她"...); each piece becomes its
    character bigrams (a one-character piece stays a unigram).

Phatic (content-free) text (``phatic_reason``): after removing greeting, thanks and filler
phrases (``PHATIC_PHRASES``, English and Chinese) and phatic words (``PHATIC_WORDS``:
hi, hello, thanks, ok, lol, goodnight...), fewer than two content words are left. For
Chinese, every two CJK characters left (outside stop characters) count as one word. A
name standing alone is a fact, not filler: a capitalised word after a sentence's first
word ("The user is Xiaoman") counts as two content words, unless the text has a greeting
or filler word ("Hi Juniper!").

Supported (``support``): a memory is supported by some evidence (a set of messages) when
  1. at least ``SUPPORT_MIN_RATIO`` (60%) of the memory's content words are content
     words of the evidence (so a close paraphrase in the user's own words passes, an
     invented sentence does not), and
  2. at least ``SUPPORT_MIN_ANCHOR`` (50%) of them come from one single message (its
     "anchor"): a sentence stitched together from words of several messages ("I'd want
     to design monsters in the city of Haizhu because it has no money for art", from
     "design monsters all day" and "my studio flat in Haizhu") is not what anyone said,
     while a fact summarising two turns still has most of its words in one of them, and
  3. every number in the memory (``7.0``, ``20`` of "20th", ``16`` and ``8`` of
     "16:8"; compared as numbers, so 7 = 7.0) occurs in the evidence, and
  4. every capitalised name in the memory (a word of two or more letters starting with
     an upper-case letter that is not a stop or subject word: "Tudou", "Hangzhou",
     "December", "IELTS"; at the start of a sentence too) occurs in the evidence as a
     word, ignoring case.
  A memory with no content word at all is never supported.

The evidence for a memory written by turn ``t`` of the script is what its hippocampus
run could have seen: the user's messages of turns ``0..t`` and the assistant's replies
to turns ``0..t-1`` (the reply to turn ``t`` is written while that run is already going).
A memory whose turn is unknown is judged against the whole script.

Junk (``judge``), per current memory, any of:
  - phatic text (above);
  - subject ``user`` and not supported by the user's messages;
  - subject ``persona`` and supported neither by the assistant's messages (plus the
    persona card text, when given) nor by the user's.

Wrong subject, per current memory:
  - subject ``persona``, supported by the user's messages but not by the assistant's
    (nor the card): a fact the user stated, filed as the companion's;
  - subject ``user``, not supported by the user's messages but supported by the
    assistant's: the companion's words filed as the user's. Such a memory is junk too
    (it is not supported by the user): both lists show it, on purpose.

Duplicates: over the current memories in the order they were written, a memory is a
duplicate when an earlier current memory has a content-word Jaccard of at least
``DUPLICATE_JACCARD`` (0.6) with it, or an embedding cosine of at least
``DUPLICATE_COSINE`` (0.9) when vectors are given. The count is the number of memories
that duplicate an earlier one (three restatements of one fact count 2).

Limitations, stated rather than hidden: support is word overlap within one language, so
  - a memory that translates what the user said (an English memory of a Chinese message)
    is judged unsupported; the printed reasons show such cases;
  - a memory that reuses the user's words with the roles, the negation or the relation
    changed ("My lungs aren't dying." from "my lungs are dying"; "The user's wife found
    him in her shoe." from "I found him in my shoe") is judged supported. The junk count
    is therefore a lower bound: read the exported store (``--export``) for the rest.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

SUPPORT_MIN_RATIO = 0.6
SUPPORT_MIN_ANCHOR = 0.5
DUPLICATE_JACCARD = 0.6
DUPLICATE_COSINE = 0.9
MIN_CONTENT_WORDS = 2  # fewer than this (after removing phatic words) is phatic


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP_WORDS = _words(
    """
    a an the this that these those there here some any each every all both either neither
    no not nor none only just also too very really quite so such than then now again ever
    still already yet even much many more most less least few lot lots bit
    i me my mine myself you your yours yourself yourselves we us our ours ourselves
    it its itself one ones someone something anyone anything everyone everybody everything
    nobody nothing somebody who whom whose which what whatever when where why how
    am is are was were be been being do does did doing done have has had having
    getting gotten
    will would shall should can could may might must ought let lets get gets got
    to of in on at by for with about against between into through during before after
    above below from up down out off over under along around across near via per
    and or but if because as until while although though since unless whether
    s t m re ve ll d st nd rd th don didn doesn isn wasn aren weren haven hasn hadn
    wouldn couldn shouldn cannot
    say says said saying tell tells told telling mention mentions mentioned mentioning
    call calls called calling name names named naming
    like likes liked
    ok okay yes yeah yep nope lol haha btw oh ah um uh hmm well
    """
)
"""English stop words (removed before any comparison). "like" is here because it is
mostly filler in chat ("like a 3"); a preference survives as "love", "enjoy", "prefer"."""

SUBJECT_WORDS = _words(
    """
    user users user's they them their theirs themselves he him his himself she her hers
    herself assistant assistants companion persona person people guy guys folks
    """
)
"""Words that name the subject of a memory rather than its content."""

IRREGULAR = {
    "ate": "eat", "eaten": "eat", "began": "begin", "begun": "begin", "bought": "buy",
    "brought": "bring", "came": "come", "caught": "catch", "chose": "choose",
    "fell": "fall", "felt": "feel", "flew": "fly", "forgot": "forget", "found": "find",
    "froze": "freeze", "frozen": "freeze", "gave": "give", "given": "give", "went": "go",
    "gone": "go", "grew": "grow", "grown": "grow", "kept": "keep", "knew": "know",
    "left": "leave", "lost": "lose", "made": "make", "met": "meet", "paid": "pay",
    "ran": "run", "sat": "sit", "saw": "see", "seen": "see", "sent": "send",
    "slept": "sleep", "spent": "spend", "swam": "swim", "swum": "swim", "taught": "teach",
    "thought": "think", "took": "take", "taken": "take", "won": "win", "wrote": "write",
    "written": "write", "woke": "wake", "broke": "break", "broken": "break",
}  # fmt: skip
"""Irregular past forms, mapped to the base form before stemming ("grew up" = "grow up")."""

PHATIC_WORDS = _words(
    """
    hi hello hey heya hiya howdy yo greetings greet greets greeted greeting
    thanks thank thanked thanking thx ty cheers appreciate appreciated
    bye goodbye goodnight cya farewell welcome please alright
    chat chatted chatting talk talked talking conversation
    """
)
"""Words that carry no fact in a short message (removed for the phatic test only).
Words that are phatic only in a phrase ("good", "night", "morning", "fine") are in
``PHATIC_PHRASES`` instead: "runs at night" and "her knee is fine" keep them."""

PHATIC_PHRASES = (
    "good morning",
    "good evening",
    "good afternoon",
    "good night",
    "nice to meet you",
    "how are you",
    "see you",
    "talk to you later",
    "you're welcome",
    "no problem",
    "no worries",
    "早上好",
    "早安",
    "晚上好",
    "下午好",
    "中午好",
    "你好",
    "您好",
    "大家好",
    "哈喽",
    "嗨",
    "谢谢",
    "多谢",
    "感谢",
    "再见",
    "拜拜",
    "晚安",
    "好的",
    "好吧",
    "嗯嗯",
    "嗯",
    "哈哈",
    "呵呵",
    "没事",
    "没关系",
    "不客气",
    "是的",
    "打招呼",
    "问好",
    "聊天",
)
"""Greeting, thanks and filler phrases, English and Chinese."""

CJK_SUBJECT_WORDS = ("用户", "他们", "她们", "他", "她", "助手", "伙伴")
# (都, "all", is not one: it is half of 成都, 首都 and 京都, and "用户老家在成都。" read as one
# content word, 老家, and was judged phatic.)
CJK_STOP_CHARS = frozenset(
    "的了吗呢吧啊呀哦嘛我你您它们是在很也就和与及或说又还这那个有着过把被给让"
)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[a-z]+|\d+(?:\.\d+)?|[{_CJK}]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_NAME = re.compile(r"(?<![A-Za-z])[A-Z][A-Za-z]+")
_CJK_RUN = re.compile(rf"[{_CJK}]+")


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    return text.replace("’", "'").replace("‘", "'")


def stem(word: str) -> str:
    """A crude, deterministic English stem (see the module docstring); the same rules on
    both sides of every comparison are what matters, not linguistic accuracy."""
    word = IRREGULAR.get(word, word)
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, replacement in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""),
                                ("es", ""), ("s", "")):  # fmt: skip
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                continue
            word = word[: len(word) - len(suffix)] + replacement
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def _cjk_pieces(run: str) -> list[str]:
    """A run of ideographs cut at subject words and stop characters."""
    for word in CJK_SUBJECT_WORDS:
        run = run.replace(word, " ")
    pieces, current = [], []
    for ch in run:
        if ch == " " or ch in CJK_STOP_CHARS:
            if current:
                pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        pieces.append("".join(current))
    return pieces


def _bigrams(piece: str) -> list[str]:
    return [piece] if len(piece) == 1 else [piece[i : i + 2] for i in range(len(piece) - 1)]


def content_words(text: str) -> frozenset[str]:
    """The content words of ``text``: stemmed English words and CJK bigrams."""
    words: set[str] = set()
    for token in _TOKEN.findall(_normalise(text).lower()):
        if _CJK_RUN.fullmatch(token):
            for piece in _cjk_pieces(token):
                words.update(_bigrams(piece))
        elif token not in STOP_WORDS and token not in SUBJECT_WORDS:
            words.add(stem(token))
    return frozenset(words)


def numbers(text: str) -> frozenset[float]:
    """Every number written with digits in ``text`` ("20th" → 20, "16:8" → 16 and 8)."""
    return frozenset(float(n) for n in _NUMBER.findall(_normalise(text)))


def names(text: str) -> frozenset[str]:
    """Capitalised words that are not stop or subject words, lower-cased."""
    found = set()
    for match in _NAME.findall(_normalise(text)):
        low = match.lower()
        if low not in STOP_WORDS and low not in SUBJECT_WORDS and low not in PHATIC_WORDS:
            found.add(low)
    return frozenset(found)


def phatic_reason(text: str) -> str | None:
    """Why ``text`` is content-free (greeting, thanks, filler), or ``None``."""
    low = _normalise(text).lower()
    for phrase in PHATIC_PHRASES:
        low = low.replace(phrase, " ")
    english = 0
    cjk_chars = 0
    greeted = False
    for token in _TOKEN.findall(low):
        if _CJK_RUN.fullmatch(token):
            cjk_chars += sum(len(piece) for piece in _cjk_pieces(token))
        elif token in PHATIC_WORDS or stem(token) in PHATIC_WORDS:
            greeted = True
        elif token not in STOP_WORDS and token not in SUBJECT_WORDS:
            english += 1
    count = english + cjk_chars // 2
    if count == 1 and not greeted and low == _normalise(text).lower():
        first = _TOKEN.findall(low)[:1]
        if any(name not in first for name in names(text)):
            count = 2  # a name standing alone: "The user is Xiaoman"
    if count < MIN_CONTENT_WORDS:
        return f"phatic: {count} content word{'s' if count != 1 else ''} besides greetings/filler"
    return None


@dataclass(frozen=True, slots=True)
class Evidence:
    """What some messages said, ready for ``support``."""

    words: frozenset[str] = frozenset()
    numbers: frozenset[float] = frozenset()
    tokens: frozenset[str] = frozenset()  # lower-cased, unstemmed (for names)
    messages: tuple[frozenset[str], ...] = ()  # the content words of each message

    @classmethod
    def of(cls, texts: Iterable[str]) -> Evidence:
        messages: list[frozenset[str]] = []
        nums: set[float] = set()
        tokens: set[str] = set()
        for text in texts:
            messages.append(content_words(text))
            nums |= numbers(text)
            tokens.update(_TOKEN.findall(_normalise(text).lower()))
        words = frozenset().union(*messages)
        return cls(words, frozenset(nums), frozenset(tokens), tuple(messages))

    def __or__(self, other: Evidence) -> Evidence:
        return Evidence(
            self.words | other.words,
            self.numbers | other.numbers,
            self.tokens | other.tokens,
            self.messages + other.messages,
        )


@dataclass(frozen=True, slots=True)
class Support:
    """How well some evidence supports a memory."""

    ratio: float  # share of the memory's content words found in the evidence
    anchor: float  # the largest share found in one single message
    missing_words: tuple[str, ...]
    missing_numbers: tuple[str, ...]
    missing_names: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return (
            self.ratio >= SUPPORT_MIN_RATIO
            and self.anchor >= SUPPORT_MIN_ANCHOR
            and not self.missing_numbers
            and not self.missing_names
        )

    def describe(self) -> str:
        parts = [f"{self.ratio:.0%} of content words ({self.anchor:.0%} in one message)"]
        if self.missing_words:
            parts.append("missing " + ", ".join(self.missing_words[:6]))
        if self.missing_numbers:
            parts.append("numbers not said: " + ", ".join(self.missing_numbers))
        if self.missing_names:
            parts.append("names not said: " + ", ".join(self.missing_names))
        return "; ".join(parts)


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def support(text: str, evidence: Evidence) -> Support:
    """How well ``evidence`` supports the memory ``text`` (see the module docstring)."""
    words = content_words(text)
    missing = sorted(words - evidence.words)
    ratio = (len(words) - len(missing)) / len(words) if words else 0.0
    anchor = max((len(words & m) / len(words) for m in evidence.messages if words), default=0.0)
    return Support(
        ratio=ratio,
        anchor=anchor,
        missing_words=tuple(missing),
        missing_numbers=tuple(_number_text(n) for n in sorted(numbers(text) - evidence.numbers)),
        missing_names=tuple(sorted(n for n in names(text) if n not in evidence.tokens)),
    )


# --- the store ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Utterance:
    """One message of the script; ``turn`` is the index of its user turn in the whole
    script (0-based, across sessions); a reply has the index of the turn it answers."""

    role: Literal["user", "assistant"]
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """One memory of the final store, as the judge sees it. ``turn``: the script turn whose
    merge wrote it (``None``: unknown, judged against the whole script)."""

    id: str
    content: str
    subject: str  # "user" or "persona"
    current: bool = True
    turn: int | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    memory_id: str
    content: str
    reason: str
    other_id: str | None = None  # the earlier memory a duplicate restates


@dataclass(frozen=True)
class Judgement:
    memories: int  # current memories judged
    junk: tuple[Finding, ...] = ()
    subject_errors: tuple[Finding, ...] = ()
    duplicates: tuple[Finding, ...] = ()
    supported: dict[str, Support] = field(default_factory=dict)  # by memory id, user side


def _evidence(transcript: Sequence[Utterance], role: str, turn: int | None) -> Evidence:
    """The ``role``'s messages that a hippocampus run of turn ``turn`` could have seen."""
    if turn is None:
        return Evidence.of(u.text for u in transcript if u.role == role)
    last = turn if role == "user" else turn - 1
    return Evidence.of(u.text for u in transcript if u.role == role and u.turn <= last)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0 or not math.isfinite(dot):
        return None
    return dot / (na * nb)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def duplicates(
    memories: Sequence[StoredMemory], vectors: Mapping[str, Sequence[float]] | None = None
) -> list[Finding]:
    """Current memories that restate an earlier current one (see the module docstring)."""
    found: list[Finding] = []
    current = [m for m in memories if m.current]
    words = {m.id: content_words(m.content) for m in current}
    vectors = vectors or {}
    for j, later in enumerate(current):
        for earlier in current[:j]:
            overlap = jaccard(words[earlier.id], words[later.id])
            cos = None
            if earlier.id in vectors and later.id in vectors:
                cos = _cosine(vectors[earlier.id], vectors[later.id])
            if overlap >= DUPLICATE_JACCARD or (cos is not None and cos >= DUPLICATE_COSINE):
                how = f"word Jaccard {overlap:.2f}" + ("" if cos is None else f", cosine {cos:.3f}")
                found.append(Finding(later.id, later.content, f"restates: {how}", earlier.id))
                break
    return found


def judge(
    memories: Sequence[StoredMemory],
    transcript: Sequence[Utterance],
    *,
    vectors: Mapping[str, Sequence[float]] | None = None,
    persona_text: str = "",
) -> Judgement:
    """Junk, subject errors and duplicates among the current ``memories`` (in the order
    they were written), against the script's ``transcript``. ``persona_text``: the
    persona card, which supports facts about the persona like the assistant's words."""
    junk: list[Finding] = []
    subject: list[Finding] = []
    supported: dict[str, Support] = {}
    card = Evidence.of([persona_text])
    for memory in memories:
        if not memory.current:
            continue
        user = support(memory.content, _evidence(transcript, "user", memory.turn))
        assistant_ev = _evidence(transcript, "assistant", memory.turn)
        if persona_text:
            assistant_ev = assistant_ev | card
        assistant = support(memory.content, assistant_ev)
        supported[memory.id] = user
        phatic = phatic_reason(memory.content)
        if phatic:
            junk.append(Finding(memory.id, memory.content, phatic))
        if memory.subject == "persona":
            if not assistant.ok and not user.ok and not phatic:
                junk.append(
                    Finding(
                        memory.id,
                        memory.content,
                        "persona fact said by nobody: assistant " + assistant.describe(),
                    )
                )
            elif user.ok and not assistant.ok:
                subject.append(
                    Finding(
                        memory.id,
                        memory.content,
                        "filed as persona but the user said it: user " + user.describe(),
                    )
                )
        else:
            if not user.ok and not phatic:
                junk.append(
                    Finding(memory.id, memory.content, "not said by the user: " + user.describe())
                )
            if not user.ok and assistant.ok:
                subject.append(
                    Finding(
                        memory.id,
                        memory.content,
                        "filed as user but only the assistant said it: assistant "
                        + assistant.describe(),
                    )
                )
    current = sum(1 for m in memories if m.current)
    return Judgement(
        memories=current,
        junk=tuple(junk),
        subject_errors=tuple(subject),
        duplicates=tuple(duplicates(memories, vectors)),
        supported=supported,
    )


# --- probes ------------------------------------------------------------------------------


def probe_hit(contents: Sequence[str], expects_any: Sequence[str]) -> int | None:
    """Index of the first content containing one of ``expects_any`` (case-insensitive)."""
    wanted = [e.casefold() for e in expects_any]
    for index, content in enumerate(contents):
        low = content.casefold()
        if any(e in low for e in wanted):
            return index
    return None


def stale_hit(
    activated: Sequence[tuple[str, bool]], expects_any: Sequence[str], stale_any: Sequence[str]
) -> int | None:
    """Index of the first activated memory that is current (``(content, current)``),
    contains a ``stale_any`` value and none of ``expects_any``; ``None`` when none."""
    stale = [s.casefold() for s in stale_any]
    wanted = [e.casefold() for e in expects_any]
    if not stale:
        return None
    for index, (content, current) in enumerate(activated):
        low = content.casefold()
        if current and any(s in low for s in stale) and not any(e in low for e in wanted):
            return index
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by linear interpolation; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
