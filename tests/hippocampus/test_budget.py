"""Token estimate and the deterministic short-term budget."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.hippocampus import (
    ITEM_OVERHEAD_TOKENS,
    MIN_TOKEN_BUDGET,
    ShortTermItem,
    enforce_budget,
    estimate_tokens,
    short_term_tokens,
    truncate_middle,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        (" ", 1),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("我喜欢咖啡", 5),
        ("我喜欢coffee", 3 + 2),
        ("こんにちは", 5),
        ("안녕하세요", 5),
        ("你好，世界。", 6),  # full-width punctuation counts as CJK
    ],
)
def test_estimate_tokens(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


@given(st.text(), st.text())
def test_estimate_is_monotone_under_concatenation(a: str, b: str) -> None:
    assert estimate_tokens(a + b) >= estimate_tokens(a)
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b) + 1


@given(st.text(min_size=1), st.integers(min_value=1, max_value=200))
def test_truncate_middle_fits_and_keeps_head_and_tail(text: str, limit: int) -> None:
    out = truncate_middle(text, limit)
    assert estimate_tokens(out) <= limit
    if out != text:
        head, _, tail = out.partition("…")
        assert text.startswith(head)
        assert text.endswith(tail)


def test_truncate_middle_leaves_fitting_text_alone() -> None:
    assert truncate_middle("short", 10) == "short"
    # 25 tokens of ASCII cut to 5: 19 characters kept around the marker (20 chars = 5 tokens).
    assert truncate_middle("x" * 100, 5) == "x" * 10 + "…" + "x" * 9
    cut = truncate_middle("HEAD" + "x" * 400 + "TAIL", 10)
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and "…" in cut


def _items(*texts: str) -> list[ShortTermItem]:
    return [
        ShortTermItem("user" if i % 2 == 0 else "assistant", t, False) for i, t in enumerate(texts)
    ]


def test_budget_drops_oldest_first() -> None:
    items = _items("a" * 40, "b" * 40, "c" * 40, "d" * 40)  # 10 + 4 tokens each
    assert [i.text[0] for i in enforce_budget(items, token_budget=42)] == ["b", "c", "d"]
    kept = enforce_budget(items, token_budget=41, protected=2)
    assert [i.text[0] for i in kept] == ["c", "d"]
    assert short_term_tokens(kept) <= 41


def test_budget_keeps_everything_that_fits() -> None:
    items = _items("a", "b", "c")
    assert enforce_budget(items, token_budget=100) == tuple(items)


def test_oversized_newest_pair_is_cut_from_the_middle() -> None:
    items = [
        ShortTermItem("note", "old", True),
        ShortTermItem("user", "U" * 4000),
        ShortTermItem("assistant", "R" * 40),
    ]
    kept = enforce_budget(items, token_budget=64, protected=2)
    assert len(kept) == 2
    user, reply = kept
    assert user.role == "user" and reply.role == "assistant"
    assert reply.text == "R" * 40 and not reply.compressed  # it fitted its share
    assert "…" in user.text and user.compressed
    assert short_term_tokens(kept) <= 64


def test_budget_below_minimum_is_a_configuration_error() -> None:
    with pytest.raises(ValueError):
        enforce_budget([], token_budget=MIN_TOKEN_BUDGET - 1)


@given(
    st.lists(st.text(max_size=300), max_size=12),
    st.integers(min_value=MIN_TOKEN_BUDGET, max_value=400),
    st.integers(min_value=0, max_value=2),
)
def test_budget_always_holds(texts: list[str], budget: int, protected: int) -> None:
    kept = enforce_budget(_items(*texts), token_budget=budget, protected=protected)
    assert short_term_tokens(kept) <= budget
    # The protected newest items are always there (maybe cut).
    assert len(kept) >= min(protected, len(texts))
    # Whatever is kept is a suffix of the input, in order (maybe with cut texts).
    assert [i.role for i in kept] == [i.role for i in _items(*texts)][len(texts) - len(kept) :]


def test_item_cost_includes_message_overhead() -> None:
    assert short_term_tokens([ShortTermItem("user", "abcd")]) == 1 + ITEM_OVERHEAD_TOKENS


def test_trimming_in_chunks_keeps_the_start_for_several_turns() -> None:
    from backend.hippocampus.budget import chunked_trim

    items = [ShortTermItem("user", "word " * 40) for _ in range(12)]  # ~44 tokens each
    budget = 400
    once = enforce_budget(items, token_budget=budget, trim_to=chunked_trim(budget))
    assert short_term_tokens(once) <= chunked_trim(budget)  # a chunk went, not one item
    plain = enforce_budget(items, token_budget=budget)
    assert len(plain) > len(once) and short_term_tokens(plain) <= budget
    # The next turn fits again: nothing at the start moves.
    grown = [*once, ShortTermItem("user", "word " * 40)]
    again = enforce_budget(grown, token_budget=budget, trim_to=chunked_trim(budget))
    assert again[0] is once[0]


@pytest.mark.parametrize("trim_at", [True, False])
def test_a_merge_leaves_room_for_the_next_message(trim_at: bool) -> None:
    # bench.reply_quality's long session, seed 4: a window merged just under the budget was
    # trimmed by the next user message when the reply was built (``reply_view``), so the
    # prompt started as no read-ahead had seen (449 tokens read before the first token).
    from types import SimpleNamespace

    from backend.engine.session_state import reply_view
    from backend.hippocampus import SessionMemoryState
    from backend.hippocampus.budget import chunked_trim, merge_trim_at

    budget = 400
    messages = ["word " * n for n in (5, 25, 12)]  # 11 to 36 tokens, under the headroom
    replies = ["word " * n for n in (28, 5, 40, 12, 33, 8, 21)]  # 6 to 54 tokens
    window: tuple[ShortTermItem, ...] = ()
    moved = 0  # replies whose window started otherwise than the merged one
    for turn in range(60):
        state = SessionMemoryState(background="", short_term=window)
        view = reply_view(
            state, [SimpleNamespace(role="user", content=messages[turn % 3])], token_budget=budget
        )  # type: ignore[list-item]
        moved += bool(window) and view.short_term[0] is not window[0]
        window = enforce_budget(
            [
                *window,
                ShortTermItem("user", messages[turn % 3]),
                ShortTermItem("assistant", replies[turn % 7]),
            ],
            token_budget=budget,
            trim_to=chunked_trim(budget),
            trim_at=merge_trim_at(budget) if trim_at else None,
        )
    assert (moved == 0) is trim_at
