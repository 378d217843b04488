"""Is a proposed memory grounded in what was said, and does it say anything at all?

The save gate's rule 0 (docs/memory-model.md, "The save gate"): a model's candidate is a
proposal, never the evidence. This module measures the evidence.

**Content tokens** of a text (:func:`content_tokens`): NFKC, case-folded; Latin words
(letters, two or more) minus English stop words, subject words ("user", "they", "my"…)
and framing words ("said", "mentioned", "named"…), each folded by the hybrid module's
light suffix folding ("married"/"marry" meet); numbers as written ("3", "69.5"); CJK runs
as character bigrams (a single character stays itself), minus a few function bigrams.

**Support** of a candidate by some source texts (:func:`support`): the share of the
candidate's content tokens found among the sources' tokens. A Latin token also matches a
source token sharing its first five letters ("marriage" ~ "married"), since a
paraphrase keeps stems, not endings.

**Grounded** (:func:`grounding`): support at least ``min_support`` AND every number and
every capitalised name in the candidate (or a Latin word in a CJK sentence) found in
the sources as a whole word. A hallucinated book title or date fails
the second test even inside a sentence that is otherwise supported.

**Content-free** (:func:`is_content_free`): fewer than two content tokens once greetings,
thanks, filler and laughter (English and Chinese) are removed: "hi", "Hello there",
"The user said goodnight", "谢谢你", "哈哈哈"; but not a name standing alone ("The user is
Xiaoman"). What the user said they are in one word ("The user is vegetarian.", "The user
is a nurse.") is a fact too (:func:`said_of_self`), a feeling or a passing state aside.

Pure: no I/O, never raises for any string.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from backend.memory.emotions import canonical_emotion
from backend.memory.hybrid import fold
from backend.memory.keywords import STOP_WORDS_EN, is_cjk


def _words(text: str) -> frozenset[str]:
    """A whitespace-separated word list as a set."""
    return frozenset(text.split())


# Who a memory is about, and the words that frame a fact rather than state it.
_SUBJECT_WORDS = _words(
    """
    user users user's companion companions assistant persona bot they them their theirs
    themselves themself he him his she her hers i me my mine myself we us our ours you your
    yours yourself the a an is are was were be been am it its this that these those
    currently now also still really very guy guys person people folks thing things stuff
    to of in on at by as or if so up do go am is be no it us an
    """
)
_FRAMING_WORDS = _words(
    """
    said says say saying told tell tells mentioned mention mentions shared share shares
    asked ask asks wrote write writes talked talk talks chat chatted chatting stated state
    states noted note notes named name called call calls expressed express expresses
    feel feels felt feeling fact memory remember remembers conversation message messages
    has have had having does did do is
    """
)

# Greetings, thanks, filler and laughter: never memories on their own.
_PHATIC_WORDS = _words(
    """
    hi hello hey hiya yo howdy greetings greeting greeted greet welcome morning evening
    afternoon night goodnight gn bye goodbye farewell later cya see soon thanks thank
    thanked thx ty cheers appreciate please sorry ok okay okey alright sure yes yeah yep
    yup no nope nah fine good great nice cool lol lmao haha hahaha hehe hmm hm um uh oh ah
    wow everyone everybody there guys all again back how doing going well meet meeting
    pleasure glad day today chat chatting talk talking
    """
)
_PHATIC_ZH = tuple(
    sorted(
        _words(
            """
        你好 您好 早上好 晚上好 下午好 早安 晚安 午安 再见 拜拜 回头见 谢谢 谢谢你 感谢 多谢
        不客气 没事 没关系 好的 好吧 好 嗯嗯 嗯 哈哈哈 哈哈 呵呵 嘿嘿 哦 啊 呀 吧 呢 吗 了
        大家好 在吗 你在吗 晚安啦
        """
        ),
        key=len,
        reverse=True,
    )
)
# CJK bigrams that carry no content (用户 is "the user").
_CJK_FUNCTION = _words("用户 我的 你的 他的 她的 我们 你们 他们 的是 是一 一个 这个 那个")
# "The user" in a Chinese fact: a subject word, cut out before the bigrams, so that the
# seams it leaves (户的, 户在 of 用户的妹妹, 用户在银行) are not words the user never said.
_CJK_USER = re.compile("用户的?")

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)?")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)*)\b")
STEM_PREFIX = 5  # letters two Latin tokens must share to count as one word
_CONTRACTION = re.compile(r".+'(s|m|re|ve|ll|d|t)")
# A sentence ends at . ! ? before a space (not inside "7.0") or at CJK end punctuation.
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").casefold()


def _cjk_tokens(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _split_cjk(word: str) -> list[str]:
    """A token mixing CJK and other letters, cut into its CJK and non-CJK runs."""
    runs: list[str] = []
    for ch in word:
        if runs and is_cjk(ch) == is_cjk(runs[-1][-1]):
            runs[-1] += ch
        else:
            runs.append(ch)
    return runs


@lru_cache(maxsize=16_384)
def _tokens(text: str, ignore: frozenset[str]) -> frozenset[str]:
    out: set[str] = set()
    for raw in _TOKEN.findall(_normalise(text)):
        raw = raw.replace("’", "'")
        if _CONTRACTION.fullmatch(raw):  # "user's" → "user", "I'm" → "i", "don't" → "don"
            raw = raw.rsplit("'", 1)[0]
        for word in _split_cjk(raw) if not raw.isascii() else [raw]:
            if is_cjk(word):
                for piece in _CJK_USER.split(word):
                    out.update(t for t in _cjk_tokens(piece) if t and t not in _CJK_FUNCTION)
            elif word[0].isdigit():
                out.add(word.replace(",", ""))
            elif len(word) >= 2 and word not in ignore:
                out.add(fold(word))
    return frozenset(out)


_IGNORED = STOP_WORDS_EN | _SUBJECT_WORDS | _FRAMING_WORDS


def content_tokens(text: str) -> frozenset[str]:
    """The content tokens of ``text`` (see the module docstring)."""
    return _tokens(text, _IGNORED)


def _strip_phatic_zh(text: str) -> str:
    for phrase in _PHATIC_ZH:
        text = text.replace(phrase, " ")
    return text


def is_content_free(text: str) -> bool:
    """True for greetings, thanks, filler and anything with under two content tokens —
    except a name or number standing alone in a sentence without greetings ("The user's
    name is Man", "The user is in Chengdu": a fact; "Hi Juniper!": not one)."""
    normalised = _normalise(text)
    stripped = _strip_phatic_zh(normalised)
    tokens = _tokens(stripped, _IGNORED | _PHATIC_WORDS)
    latin = [t for t in tokens if not is_cjk(t)]
    cjk_chars = {ch for t in tokens if is_cjk(t) for ch in t}
    # Two Latin content words, or a Latin word and a CJK one, or a few CJK characters.
    if len(latin) + (len(cjk_chars) + 1) // 2 >= 2:
        return False
    greeted = stripped != normalised or bool(_tokens(normalised, _IGNORED) & _PHATIC_WORDS)
    return greeted or not (len(latin) == 1 and latin[0] in proper_names(text))


# "The user is vegetarian." / "The user is a nurse.": one content word, and a fact about
# the user if they said it of themselves (both were rejected as content-free until
# 2026-12-06). A feeling or a passing state is not one ("The user is tired.").
_PREDICATE = re.compile(
    r"^(?:the )?user (?:is|was|is now|became|has become|works as|identifies as) "
    r"(?P<article>an? )?(?P<word>[a-z][a-z-]+)\.?$"
)
_PASSING_TEXT = """tired sleepy hungry thirsty busy bored sick ill awake asleep free late early
    ready done home away out here there off around online offline sorry okay ok fine well
    better worse cold hot warm full"""
_PASSING_STATES = frozenset(_PASSING_TEXT.split())


def said_of_self(text: str, user_texts: Iterable[str]) -> bool:
    """``text`` says in one word what the user is ("The user is vegetarian.", "The user
    is a nurse.") and the user said so in the first person ("I'm vegetarian", "I am a
    nurse"; not "hamsters are nocturnal" for "The user is nocturnal.")."""
    match = _PREDICATE.match(" ".join(text.lower().split()))
    if match is None or match.group("word") in _PASSING_STATES:
        return False
    word = match.group("word")
    # A noun with its article names what they are; a bare word must not be a feeling.
    if not match.group("article") and canonical_emotion(word) is not None:
        return False
    said = re.compile(
        rf"\b(?:i'?m|i am|i've become|i have become|i became|i work as|i was)"
        rf"(?: (?:now|still|actually|also|a|an|fully|strictly))* {re.escape(word)}\b"
    )
    return any(said.search(u.lower().replace("’", "'")) for u in user_texts)


def proper_names(text: str) -> frozenset[str]:
    """Capitalised words after a sentence's first word, folded, minus ignored words:
    the names in "The user is Xiaoman" (xiaoman), none in "Remind me when it is"."""
    names = {m.group(1).casefold() for m in _CAPITALISED.finditer(text) if not _starts(text, m)}
    return frozenset(fold(n) for n in names if n not in _IGNORED and n not in _PHATIC_WORDS)


def _starts(text: str, match: re.Match[str]) -> bool:
    before = text[: match.start()].rstrip()
    return not before or before[-1] in ".!?:;\n"


def _matches(token: str, pool: frozenset[str], stems: frozenset[str]) -> bool:
    if token in pool:
        return True
    return (
        len(token) >= STEM_PREFIX
        and token.isascii()
        and token.isalpha()
        and token[:STEM_PREFIX] in stems
    )


def _stems(pool: frozenset[str]) -> frozenset[str]:
    return frozenset(
        t[:STEM_PREFIX] for t in pool if len(t) >= STEM_PREFIX and t.isascii() and t.isalpha()
    )


def support(text: str, sources: Iterable[str]) -> float:
    """The share of ``text``'s content tokens found in ``sources`` (1.0 when it has none)."""
    tokens = content_tokens(text)
    if not tokens:
        return 1.0
    pool = frozenset().union(*(content_tokens(s) for s in sources))
    stems = _stems(pool)
    return sum(_matches(t, pool, stems) for t in tokens) / len(tokens)


def specifics(text: str) -> frozenset[str]:
    """Numbers and names in ``text``: what must appear in the sources verbatim.

    Names are capitalised words ("Mei lives in Osaka": Mei and Osaka), minus stop,
    subject, framing and filler words ("The", "User", "Hi"); in a text with CJK, every
    Latin word counts as a name.
    """
    out = {n.replace(",", "") for n in _NUMBER.findall(unicodedata.normalize("NFKC", text))}
    if any(is_cjk(ch) for ch in text):
        names = {w.casefold() for w in re.findall(r"[A-Za-z]{2,}", text)}
    else:
        names = {m.casefold() for m in _CAPITALISED.findall(text)}
    names = {fold(n) for n in names if n not in _IGNORED and n not in _PHATIC_WORDS}
    return frozenset(out | names)


@dataclass(frozen=True, slots=True)
class Grounding:
    """How well some sources support a text: the share of its content, and what is missing."""

    support: float
    missing_specifics: tuple[str, ...]

    def ok(self, min_support: float) -> bool:
        return self.support >= min_support and not self.missing_specifics


# A request that opens with its verb and says nothing of the user in the first person:
# "Suggest a high-protein dinner for after." was stored as "The user is a high-protein
# dinner for after." (the coach demo). "Help me plan my sister's wedding in June" keeps
# its evidence: "my" speaks of the user.
_REQUEST = re.compile(
    r"^\W*(?:please\s+)?(?:suggest|recommend|give|tell|show|write|plan|find|list|describe|"
    r"explain|share|pick|choose|name|create|compose|translate|draft|summari[sz]e)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|us)\b", re.IGNORECASE
)


def statements(text: str) -> str:
    """``text`` without its questions ("Can we practise speaking?" states nothing about
    the user, so it is no evidence that the user practises speaking) and its requests
    with no first person in them (``_REQUEST``)."""
    sentences = _SENTENCE.split(text.strip())
    return " ".join(
        x
        for x in sentences
        if x.strip()
        and not x.rstrip().endswith(("?", "？"))
        and not (_REQUEST.search(x) and not _FIRST_PERSON.search(x.replace("\u2019", "'")))
    )


def grounding(text: str, sources: Iterable[str], *, questions: bool = True) -> Grounding:
    """:func:`support` plus the numbers and names of ``text`` the sources never mention.
    ``questions=False``: the sources' questions are no evidence (:func:`statements`)."""
    sources = [s if questions else statements(s) for s in sources]
    pool = frozenset().union(*(content_tokens(s) for s in sources))
    words = set(" ".join(_normalise(s) for s in sources).split())
    # Names and numbers match whole tokens: "Guangxing" is not "Guangzhou".
    missing = sorted(s for s in specifics(text) if not (s in pool or s in words))
    return Grounding(support(text, sources), tuple(missing))
