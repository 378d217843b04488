"""Good news, and sympathy said to it (backend.engine.good_news), on hand-labelled
messages and replies."""

from __future__ import annotations

import pytest

from backend.engine.good_news import is_good_news, sympathises


@pytest.mark.parametrize(
    "message",
    [
        "my brother Sami just got engaged!",
        "I got the job!!",
        "guess what, I passed my driving test",
        "my sister had the baby last night, a baby girl",
        "we're expecting our first in June",
        "it's my birthday today",
        "I can't wait, my best friend's wedding is on Saturday",
        "I won the pub quiz with my team",
        "我妹妹昨天订婚了！",
        "我考上研究生了，太开心了",
    ],
)
def test_good_news(message: str) -> None:
    assert is_good_news(message)


@pytest.mark.parametrize(
    "message",
    [
        "my grandmother passed away on my birthday",
        "my brother got engaged but I'm dreading the speech",
        "I didn't get the job",
        "I wasn't accepted to the course",
        "my dog is sick and I'm worried",
        "I had a rough day, my boss yelled at me",
        "it's raining again",
        "I won't make it to the wedding, I'm ill",
        "我奶奶去世了",
        "我没考上研究生",
    ],
)
def test_not_good_news(message: str) -> None:
    assert not is_good_news(message)


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I'm sorry to hear that your brother Sami has just gotten engaged.", True),
        ("I'm so sorry for your loss.", True),
        ("That must be tough.", True),
        ("听到这个消息我很难过。", True),
        ("That's wonderful news, congratulations to Sami!", False),
        ("Sorry, I can't wait to hear more!", False),
        ("太好了，恭喜你！", False),
    ],
)
def test_sympathy(sentence: str, expected: bool) -> None:
    assert sympathises(sentence) is expected


def test_excitement_with_fear_in_it_is_no_plain_good_news() -> None:
    assert is_good_news("I'm so excited for Saturday")
    assert not is_good_news("I'm excited but also kind of terrified about Thursday")
