"""Activation with two-part vectors (``minilm-use``'s layout, toy models): a Chinese message
reaches an English note and an English message a Chinese one through the multilingual
part, while an English message over English notes recalls exactly what the English part
alone recalls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from backend.clock import FixedClock
from backend.config import MemorySettings
from backend.embeddings.fused import FusedEmbedder
from backend.embeddings.port import Embedder, vector_split
from backend.longterm.memory import LongTermMemory
from backend.memory.types import Candidate, Namespace
from backend.stores.in_memory import InMemoryVectorStore

from .fakes import BagOfWordsEmbedder

NS = Namespace("alice", "companion")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

# The toy multilingual model's concepts: words of either language on one axis.
CONCEPTS = {
    "dumpling": 0, "饺子": 0, "cat": 1, "猫": 1, "kidney": 2, "肾": 2, "food": 3, "吃": 3,
    "climb": 4, "bouldering": 4, "攀岩": 4, "weekend": 5, "周末": 5, "tea": 6, "茶": 6,
    "mother": 7, "妈妈": 7,
}  # fmt: skip


class Concepts:
    """A toy multilingual embedder: the concepts a text names, in any language."""

    model = "test-concepts-16"
    dim = 16

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.full((len(texts), self.dim), 0.01, dtype=np.float32)
        for i, text in enumerate(texts):
            lowered = text.lower()
            for word, axis in CONCEPTS.items():
                if word in lowered:
                    rows[i, axis] += 1.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def split_embedder() -> FusedEmbedder:
    return FusedEmbedder([(BagOfWordsEmbedder(), 0.7), (Concepts(), 0.3)], split=True)


def long_term(embedder: Embedder) -> LongTermMemory:
    counter = iter(range(1, 10_000))
    policy = MemorySettings().activation_policy()
    policy = replace(policy, lexical_pool=0, pool=2)  # a small ANN pool, no lexical index
    return LongTermMemory(
        InMemoryVectorStore(), embedder, FixedClock(T0), activation=policy,
        id_factory=lambda: f"m{next(counter):04d}",
    )  # fmt: skip


def remember(ltm: LongTermMemory, *contents: str) -> None:
    for content in contents:
        ltm.write(NS, [Candidate(content=content, importance=0.4, confidence=0.9,
                                 category="personal_fact")])  # fmt: skip


ENGLISH = (
    "The user's cat Dumpling eats kidney-care food only.",
    "The user goes bouldering at a climbing gym on weekends.",
    "The user's mother runs a tea shop in Kunming.",
    "The user plays the cello in an amateur orchestra.",
    "The user is learning Japanese for the N2 exam.",
)


def recalled(ltm: LongTermMemory, text: str) -> list[str]:
    return [m.content for m in ltm.activate(NS, text).memories]


def test_the_split_embedder_says_where_its_second_part_starts() -> None:
    embedder = split_embedder()
    assert vector_split(embedder) == 64 and embedder.dim == 80
    assert vector_split(BagOfWordsEmbedder()) is None
    assert vector_split(FusedEmbedder([(BagOfWordsEmbedder(), 0.7), (Concepts(), 0.3)])) is None


def test_a_chinese_message_reaches_an_english_note_through_the_multilingual_part() -> None:
    split = long_term(split_embedder())
    # Two Chinese notes share the message's words: the English part's nearest are those.
    remember(split, *ENGLISH, "用户最近很忙。", "用户不太爱说话。")
    assert "The user's cat Dumpling eats kidney-care food only." in recalled(
        split, "饺子最近不太爱吃东西"
    )
    plain = long_term(BagOfWordsEmbedder())  # an English model: no way across
    remember(plain, *ENGLISH, "用户最近很忙。", "用户不太爱说话。")
    assert not set(ENGLISH) & set(recalled(plain, "饺子最近不太爱吃东西"))


def test_an_english_message_reaches_a_chinese_note() -> None:
    split = long_term(split_embedder())
    # Two English notes share the message's words: the English part's nearest are those.
    remember(
        split, *ENGLISH[2:], "The user makes plans with friends.",
        "The user has plans for the summer.", "用户周末常去攀岩。",
    )  # fmt: skip
    assert "用户周末常去攀岩。" in recalled(split, "Any plans for bouldering this weekend?")


def test_an_english_message_over_english_notes_recalls_what_the_english_part_does() -> None:
    split, plain = long_term(split_embedder()), long_term(BagOfWordsEmbedder())
    for ltm in (split, plain):
        remember(ltm, *ENGLISH)
    for text in ("my cat's kidney food", "any weekend plans? climbing maybe", "mum's tea shop"):
        assert recalled(split, text) == recalled(plain, text)


def test_the_activation_says_it_trusted_every_pair_s_cosine() -> None:
    # The turn's own evidence tests (which notes a message is about) read these weights.
    split, plain = long_term(split_embedder()), long_term(BagOfWordsEmbedder())
    for ltm in (split, plain):
        remember(ltm, *ENGLISH)
    split_weights = split.activate(NS, "饺子最近不太爱吃东西").weights
    plain_weights = plain.activate(NS, "饺子最近不太爱吃东西").weights
    assert split_weights is not None and split_weights.cjk_cosine == 1.0
    assert plain_weights is not None and plain_weights.cjk_cosine == 0.0
