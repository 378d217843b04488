"""The gate rejects a fact the user told of someone else, filed as the user's own."""

from __future__ import annotations

import pytest

from backend.memory.whose_fact import someone_else

from .screened import rejection

PRIYA = [
    "hey, I'm Priya. long day.",
    "I'm a nurse on the night shift at St Mary's in Leeds, just got home",
    "my flatmate Tom made curry but I can't eat it, I'm allergic to peanuts",
    "my sister Anjali is expecting her first baby in March!",
    "and then there's Pixel, our pug. she's a grumpy old lady, she hates the vacuum cleaner",
    "hamsters are nocturnal so yes lol. he's a little golden guy, two years old",
    "it's been a long week honestly",
]


@pytest.mark.parametrize(
    ("candidate", "whose"),
    [
        # The and the bench's: someone else's fact with the user as its subject.
        ("The user is expecting her first baby in March.", "my sister"),
        ("The user is a grumpy old lady.", "she's"),
        ("The user hates the vacuum cleaner.", "she"),
        ("The user is a little golden guy, two years old.", "he's"),
        ("The user made curry.", "my flatmate"),
    ],
)
def test_someone_elses_fact_as_the_users(candidate: str, whose: str) -> None:
    assert someone_else(candidate, PRIYA) == whose


@pytest.mark.parametrize(
    "candidate",
    [
        "The user is allergic to peanuts.",  # a clause of their own in the same message
        "The user is a nurse on the night shift at St Mary's in Leeds.",
        "The user had a long week.",  # "it's been…": no one else
        "The user's sister Anjali is expecting her first baby in March.",  # not the subject
        "The user has a sister who is expecting a baby in March.",  # names the sister
        "The user's dog Pixel hates the vacuum cleaner.",
        "Pixel hates the vacuum cleaner.",
        "The user can't eat curry.",
        "The user plays the violin.",  # said nowhere: grounding's business, not this one's
        "用户对花生过敏。",
    ],
)
def test_the_users_own_facts_pass(candidate: str) -> None:
    assert someone_else(candidate, PRIYA) is None


def test_a_span_that_also_says_i_is_not_someone_elses() -> None:
    said = ["my sister and I are going to Paris in May"]
    assert someone_else("The user is going to Paris in May.", said) is None


def test_the_gate_rejects_it_with_the_reason_when_no_one_can_take_it() -> None:
    # Two people the user did not place: whose "she" is cannot be told.
    said = ["I met Jo and Sam at the park. she's a grumpy old lady"]
    reason = rejection("The user is a grumpy old lady.", said)
    assert reason is not None and "someone else" in reason
    assert rejection("I'm allergic to peanuts.", PRIYA, "health") is None
    # With the pug named, the fact is filed under her instead (tests/memory/test_subjects.py).
    assert rejection("The user is a grumpy old lady.", PRIYA) is None


def test_a_name_the_user_gave_someone_else_is_not_the_users() -> None:
    # The long session's hippocampus wrote "The user is Pickle." (Pickle: the user's cat).
    said = [
        "I'm Mei by the way",
        "my cat Pickle is glaring at me because her dinner is late",
        "Pickle has fallen asleep on my keyboard",
    ]
    assert someone_else("The user is Pickle.", said) == "my cat"
    assert someone_else("The user is Mei.", said) is None  # their own name
    assert someone_else("The user is Tom.", said) is None  # no one the user named so
    assert someone_else("The user is Pickle.", PRIYA) is None
    # Through the gate: rejected, not refiled as "Pickle is Pickle."
    reason = rejection("The user is Pickle.", said)
    assert reason is not None and "my cat" in reason
    assert rejection("The user is Mei.", said) is None


@pytest.mark.parametrize(
    ("candidate", "said", "whose"),
    [
        # The default 0.5B on bench/data/conversations_zh/chinese_diary.json: the second
        # clause leaves its subject out, and the model filed it under the user.
        ("用户的身体还很好。", "我奶奶今年九十岁了，身体还很好。", "我奶奶"),
        ("用户下个月毕业。", "我室友小雨是学医的，下个月毕业。", "我室友"),
        ("用户是消防员。", "我男朋友叫阿杰，他是消防员。", "他"),
        ("用户今年三岁了。", "我的猫叫年糕，它今年三岁了。", "它"),
        # The long session: the grandmother dances; 我 as an object leaves it hers.
        ("用户每天去公园跳广场舞，比我还忙哈哈。", "她每天去公园跳广场舞，比我还忙哈哈", "她"),
    ],
)
def test_someone_elses_chinese_fact_as_the_users(candidate: str, said: str, whose: str) -> None:
    assert someone_else(candidate, [said]) == whose
    reason = rejection(candidate, [said])
    assert reason is not None and "someone else" in reason


@pytest.mark.parametrize(
    ("candidate", "said"),
    [
        ("用户不能跑步了。", "我膝盖受过伤，不能跑步了。"),  # 我膝盖: a knee, not a relation
        ("用户吃了会起疹子。", "我对芒果过敏，吃了会起疹子。"),
        ("用户在一家银行做会计。", "我在一家银行做会计，已经五年了。"),
        ("用户的猫今年三岁了。", "我的猫叫年糕，它今年三岁了。"),  # names whose it is
        ("用户和妹妹一起去杭州。", "我妹妹和我一起去杭州。"),  # 和我: the user's too
        ("用户上次打电话她一直问我找没找男朋友。", "上次打电话她一直问我找没找男朋友"),
    ],
)
def test_the_users_own_chinese_facts_pass(candidate: str, said: str) -> None:
    assert someone_else(candidate, [said]) is None
    assert rejection(candidate, [said]) is None
