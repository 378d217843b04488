"""Token estimates and the deterministic short-term budget (docs/architecture.md, failure policy).

``estimate_tokens`` is an estimate, not a tokenizer: about one token per CJK character
and one per four characters of other text. That is close enough to keep a prompt
bounded and flat across a long conversation, and it needs no model files, so the budget
behaves the same with every provider and in tests.

The budget is enforced by code, after every merge, whatever the hippocampus did:

1. while short-term exceeds the budget, the OLDEST items go (they are still in the
   transcript: nothing is lost, the prompt just stops carrying them). Code never folds
   them into the background; that is the hippocampus's job on later turns;
2. the items of the newest turn (the user message and the reply) are never dropped; if
   they alone exceed the budget, their texts are cut from the middle, with ``…`` where
   the cut is (and the item is marked compressed, since it is no longer verbatim), so
   the prompt stays bounded even for a pasted novel.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace

from backend.hippocampus.state import ShortTermItem

# OpenAI's chat format spends about 3-4 tokens per message on role markers (openai-cookbook,
# "How to count tokens with tiktoken"); we take the upper end.
ITEM_OVERHEAD_TOKENS = 4
# Below this the newest turn cannot be carried in any useful form: a configuration error.
MIN_TOKEN_BUDGET = 32
TRUNCATION_MARKER = "…"

# Code points counted as one token each: CJK ideographs (incl. extensions and
# compatibility forms), kana, Hangul, CJK punctuation, full-width forms.
_CJK = re.compile(
    "["
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3000-\u30ff"  # CJK symbols and punctuation, hiragana, katakana
    "\u3100-\u31ff"  # bopomofo, Hangul compatibility jamo, kanbun, katakana ext.
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # half-width and full-width forms
    "\U00020000-\U0003134f"  # CJK extensions B-G, compatibility supplement
    "]"
)


def estimate_tokens(text: str) -> int:
    """Estimated token count: 1 per CJK character + ceil(other characters / 4).

    Deterministic and dependency-free; 0 only for the empty string. Adding characters
    never lowers the estimate.
    """
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def item_tokens(item: ShortTermItem) -> int:
    """Tokens one item costs in a prompt: its text plus the per-message overhead."""
    return estimate_tokens(item.text) + ITEM_OVERHEAD_TOKENS


def short_term_tokens(items: Sequence[ShortTermItem]) -> int:
    """Estimated prompt cost of the short-term items, the quantity the budget bounds."""
    return sum(item_tokens(item) for item in items)


def _cut(text: str, keep: int) -> str:
    head = math.ceil(keep / 2)
    tail = keep - head
    return text[:head] + TRUNCATION_MARKER + (text[len(text) - tail :] if tail else "")


def truncate_middle(text: str, max_tokens: int) -> str:
    """``text`` unchanged if it fits ``max_tokens``, else its head and tail around ``…``.

    Keeps as many characters as fit (binary search; the estimate is monotone in the
    characters kept). With ``max_tokens < 1`` the result is the marker alone.
    """
    if estimate_tokens(text) <= max_tokens:
        return text
    lo, hi = 0, len(text) - 1  # keep == len(text) is the untruncated text, known too big
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(_cut(text, mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return _cut(text, lo)


def chunked_trim(token_budget: int) -> int:
    """What to trim short-term down to once it is over ``token_budget``: a third below
    it, so the oldest items go a few turns' worth at a time. The prompt then starts the
    same way for several turns, and a local model's prompt cache holds; trimming one item
    per turn changed the prompt's start every turn, and every turn evaluated the whole
    history again."""
    return max(MIN_TOKEN_BUDGET, token_budget * 2 // 3)


def merge_trim_at(token_budget: int) -> int:
    """Where a merge starts trimming short-term (with ``trim_to``): a tenth below the
    budget, so that the next user message fits beside the merged window and the reply's
    prompt starts as the window read ahead (``backend.engine.next_prompt``). Trimmed
    only at the budget, a message that pushed the window over it trimmed it when the reply
    was built: a prompt start no read-ahead had seen, ~450 tokens read before the first
    token (2.4 s of the 1.5B on two cores; bench.reply_quality's long session, seed 4)."""
    return max(MIN_TOKEN_BUDGET, token_budget - token_budget // 10)


def enforce_budget(
    items: Sequence[ShortTermItem],
    *,
    token_budget: int,
    protected: int = 2,
    trim_to: int | None = None,
    trim_at: int | None = None,
) -> tuple[ShortTermItem, ...]:
    """Trim short-term to ``token_budget`` (see the module docstring for the rules).

    ``protected`` is how many of the newest items are never dropped (the newest turn:
    user message and reply). ``trim_to``: once over the budget, drop the oldest items
    down to this many tokens (``chunked_trim``), not just below the budget; ``trim_at``:
    with ``trim_to``, do so once over this many tokens instead (``merge_trim_at``). The
    result costs at most ``token_budget`` tokens by ``short_term_tokens``. Raises
    ``ValueError`` when ``token_budget < MIN_TOKEN_BUDGET`` (a configuration error, caught
    at start by the settings).
    """
    if token_budget < MIN_TOKEN_BUDGET:
        raise ValueError(f"token_budget must be at least {MIN_TOKEN_BUDGET}, got {token_budget}")
    kept = list(items)
    protected = max(0, min(protected, len(kept)))
    total = short_term_tokens(kept)
    trigger = token_budget if trim_at is None else min(trim_at, token_budget)
    target = token_budget if trim_to is None or total <= trigger else trim_to
    start = 0
    while total > min(target, token_budget) and len(kept) - start > protected:
        total -= item_tokens(kept[start])
        start += 1
    kept = kept[start:]
    if total <= token_budget:
        return tuple(kept)
    # Only the protected newest items are left and they are too big: share the budget
    # fairly between them (the smaller first takes what it needs, up to an equal share).
    available = token_budget - ITEM_OVERHEAD_TOKENS * len(kept)
    order = sorted(range(len(kept)), key=lambda i: (estimate_tokens(kept[i].text), i))
    allowances: dict[int, int] = {}
    for rank, index in enumerate(order):
        share = available // (len(kept) - rank)
        allowances[index] = min(estimate_tokens(kept[index].text), share)
        available -= allowances[index]
    return tuple(
        replace(item, text=truncate_middle(item.text, allowances[i]), compressed=True)
        if estimate_tokens(item.text) > allowances[i]
        else item
        for i, item in enumerate(kept)
    )


# How much of the missed items one hippocampus run is shown (oldest first): a catch-up
# after an outage proceeds a few turns at a time, so the hippocampus prompt grows by at
# most this much, and a model with a small context is not pushed over it (which would
# fail every run and never catch up).
CATCH_UP_TOKENS = 500


def catch_up_batch(missed: Sequence[ShortTermItem]) -> tuple[ShortTermItem, ...]:
    """The oldest missed items one run is shown: as many as fit ``CATCH_UP_TOKENS``, and
    at least the first one (cut from the middle if it alone is larger)."""
    batch: list[ShortTermItem] = []
    total = 0
    for item in missed:
        cost = item_tokens(item)
        if batch and total + cost > CATCH_UP_TOKENS:
            break
        if not batch and cost > CATCH_UP_TOKENS:
            text = truncate_middle(item.text, CATCH_UP_TOKENS - ITEM_OVERHEAD_TOKENS)
            return (replace(item, text=text, compressed=True),)
        batch.append(item)
        total += cost
    return tuple(batch)
