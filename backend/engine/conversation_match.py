"""Where a client's resent conversation belongs: which stored transcript it continues,
and what the request asks of it (docs/api.md, "One client conversation, one session").

Most clients (Open WebUI, SillyTavern, the ``openai`` SDK in a loop) send the whole
conversation with every request and no session id. The server finds the session whose
transcript the request's messages continue, by aligning them:

- the client's messages may start later than the transcript (a client that trims old
  messages to fit its context window, as SillyTavern does), so the transcript's tail is
  aligned with the client's head;
- user messages must be equal (whitespace aside); assistant messages may differ at their
  ends (a client that trims an unfinished sentence, or shows a partial reply), so one
  only has to start or end with the other.

What the client's last message asks for, given an alignment:

- ``turn``: a new user message (any messages the server lacks before it are stored too);
- ``regenerate``: the last user message again, whose reply the transcript ends with (a
  regeneration or a swipe): that reply is replaced;
- ``continue``: the transcript's last reply, to be continued;
- ``reply``: one more reply after the last message (a group chat's next speaker);
- no alignment: a new session, seeded with the client's history. An edit earlier in the
  history therefore starts a branch: a session of its own, sharing the persona's
  long-term memory with its parent (``docs/api.md``).

Pure: no I/O; the engine feeds it transcripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from backend.sessions.store import Message

Kind = Literal["turn", "regenerate", "continue", "reply"]
Final = Literal["turn", "continue", "reply"]

# Without a session id, an alignment is evidence only when it covers this much: a whole
# exchange from the transcript's start, or a longer run when the client trimmed the start
# (a new chat that happens to open with "hi" must not land in an old one).
MIN_OVERLAP_FROM_START = 2
MIN_OVERLAP_TRIMMED = 4


@dataclass(frozen=True, slots=True)
class ClientMessage:
    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True, slots=True)
class Placement:
    """What a request does to one session's transcript."""

    kind: Kind
    overlap: int  # how many stored messages the client's messages matched
    missing: tuple[ClientMessage, ...] = ()  # the client's messages the server lacks
    target: Message | None = None  # the reply a regeneration replaces / a continue extends


def tail_needed(client: Sequence[ClientMessage]) -> int:
    """How many of a transcript's last messages ``place`` needs for ``client``: a longer
    stored tail than the client's messages plus a reply is a branch anyway (one more, to
    tell a whole transcript from its tail)."""
    return len(client) + 2


def plausible(last: Sequence[Message], client: Sequence[ClientMessage]) -> bool:
    """Whether a transcript ending with ``last`` (its last two messages) can be continued
    by ``client`` at all: its last message is one of the client's, or it is the reply to
    the client's last message (a regeneration). A cheap test before reading more."""
    if not last:
        return True
    if any(same(last[-1], sent) for sent in client):
        return True
    return len(last) > 1 and last[-1].role == "assistant" and same(last[-2], client[-1])


@lru_cache(maxsize=8192)  # a resent history is compared with several transcripts
def normal(text: str) -> str:
    return " ".join(text.split())


def same(stored: Message, sent: ClientMessage) -> bool:
    if stored.role != sent.role:
        return False
    a, b = normal(stored.content), normal(sent.text)
    if stored.role == "user":
        return a == b
    if not a or not b:
        return a == b
    return a.startswith(b) or b.startswith(a) or a.endswith(b) or b.endswith(a)


def conversation(transcript: Sequence[Message]) -> list[Message]:
    """The transcript as a client shows it: user and assistant messages, a failed empty
    reply included (a client retrying after it sends the same user message again)."""
    return [m for m in transcript if m.role in ("user", "assistant")]


def place(
    transcript: Sequence[Message],
    client: Sequence[ClientMessage],
    final: Final,
    *,
    identified: bool,
    whole_history: bool = False,
    complete: bool = True,
) -> Placement | None:
    """How ``client`` (the request's user/assistant messages, its last one included)
    continues ``transcript``; None when it does not. ``final`` says what the last client
    message asks for (the web layer reads it from the request's shape). ``identified``:
    the client named this session, so no overlap is needed as evidence."""
    stored = conversation(transcript)
    if not client:
        return None
    if identified and not whole_history and len(client) == 1 and final == "turn":
        # A client that names its session and sends only the new message (the ``openai``
        # SDK with ``X-Session-Id``): always a new turn, even when it repeats the last one.
        return Placement("turn", 0)
    best: Placement | None = None
    for start in range(len(stored) + 1):
        tail = stored[start:]
        matched = _matched(tail, client)
        if matched is None:
            continue
        placement = _classify(tail, client, matched, final)
        if placement is None:
            continue
        from_start = start == 0 and complete
        if not _enough(placement.overlap, from_start, stored, client, identified):
            continue
        best = placement
        break  # the earliest start is the longest overlap
    return best


def _matched(tail: Sequence[Message], client: Sequence[ClientMessage]) -> int | None:
    """How many of ``tail``'s messages the client's head matches, when it matches all of
    them or the client's messages run out inside ``tail`` (then the rest is checked by
    ``_classify``); None on a mismatch."""
    count = min(len(tail), len(client))
    for i in range(count):
        if not same(tail[i], client[i]):
            return None
    return count


def _classify(
    tail: Sequence[Message], client: Sequence[ClientMessage], matched: int, final: Final
) -> Placement | None:
    last = client[-1]
    if len(tail) < len(client):  # the client has messages the transcript lacks
        missing = tuple(client[len(tail) :])
        if final == "turn":
            if last.role != "user":
                return None
            return Placement("turn", matched, missing[:-1])
        if last.role != "assistant":
            return Placement("reply", matched, missing) if final == "reply" else None
        if final == "continue":  # the client's reply is stored first, then continued
            return Placement("continue", matched, missing)
        return Placement("reply", matched, missing)
    if len(tail) == len(client):  # the transcript ends where the client's messages do
        end = tail[-1]
        if final == "turn":
            # The user message is stored but its reply never was: answer it now.
            return Placement("reply", matched) if last.role == "user" else None
        if final == "continue" and end.role == "assistant":
            return Placement("continue", matched, target=end)
        return Placement("reply", matched)
    if len(tail) == len(client) + 1 and final == "turn" and last.role == "user":
        end = tail[-1]
        if end.role == "assistant":  # the same user message again: its reply is redone
            return Placement("regenerate", matched, target=end)
    return None  # the transcript goes on past the client's messages: a branch


def _enough(
    overlap: int,
    from_start: bool,
    stored: Sequence[Message],
    client: Sequence[ClientMessage],
    identified: bool,
) -> bool:
    if identified:  # the client named the session: any overlap, or nothing stored yet
        return overlap >= 1 or not stored
    if from_start:
        if overlap >= MIN_OVERLAP_FROM_START:
            return True
        # A one-message request that regenerates a one-turn session.
        return overlap == 1 and len(stored) == 2 and len(client) == 1
    return overlap >= MIN_OVERLAP_TRIMMED
