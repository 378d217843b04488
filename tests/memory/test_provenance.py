"""Which user messages a memory was formed from (``backend.memory.provenance``)."""

from __future__ import annotations

from backend.memory.provenance import formed_from


def test_the_message_that_says_it_not_the_one_that_mentions_a_word() -> None:
    said = [(1, "I love peanuts"), (2, "I'm allergic to peanuts")]
    assert formed_from("The user is allergic to peanuts.", said) == (2,)


def test_a_memory_that_joins_two_messages_comes_from_both() -> None:
    said = [(1, "my brother is Tom"), (2, "hello there"), (3, "Tom lives in Lyon")]
    assert formed_from("Tom, the user's brother, lives in Lyon.", said) == (1, 3)


def test_a_paraphrase_matches_by_stem_and_names_as_whole_words() -> None:
    said = [(7, "We got married in Kyoto last spring"), (8, "nice weather")]
    assert formed_from("The user's marriage took place in Kyoto.", said) == (7,)


def test_of_two_messages_saying_the_same_the_newer_one() -> None:
    said = [(1, "I'm allergic to peanuts"), (2, "I am allergic to peanuts, remember")]
    assert formed_from("The user is allergic to peanuts.", said) == (2,)


def test_nothing_when_no_message_holds_it_and_chinese_works() -> None:
    assert formed_from("The user likes jazz.", [(1, "hello"), (2, "what time is it")]) == ()
    assert formed_from("The user likes jazz.", []) == ()
    assert formed_from("用户对花生过敏", [(1, "我对花生过敏"), (2, "你好")]) == (1,)
