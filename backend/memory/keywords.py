"""Keywords of a text: the relevance channel's tokens (docs/memory-model.md, "Keywords of a text").

Limbic's rule, which this module reproduces exactly on ASCII input: lower-case the text,
take the runs of ``[a-z]``, keep those longer than 2 characters, drop English stop words.

Beyond ASCII (this project's extension, because its users write Chinese):

- the text is NFKC-normalised first, so full-width Latin ("Ｃｏｆｆｅｅ"), ligatures and
  decomposed accents end up as the same keyword as their plain forms;
- non-CJK words are runs of Unicode letters plus combining marks (accents kept: "café",
  "naïve", "müller", "москва"), lower-cased with ``str.lower`` (so "ß" stays "ß", the same
  lowering :class:`~backend.memory.types.Memory` applies to stored keywords); the
  "longer than 2 characters" rule still applies, counted in code points;
- CJK runs (Han, Hiragana, Katakana, Hangul) become overlapping character bigrams, and a
  single isolated CJK character stays a unigram; a run is split wherever a non-CJK
  character appears ("我在Melbourne工作" → 我在, melbourne, 工作); bigrams in a small
  Chinese (and a few Japanese) stop list are dropped, compared as whole tokens;
- numbers are never keywords: digits split words and are dropped, exactly as limbic's
  ``[a-z]`` runs drop them ("mp3" → "mp", too short; "2024年" → 年). Han numerals
  (一, 三...) are Han characters and stay part of their CJK run.

Failure policy: every function accepts any string (empty included) and never raises;
the result is ordered by first occurrence and holds no duplicates.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "STOP_WORDS_EN",
    "STOP_WORDS_JA",
    "STOP_WORDS_ZH",
    "extract_keywords",
    "is_cjk",
    "keyword_set",
    "stored_keyword_tokens",
]


def _words(text: str) -> frozenset[str]:
    """A whitespace-separated word list as a set (keeps long constant lists readable)."""
    return frozenset(text.split())


# English stop words: common function words (pronouns, auxiliaries, prepositions,
# conjunctions, determiners, contraction stems left by the [a-z] split such as "don" from
# "don't") plus a few chat fillers. Only words longer than 2 characters are listed, since
# shorter ones are dropped by the length rule anyway. "user" and "every" are deliberately
# NOT stop words: golden-scoring.json's relevance of "User drinks coffee every morning" to
# "coffee" is 1/5, i.e. the content keeps {user, drinks, coffee, every, morning}.
STOP_WORDS_EN: frozenset[str] = _words(
    """
    about above after again against all also although among and another any anyone are aren
    around because been before being below beneath besides between both but can cannot could
    couldn did didn does doesn doing don done down during each either else etc even ever few for
    from further get gets getting got had hadn has hasn have haven having hello her here hers
    herself hey him himself his how however into isn its itself just let lets like may maybe
    might mine more most much must mustn myself neither nor not off okay once one ones only onto
    other others otherwise ought our ours ourselves out over own per please quite rather really
    same shall shan she should shouldn since some somehow such than that thats the their theirs
    them themselves then there therefore these they this those though through thus too toward
    towards under unless until upon very via was wasn way well were weren what whatever when
    whenever where wherever whether which while who whoever whom whose why will with within
    without won would wouldn yeah yes yet you your yours yourself yourselves
    """
)

# Chinese stop tokens, compared against whole tokens (bigrams, or an isolated unigram):
# particles, pronouns and the commonest function-word bigrams. Kept modest on purpose:
# content bigrams that merely contain one of these characters are kept.
STOP_WORDS_ZH: frozenset[str] = _words(
    """
    的 了 是 我 你 他 她 它 在 和 也 就 都 而 及 与 着 或 吗 呢 吧 啊 呀 哦 嗯 么 之 这 那 个 有
    很 被 把 让 给 对 从 向 又 还 但 并 不 我们 你们 他们 她们 它们 咱们 我的 你的 他的 她的
    这个 那个 这些 那些 这样 那样 这么 那么 这里 那里 哪里 什么 怎么 怎样 就是 一个 一些 一下
    没有 可以 因为 所以 但是 然后 如果 还是 已经 自己 而且 或者 不是 还有 只是 其实 的话 时候
    真的 非常 有点
    """
)

# A handful of Japanese kana bigrams from copulas and verb endings (です, ます, した...),
# which otherwise appear in almost every Japanese sentence.
STOP_WORDS_JA: frozenset[str] = _words("です ます まし した して いる でし")

_STOP_CJK: frozenset[str] = STOP_WORDS_ZH | STOP_WORDS_JA

# Limbic's rule: runs of [a-z] longer than 2 characters. A regex on maximal runs of three
# or more letters finds exactly the runs longer than 2 (a shorter run never matches).
_ASCII_WORD_RE = re.compile(r"[a-z]{3,}")

# CJK characters that form bigram runs: Han (unified, extension A, compatibility, planes
# 2-3), Hiragana, Katakana (without the ・ middle dot and ゠), Katakana extensions,
# half-width Katakana, Hangul syllables and jamo, Bopomofo, and 々 〆 〇 〻.
_CJK_CLASS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007\u303b"  # 々 〆 〇 〻
    "\u3041-\u3096\u3099-\u309a\u309d-\u309f"  # Hiragana (and combining voicing marks)
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana, ー
    "\u3105-\u312f\u31a0-\u31bf"  # Bopomofo
    "\u3131-\u318e"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended-A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana (NFKC maps most of these away)
    "\U00020000-\U0003ffff"  # CJK extensions B-H, compatibility supplement
)


def _mark_class() -> str:
    """Combining marks (Mn, Mc, Me) of the scripts that write words with them.

    Python's ``\\w`` does not match marks, which would cut "हिन्दी" or a decomposed
    "i̇" into pieces; words therefore are letters *or* marks. Computed once at import from
    ``unicodedata`` over the blocks that hold marks outside CJK.
    """
    blocks = ((0x0300, 0x1DFF), (0x20D0, 0x20FF), (0xA670, 0xABFF), (0xFB1E, 0xFB1E))
    blocks += ((0xFE00, 0xFE0F), (0xFE20, 0xFE2F))
    ranges: list[tuple[int, int]] = []
    for first, last in blocks:
        for code in range(first, last + 1):
            if unicodedata.category(chr(code))[0] != "M":
                continue
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


_MARK_CLASS = _mark_class()

# One pass over the text: group 1 is a CJK run; group 2 is a non-CJK word: a letter (\w
# that is not a digit, underscore or CJK) followed by letters and combining marks,
# written as an unrolled loop so plain letters take the fast path. A CJK run inside a
# word ("我在Melbourne工作") thereby splits it at every script change.
_LETTER = rf"[^\W\d_{_CJK_CLASS}]"
_TOKEN_RE = re.compile(rf"([{_CJK_CLASS}]+)|({_LETTER}+(?:[{_MARK_CLASS}]+{_LETTER}*)*)")
_CJK_CHAR_RE = re.compile(rf"[{_CJK_CLASS}]")


def is_cjk(text: str) -> bool:
    """Whether ``text`` holds at least one CJK character (Han, kana, Hangul)."""
    return _CJK_CHAR_RE.search(text) is not None


def _extract_ascii(text: str) -> list[str]:
    """Limbic's rule, verbatim: the fast path for ASCII text."""
    return list(
        dict.fromkeys(w for w in _ASCII_WORD_RE.findall(text.lower()) if w not in STOP_WORDS_EN)
    )


