"""Two-part vectors (backend.memory.vector_parts): a pair without CJK is read by the first
part alone, a pair with a CJK side by the second; each part normalised on its own; a
query vector can search by one part; bad vectors read as missing."""

from __future__ import annotations

import numpy as np
import pytest

from backend.memory.vector_parts import VectorParts
from tests.memory.helpers import memory, unit

PARTS = VectorParts(split=3)


def joined(first: np.ndarray, second: np.ndarray, weight: float = 0.7) -> np.ndarray:
    """A stored two-part vector: each unit part scaled, set end to end (``fused``)."""
    return np.concatenate([np.sqrt(weight) * first, np.sqrt(1 - weight) * second]).astype(
        np.float32
    )


# First parts (an English model's) and second parts (a multilingual one's).
E_PEANUT, E_CAT = unit(1, 0, 0), unit(0, 1, 0)
M_PEANUT, M_CAT = unit(1, 0, 0, 0), unit(0, 0, 1, 0)


def test_a_pair_without_cjk_is_read_by_the_first_part_alone() -> None:
    # The second parts disagree (orthogonal): only the first part's cosine counts.
    query = joined(unit(1, 1, 0), M_CAT)
    note = memory("en", "The user is allergic to peanuts.", vector=joined(E_PEANUT, M_PEANUT))
    (cos,) = PARTS.query_cosines(query, "peanuts again?", [note])
    assert cos == pytest.approx(float(unit(1, 1, 0) @ E_PEANUT))


def test_a_pair_with_a_cjk_side_is_read_by_the_second_part() -> None:
    query = joined(E_CAT, unit(1, 1, 0, 0))  # the first part agrees with the English note
    zh = memory("zh", "用户对花生过敏。", vector=joined(E_CAT, M_PEANUT))
    en = memory("en", "The user has a cat.", vector=joined(E_CAT, M_CAT))
    english_query = PARTS.query_cosines(query, "peanuts?", [zh, en])
    assert english_query[0] == pytest.approx(float(unit(1, 1, 0, 0) @ M_PEANUT))
    assert english_query[1] == pytest.approx(1.0)  # first part: both E_CAT
    chinese_query = PARTS.query_cosines(query, "花生？", [zh, en])
    assert chinese_query == pytest.approx([float(unit(1, 1, 0, 0) @ m) for m in (M_PEANUT, M_CAT)])


def test_missing_or_foreign_vectors_read_as_missing() -> None:
    good = memory("good", "a", vector=joined(E_CAT, M_CAT))
    none = memory("none", "b")
    short = memory("short", "c", vector=unit(1, 0, 0))  # a one-part (MiniLM) vector
    flat = memory("flat", "d", vector=np.concatenate([E_CAT, np.zeros(4)]).astype(np.float32))
    cos = PARTS.query_cosines(joined(E_CAT, M_CAT), "cat", [good, none, short, flat])
    assert cos[0] == pytest.approx(1.0) and cos[1:] == [None, None, None]
    assert PARTS.query_cosines(None, "cat", [good]) == [None]
    assert PARTS.query_cosines(unit(1, 0, 0), "cat", [good]) == [None]


def test_pair_cosines_read_each_pair_by_its_scripts() -> None:
    notes = [
        memory("en1", "The user has a cat.", vector=joined(E_CAT, M_CAT)),
        memory("en2", "The user is allergic to peanuts.", vector=joined(E_CAT, M_PEANUT)),
        memory("zh", "用户养了一只猫。", vector=joined(E_PEANUT, M_CAT)),
        memory("none", "no vector"),
    ]
    cos, ok = PARTS.pair_cosines(notes)
    assert ok.tolist() == [True, True, True, False]
    assert cos[0, 1] == pytest.approx(1.0)  # English pair: the first parts (both E_CAT)
    assert cos[0, 2] == pytest.approx(1.0) and cos[1, 2] == pytest.approx(0.0)  # by USE's
    assert np.all(cos[3] == 0.0) and np.all(cos[:, 3] == 0.0)
    np.testing.assert_allclose(cos, cos.T)


def test_a_query_searches_by_one_part() -> None:
    vector = joined(unit(1, 2, 3), unit(4, 3, 2, 1))
    second = PARTS.second_part_query(vector)
    first = PARTS.first_part_query(vector)
    assert second is not None and first is not None
    np.testing.assert_allclose(second[:3], 0.0)
    np.testing.assert_allclose(second[3:], unit(4, 3, 2, 1), atol=1e-6)
    np.testing.assert_allclose(first[3:], 0.0)
    np.testing.assert_allclose(first[:3], unit(1, 2, 3), atol=1e-6)
    # Against stored two-part vectors, the cosine ranks as that part's cosine alone.
    stored = [joined(unit(1, 0, 0), m) for m in (unit(4, 3, 2, 1), unit(0, 0, 0, 1))]
    assert float(second @ stored[0]) > float(second @ stored[1])
    assert PARTS.second_part_query(np.concatenate([unit(1, 0, 0), np.zeros(4)])) is None
    assert PARTS.first_part_query(unit(1, 0, 0)) is None and PARTS.second_part_query(None) is None
