"""A user fact in the third person (``backend.memory.wording``)."""

from __future__ import annotations

import pytest

from backend.memory.screening import Evidence, screen_one
from backend.memory.types import Candidate
from backend.memory.wording import third_person, without_chat_fillers


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        # The default install wrote the first one as is (docs/memory-formation.md).
        ("The user is Noor, I teach chemistry in Leeds.",
         "The user is Noor, the user teaches chemistry in Leeds."),
        ("I just started a job as a nurse in Sapporo.",
         "The user just started a job as a nurse in Sapporo."),
        ("My sister Mei lives in Osaka.", "The user's sister Mei lives in Osaka."),
        ("I'm allergic to peanuts.", "The user is allergic to peanuts."),
        ("I study French and I have two kids.",
         "The user studies French and the user has two kids."),
        ("I don't eat meat.", "The user doesn't eat meat."),
        ("I went to Paris and I moved to Lyon.",
         "The user went to Paris and the user moved to Lyon."),
        ("Mochi knocked my coffee over.", "Mochi knocked the user's coffee over."),
    ],
)  # fmt: skip
def test_first_person_words_become_the_users(said: str, stored: str) -> None:
    assert third_person(said) == stored


@pytest.mark.parametrize(
    "text",
    [
        "The user has a cat.",
        "Iris likes tea.",
        "Myra lives in Oslo.",
        "The user said: my dog Biscuit is a beagle.",
    ],
)
def test_third_person_text_is_left_alone(text: str) -> None:
    assert third_person(text) == text


def test_the_gate_stores_a_user_fact_in_the_third_person() -> None:
    evidence = Evidence(user=("hi! I'm Noor, I teach chemistry in Leeds",), persona=())
    candidate = Candidate(
        "The user is Noor, I teach chemistry in Leeds.", importance=0.7, confidence=0.9
    )
    screened = screen_one(candidate, evidence)
    assert screened.rejected is None
    assert screened.candidate.content == "The user is Noor, the user teaches chemistry in Leeds."


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        # The default 0.5B on the long session's Chinese stretch copied the clause whole.
        ("用户上次打电话她一直问我找没找男朋友。", "用户上次打电话她一直问用户找没找男朋友。"),
        ("用户的妹妹比我的表姐高。", "用户的妹妹比用户的表姐高。"),
        ("用户说我们下次一起去。", "用户说我们下次一起去。"),  # 我们, "we": the user and others
        ("用户想写一份自我介绍。", "用户想写一份自我介绍。"),  # 自我, "self": no "I"
        ("用户说：「我不吃香菜」", "用户说：「我不吃香菜」"),  # a quotation stays as said
    ],
)
def test_a_chinese_fact_says_the_user_not_i(said: str, stored: str) -> None:
    assert third_person(said) == stored


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        # what the default 0.5B stored on the formation scripts and a first chat
        ("The user is Xiaoman btw.", "The user is Xiaoman."),
        ("The user's name is Zhao Lei by the way.", "The user's name is Zhao Lei."),
        ("The user got the job lol!!!", "The user got the job!!!"),
        ("The user is happy, haha, lol", "The user is happy"),
        ("用户的奶奶每天早上都去公园跳广场舞哈哈。", "用户的奶奶每天早上都去公园跳广场舞。"),
        # not at the end, a name, or nothing but a filler: left as they are
        ("The user honestly likes tea.", "The user honestly likes tea."),
        ("The user named her cat Haha.", "The user named her cat Haha."),
        ("lol", "lol"),
    ],
)
def test_chat_fillers_at_the_end_are_taken_off(written: str, stored: str) -> None:
    assert without_chat_fillers(written) == stored


def test_the_gate_stores_a_fact_without_its_filler_and_the_fillers_keyword() -> None:
    evidence = Evidence(user=("deadline brain. I'm Xiaoman btw, most people call me Man",))
    candidate = Candidate(
        "The user is Xiaoman btw.",
        importance=0.8,
        confidence=0.9,
        keywords=("user", "xiaoman", "btw"),
    )
    screened = screen_one(candidate, evidence)
    assert screened.rejected is None
    assert screened.candidate.content == "The user is Xiaoman."
    assert screened.candidate.keywords == ("user", "xiaoman")