def _extract_unicode(text: str) -> list[str]:
    """The Unicode/CJK rule; equals :func:`_extract_ascii` on ASCII input."""
    out: dict[str, None] = {}
    stop_en, stop_cjk = STOP_WORDS_EN, _STOP_CJK
    for run, word in _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower()):
        if word:
            if len(word) > 2 and word not in stop_en:
                out[word] = None
        elif len(run) == 1:
            if run not in stop_cjk:
                out[run] = None
        else:
            for i in range(len(run) - 1):
                bigram = run[i : i + 2]
                if bigram not in stop_cjk:
                    out[bigram] = None
    return list(out)


def extract_keywords(text: str) -> list[str]:
    """Keywords of ``text`` in first-occurrence order, without duplicates.

    ASCII text follows limbic's rule exactly (lower-case, ``[a-z]`` runs longer than 2,
    minus :data:`STOP_WORDS_EN`); other text follows the Unicode/CJK extension described
    in the module docstring. Never raises; an empty or keyword-free text gives ``[]``.
    """
    if not text:
        return []
    if text.isascii():
        return _extract_ascii(text)
    return _extract_unicode(text)


def keyword_set(text: str) -> frozenset[str]:
    """:func:`extract_keywords` as a set (what the Jaccard relevance compares)."""
    return frozenset(extract_keywords(text))


def stored_keyword_tokens(keywords: Iterable[str]) -> frozenset[str]:
    """Stored keywords (a memory's ``keywords``) as relevance tokens.

    Limbic takes stored keywords as they are, lower-cased; so does this function for
    every keyword without CJK characters (after stripping surrounding whitespace and, for
    non-ASCII ones, NFKC normalisation, so that they compare equal to content keywords).
    A keyword holding CJK characters is replaced by its bigrams (:func:`extract_keywords`),
    because a raw "拿铁咖啡" could never equal a query token, which is at most two CJK
    characters long. Empty keywords are dropped. Never raises.
    """
    tokens: set[str] = set()
    for keyword in keywords:
        value = keyword.strip().lower()
        if not value:
            continue
        if not value.isascii():
            value = unicodedata.normalize("NFKC", value).lower()
            if is_cjk(value):
                tokens.update(extract_keywords(value))
                continue
        tokens.add(value)
    return frozenset(tokens)
