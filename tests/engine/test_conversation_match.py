"""Aligning a client's resent conversation with a stored transcript."""

from __future__ import annotations

from datetime import UTC, datetime

from backend.engine.conversation_match import ClientMessage, place, plausible
from backend.sessions.store import Message

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def transcript(*pairs: tuple[str, str]) -> list[Message]:
    return [
        Message(i + 1, "s", i + 1, role, text, NOW, "complete")  # type: ignore[arg-type]
        for i, (role, text) in enumerate(pairs)
    ]


def client(*pairs: tuple[str, str]) -> list[ClientMessage]:
    return [ClientMessage(role, text) for role, text in pairs]  # type: ignore[arg-type]


STORED = transcript(
    ("user", "My cat is called Mochi."),
    ("assistant", "Mochi is a lovely name!"),
    ("user", "She knocked my coffee over."),
    ("assistant", "Oh no, poor coffee."),
)


def test_the_whole_history_and_a_new_message_is_a_turn() -> None:
    sent = client(
        ("user", "My cat is called Mochi."),
        ("assistant", "Mochi is a lovely name!"),
        ("user", "She knocked my coffee over."),
        ("assistant", "Oh no, poor coffee."),
        ("user", "Any tips?"),
    )
    placement = place(STORED, sent, "turn", identified=False)
    assert placement is not None and placement.kind == "turn"
    assert placement.overlap == 4 and placement.missing == ()


def test_the_same_last_user_message_again_regenerates_its_reply() -> None:
    sent = client(
        ("user", "My cat is called Mochi."),
        ("assistant", "Mochi is a lovely name!"),
        ("user", "She knocked my coffee over."),
    )
    placement = place(STORED, sent, "turn", identified=False)
    assert placement is not None and placement.kind == "regenerate"
    assert placement.target is not None and placement.target.seq == 4


def test_an_edit_earlier_in_the_history_matches_nothing() -> None:
    sent = client(
        ("user", "My dog is called Mochi."),
        ("assistant", "Mochi is a lovely name!"),
        ("user", "Any tips?"),
    )
    assert place(STORED, sent, "turn", identified=False) is None
    edited_last = client(
        ("user", "My cat is called Mochi."),
        ("assistant", "Mochi is a lovely name!"),
        ("user", "She knocked my TEA over."),
    )
    assert place(STORED, edited_last, "turn", identified=False) is None


def test_a_client_that_trims_old_messages_still_lands_in_the_session() -> None:
    longer = transcript(
        *[(m.role, m.content) for m in STORED],
        ("user", "Any tips?"),
        ("assistant", "Move the mug."),
    )
    sent = client(
        ("user", "She knocked my coffee over."),
        ("assistant", "Oh no, poor coffee."),
        ("user", "Any tips?"),
        ("assistant", "Move the mug."),
        ("user", "Thanks!"),
    )
    placement = place(longer, sent, "turn", identified=False)
    assert placement is not None and placement.kind == "turn" and placement.overlap == 4
    # Too short a trimmed overlap is no evidence without a session id.
    short = client(("assistant", "Move the mug."), ("user", "Thanks!"))
    assert place(longer, short, "turn", identified=False) is None
    assert place(longer, short, "turn", identified=True) is not None


def test_an_assistant_message_last_is_continued_and_may_be_trimmed_by_the_client() -> None:
    sent = client(
        ("user", "My cat is called Mochi."),
        ("assistant", "Mochi is a lovely name!"),
        ("user", "She knocked my coffee over."),
        ("assistant", "Oh no, poor"),
    )
    placement = place(STORED, sent, "continue", identified=False)
    assert placement is not None and placement.kind == "continue"
    assert placement.target is not None and placement.target.seq == 4


def test_a_group_nudge_after_the_last_reply_asks_for_another_reply() -> None:
    sent = client(*[(m.role, m.content) for m in STORED])
    placement = place(STORED, sent, "reply", identified=False)
    assert placement is not None and placement.kind == "reply" and placement.missing == ()


def test_messages_the_server_lacks_are_returned_in_order() -> None:
    sent = client(
        ("user", "My cat is called Mochi."),
        ("assistant", "Mochi is a lovely name!"),
        ("user", "She knocked my coffee over."),
        ("assistant", "Oh no, poor coffee."),
        ("assistant", "Juniper: And the mug?"),
        ("user", "Broken."),
    )
    placement = place(STORED, sent, "turn", identified=False)
    assert placement is not None and placement.kind == "turn"
    assert placement.missing == (ClientMessage("assistant", "Juniper: And the mug?"),)


def test_a_named_session_with_one_message_is_always_a_new_turn() -> None:
    sent = client(("user", "She knocked my coffee over."))
    placement = place(STORED, sent, "turn", identified=True)
    assert placement is not None and placement.kind == "turn" and placement.missing == ()


def test_a_one_message_request_regenerates_a_one_turn_session_only() -> None:
    one_turn = transcript(("user", "hi"), ("assistant", "Hello!"))
    placement = place(one_turn, client(("user", "hi")), "turn", identified=False)
    assert placement is not None and placement.kind == "regenerate"
    two_turns = transcript(("user", "x"), ("assistant", "y"), ("user", "hi"), ("assistant", "Hey"))
    assert place(two_turns, client(("user", "hi")), "turn", identified=False) is None


def test_a_transcript_tail_is_not_taken_for_its_start() -> None:
    # The last two messages of a longer transcript, and a client that sent only those:
    # as a whole transcript that is a full exchange; as a tail, too little to go on.
    tail = STORED[-2:]
    sent = client(("user", "She knocked my coffee over."), ("assistant", "Oh no, poor coffee."),
                  ("user", "Any tips?"))  # fmt: skip
    assert place(tail, sent, "turn", identified=False) is not None
    assert place(tail, sent, "turn", identified=False, complete=False) is None


def test_only_plausible_transcripts_are_read_further() -> None:
    sent = client(("user", "She knocked my coffee over."), ("assistant", "Oh no, poor coffee."),
                  ("user", "Any tips?"))  # fmt: skip
    assert plausible(STORED[-2:], sent)  # ends with one of the client's messages
    redo = client(("user", "My cat is called Mochi."), ("assistant", "Mochi is a lovely name!"),
                  ("user", "She knocked my coffee over."))  # fmt: skip
    assert plausible(STORED[-2:], redo)  # ends with the reply to the client's last
    assert not plausible(STORED[-2:], client(("user", "Something else entirely.")))
