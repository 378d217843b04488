"""The attempt after an echo is biased against the message's own words
(backend.engine.echo_bias)."""

from __future__ import annotations

from backend.engine.echo_bias import content_pieces, echo_bias


def chars(text: str) -> list[int]:
    """A tokenizer for the tests: one id a character."""
    return [ord(c) for c in text]


def test_a_chinese_message_is_not_biased() -> None:
    # Biased, the 1.5B left the topic or told the message as its own in other words.
    assert content_pieces("我奶奶今年八十三岁了，身体还挺好的") == []
    assert echo_bias("我在上海做UI设计，用Figma", chars) == {}


def test_an_english_message_is_biased_on_its_content_words_first_tokens() -> None:
    message = "I'll tell you how Thursday goes"
    assert content_pieces(message) == [
        " tell", "tell", " Tell", " thursday", "thursday", " Thursday", " goes", "goes", " Goes",
    ]  # fmt: skip
    # Each spelling's first token only: " Thursday" may be " Thurs" + "day".
    vocabulary: dict[str, int] = {}

    def first_and_rest(text: str) -> list[int]:
        return [vocabulary.setdefault(text, len(vocabulary)), 999]

    bias = echo_bias(message, first_and_rest)
    assert len(bias) == 9 and "999" not in bias


def test_no_bias_without_the_tokenizer() -> None:
    assert echo_bias("I'll let you know how Thursday goes", lambda _text: None) == {}
    assert echo_bias("ok!", chars) == {}  # nothing of content
