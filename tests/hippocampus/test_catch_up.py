"""What the budget trims while the hippocampus fails is caught up on once it works again."""

from __future__ import annotations

import json

from backend.hippocampus import (
    HippocampusResult,
    SessionMemoryState,
    ShortTermItem,
    build_messages,
    merge,
)
from backend.hippocampus.budget import CATCH_UP_TOKENS, catch_up_batch, short_term_tokens
from backend.hippocampus.merge import MISSED_BUDGET_FACTOR

BUDGET = 200


def outage(turns: int, state: SessionMemoryState | None = None) -> SessionMemoryState:
    """``turns`` failed hippocampus runs, each user message naming its topic."""
    state = state or SessionMemoryState(background="Before: topic 0.")
    for i in range(1, turns + 1):
        message = f"Let me tell you about topic {i}: " + "and so on " * 8
        state = merge(state, None, message, f"Tell me more about topic {i}.", token_budget=BUDGET)
    return state


def payload(state: SessionMemoryState) -> dict[str, object]:
    content = build_messages(state, "new message")[1]["content"]
    start = content.index("{")
    return dict(json.JSONDecoder().raw_decode(content[start:])[0])


def topics(items: tuple[ShortTermItem, ...]) -> list[str]:
    return [i.text.split(":")[0][-7:] for i in items if i.text.startswith("Let me tell")]


def test_items_trimmed_during_an_outage_are_kept_as_missed_in_order() -> None:
    state = outage(6)
    assert short_term_tokens(state.short_term) <= BUDGET
    # Missed lists every message of the outage no run has read, oldest first, each once:
    # the trimmed ones, then those short-term still shows (a session ending here is
    # caught up by the next one from this list alone).
    assert topics(state.missed) == [f"topic {i}" for i in range(1, 7)]
    assert len(set(state.missed)) == len(state.missed)
    both = set(state.missed) & set(state.short_term)
    assert both and all(item.role == "user" and not item.compressed for item in both)
    assert [i for i in state.missed if i in both] == [i for i in state.short_term if i in both]
    assert SessionMemoryState.from_dict(state.to_dict()) == state  # survives storage


def test_a_failed_run_lists_its_message_for_the_next_run_to_read() -> None:
    state = outage(1)
    [message] = [item for item in state.short_term if item.role == "user"]
    assert state.missed == (message,)  # unread, though short-term shows it
    # Listed as missed: the rules form long-term facts from those and the new message.
    assert payload(state)["missed_turns"] == [{"role": "user", "text": message.text}]
    after = merge(state, HippocampusResult(background="bg"), "new", "ok", token_budget=BUDGET)
    assert after.missed == ()


def test_missed_is_bounded_and_keeps_the_newest() -> None:
    state = outage(40)
    # The trimmed part is bounded; the window's unread come on top (short-term's budget
    # bounds them).
    window = set(state.short_term)
    trimmed = tuple(item for item in state.missed if item not in window)
    assert short_term_tokens(trimmed) <= MISSED_BUDGET_FACTOR * BUDGET
    assert short_term_tokens(state.missed) <= (MISSED_BUDGET_FACTOR + 1) * BUDGET
    assert "topic 1:" not in " ".join(item.text for item in state.missed)
    assert "topic 40:" in state.missed[-1].text  # the newest message, unread in the window
    newest_trimmed = trimmed[-1].text
    oldest_short = state.short_term[0].text
    assert "topic" in newest_trimmed and "topic" in oldest_short


def test_a_working_run_is_shown_the_oldest_batch_and_its_merge_removes_it() -> None:
    state = outage(8)
    batch = catch_up_batch(state.missed)
    assert batch == state.missed[: len(batch)] and short_term_tokens(batch) <= CATCH_UP_TOKENS
    shown = payload(state)["missed_turns"]
    assert shown == [{"role": item.role, "text": item.text} for item in batch]
    result = HippocampusResult(background="Before: topic 0. Then topics 1 and 2.")
    after = merge(state, result, "hello again", "welcome back", token_budget=BUDGET)
    assert after.missed == state.missed[len(batch) :]
    # Run after run, the catch-up drains; then the prompt has no missed turns at all.
    for _ in range(20):
        after = merge(after, result, "more", "sure", token_budget=BUDGET)
    assert after.missed == ()
    assert "missed_turns" not in payload(after)


def test_a_failure_during_the_catch_up_keeps_what_was_not_caught_up() -> None:
    state = outage(5)
    assert state.missed
    again = merge(state, None, "Still down. " + "more words " * 20, "ok", token_budget=BUDGET)
    # Nothing is taken off ``missed`` by a failed run; at most the bound trims its oldest.
    retained = [item for item in again.missed if item in state.missed]
    assert retained and tuple(retained) == state.missed[len(state.missed) - len(retained) :]
    assert len(again.missed) > len(retained)  # and this turn's trimmed items are added


def test_an_oversized_missed_item_is_shown_cut_not_skipped() -> None:
    huge = ShortTermItem("user", "word " * 5000)
    batch = catch_up_batch((huge, ShortTermItem("user", "next")))
    assert len(batch) == 1 and batch[0].compressed
    assert short_term_tokens(batch) <= CATCH_UP_TOKENS
    state = SessionMemoryState(missed=(huge,))
    after = merge(state, HippocampusResult(background="b"), "u", "r", token_budget=BUDGET)
    assert after.missed == ()
