"""The hippocampus down for 30 turns, end to end through the real app process, then back
(``bench/hippocampus_outage.py`` does the run; this asserts what it saw, never timing)."""

from __future__ import annotations

import pytest

from backend.engine.shown_notes import EARLIER_NOTES_TOKENS
from backend.hippocampus.budget import merge_trim_at
from bench import hippocampus_outage as bench

pytestmark = pytest.mark.slow


def test_thirty_turns_without_hippocampus_then_it_recovers() -> None:
    result = bench.run(before=3, outage=30, after=2)
    rows = result["rows"]
    assert result["errors"] == 0, [r.errors for r in rows if r.errors]
    assert all(r.reply_ok for r in rows)  # every reply as the chat model wrote it
    down = [r for r in rows if r.phase == "outage"]
    assert len(down) == 30
    # Each report says what happened: the two failure kinds, alternating.
    assert [r.hippocampus for r in down[:2]] == ["failed", "garbage"]
    assert {r.hippocampus for r in down} == {"failed", "garbage"}
    assert all(r.written == 0 for r in down)  # nothing to gate without a hippocampus
    # The fallback keeps short-term (stored and sent) within the budget; 30 turns of about
    # 110 tokens would be over 3000 without it, so the budget was really reached.
    budget = result["budget"]
    assert all(r.short_term_tokens <= budget for r in rows)
    assert all(r.prompt_short_term_tokens <= budget for r in rows)
    # (A merge trims from ``merge_trim_at``, a tenth below the budget; a turn is ~110.)
    assert max(r.short_term_tokens for r in down) > merge_trim_at(budget) - 150
    # The prompt stops growing. Full short-term is trimmed by a third of the budget at
    # once (budget.chunked_trim: the prompt's start then holds for a few turns, and a
    # local model's prompt cache with it), and the notes blocks shown before the trimmed
    # messages go with them (at most EARLIER_NOTES_TOKENS), so it saw-tooths between two
    # bounds.
    tail, earlier = [r.prompt_tokens for r in down[-10:]], [r.prompt_tokens for r in down[-20:-10]]
    assert max(tail) <= max(earlier) + 100
    assert max(tail) - min(tail) < budget // 3 + EARLIER_NOTES_TOKENS + 200
    # Back: one turn restores background, compressed short-term and long-term writes.
    assert result["turns_to_recover"] == 1
    first_back = next(r for r in rows if r.phase == "after")
    assert first_back.hippocampus == "ok" and first_back.written == 1
    assert first_back.background_has_newest and first_back.short_term_tokens < budget // 4
    # The turns the budget trimmed during the outage reach the background a batch per turn
    # back (the catch-up): each turn back names more topics than the one before.
    back = [r.background_topics for r in rows if r.phase == "after"]
    assert back == sorted(back) and back[-1] > back[0]
