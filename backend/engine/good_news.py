"""Good news told, and sympathy said to it.

The 1.5B met "my brother Sami just got engaged!" with "I'm sorry to hear that your
brother Sami has just gotten engaged" (issue 24): "sorry to hear" is its stock opening
to any news. A message is good news when it says something to be glad of and nothing to
be sad about; a mixed one ("he got engaged but I'm dreading the speech") may well be met
with sympathy. Pure: regular expressions over the text.
"""

from __future__ import annotations

import re

# Checked on lowercase text with curly quotes made straight.
_GOOD = re.compile(
    r"\b(?:got |just |am |i'm |is |are |we're |she's |he's )?engaged\b|\bengagement\b"
    r"|\bgot married\b|\bgetting married\b|\bwedding\b|\bpromot(?:ed|ion)\b"
    r"|\bgot (?:the|a|my) (?:job|place|offer|flat|house|apartment|puppy|kitten)\b"
    r"|\bnew (?:job|puppy|kitten|baby)\b|\bpassed (?:my|her|his|the|our|their)\b"
    r"|\bgraduat(?:ed|ing|ion)\b|\bwon\b(?!')|\b(?:win|winning)\b|\bpregnant\b"
    r"|\bexpecting (?:a|their|her|our|my) (?:baby|first|second|child)\b|\bbaby (?:boy|girl)\b"
    r"|\bhad (?:her|his|their|a|the|our) (?:baby|first)\b"
    r"|\bwas born\b|\bbirthday\b|\bexcited\b|\bthrilled\b|\b(?:great|good|amazing) news\b"
    r"|\baccepted\b|\bproud\b|\bcelebrat|\bhired\b|\bbought (?:a|our|my) (?:house|flat|home)\b"
    r"|订婚|结婚|升职|录取|考上|通过了|怀孕|出生|好消息|太开心|很开心|好开心|高兴|太棒|"
    r"中奖|毕业|生日|激动"
)
# ... and nothing to be sad about. "passed away" is loss, whatever "passed" is elsewhere.
_BAD = re.compile(
    r"\b(?:sad|died|dead|death|passed away|lost|losing|sick|ill|illness|hospital|fired|"
    r"laid off|broke up|break-?up|divorc\w*|worr\w*|anxious|anxiety|stress\w*|rough|"
    r"tired|exhausted|hurt|injur\w*|cancel\w*|fail\w*|lonely|afraid|scared|dread\w*|"
    r"funeral|cancer|accident|awful|terrible|horrible|crying|cried|upset|angry|miss(?:es|ed)? "
    r"(?:him|her|them|you|my)|sorry|unfortunately|nervous|jealous|bad news|terrified|"
    r"not|never|didn't|wasn't|isn't|weren't|haven't|hasn't)\b"
    r"|难过|去世|过世|生病|住院|分手|离婚|失业|担心|焦虑|压力|失败|哭|孤独|害怕|伤心|"
    r"遗憾|可惜|累|紧张|不|没"
)
# Sympathy in a sentence of the reply.
_SYMPATHY = re.compile(
    r"\b(?:sorry to hear|sorry you(?:'re| are| had| have)|sorry for your|"
    r"sorry that happened|that(?:'s| is| must be) (?:tough|hard|rough|difficult)|"
    r"(?:my )?condolences)\b"
    r"|听到.{0,6}(?:难过|遗憾)|很抱歉听到|真遗憾|节哀"
)

_MAY_SYMPATHISE = re.compile(
    r"\bsorry\b|\bthat(?:'s| is| must)?\s*$|\bthat(?:'s| is| must be)\b|\bcondolence|"
    r"听到|抱歉|遗憾|节哀"
)


def _flat(text: str) -> str:
    return text.lower().replace("\u2019", "'")


def is_good_news(message: str) -> bool:
    """The message tells something to be glad of, and nothing to be sad about."""
    flat = _flat(message)
    return bool(_GOOD.search(flat)) and not _BAD.search(flat)


def sympathises(sentence: str) -> bool:
    """The sentence offers sympathy ("I'm sorry to hear that…", "听到…很难过")."""
    return bool(_SYMPATHY.search(_flat(sentence)))


def may_sympathise(fragment: str) -> bool:
    """A sentence begun so may still become sympathy: held to its end."""
    return bool(_MAY_SYMPATHISE.search(_flat(fragment)))
