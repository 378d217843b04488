"""Memory provenance through the turn, and what deleting or editing a message revises
(``backend.engine.merge.record_provenance``, ``backend.engine.revisions``; issue 30)."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from backend.engine.revisions import (
    NotMergedYet,
    delete_turn,
    edit_request,
    retract_for_edit,
)
from backend.engine.turn import TurnRequest
from backend.memory.types import Namespace
from backend.stores.vector_port import VectorStoreUnavailable

from .conftest import Rig

pytestmark = pytest.mark.anyio
NS = Namespace("u1", "companion")


def hippo(*contents: str) -> str:
    return json.dumps(
        {
            "background": "bg",
            "short_term": [],
            "long_term": [
                {"content": c, "category": "health", "importance": 0.9, "confidence": 0.9,
                 "subject": "user", "keywords": []}
                for c in contents
            ],
            "user_emotion": None,
        }
    )  # fmt: skip


REPLIES = itertools.cycle(  # distinct within a session: the guard refuses a repeat
    [
        "That sounds hard; how do you manage when eating out?",
        "Got it. Is there anything you would like to plan for the weekend?",
        "Thanks for trusting me with that.",
        "Shall we talk about something lighter, like music?",
        "Welcome back! What has been on your mind lately?",
        "Of course, I can help you find a recipe tonight.",
        "Understood, a quiet evening sounds right.",
    ]
)


async def say(rig: Rig, text: str, facts: tuple[str, ...], session: str | None = None):
    rig.hippocampus.enqueue([hippo(*facts)])
    rig.chat.enqueue([next(REPLIES)])  # each reply its own (the guard refuses a repeat)
    turn, report = await rig.engine.run(TurnRequest(user_id="u1", text=text, session_id=session))
    return turn, report


def contents(rig: Rig) -> list[str]:
    return sorted(m.content for m in rig.long_term.store.iter_all(NS))


async def test_a_memory_records_the_message_it_was_formed_from(rig: Rig) -> None:
    turn, report = await say(rig, "I'm allergic to peanuts", ("The user is allergic to peanuts",))
    (written,) = report["written"]
    said = rig.sessions.transcript(turn.session.id)[0]
    (source,) = rig.sessions.memory_sources("u1", "companion", [written["id"]])[written["id"]]
    assert (source.message_id, source.session_id, source.content) == (
        said.id, turn.session.id, "I'm allergic to peanuts",
    )  # fmt: skip


async def test_deleting_a_turn_removes_what_only_it_formed(rig: Rig) -> None:
    turn, _ = await say(rig, "I'm allergic to peanuts", ("The user is allergic to peanuts",))
    sid = turn.session.id
    ex_fact = ("The user's ex lives at 12 Elm Street",)
    _, report2 = await say(rig, "My ex lives at 12 Elm Street", ex_fact, sid)
    # The same fact said again reinforces the memory: it then has two sources.
    peanuts = ("The user is allergic to peanuts",)
    _, again = await say(rig, "peanuts make me ill, I'm allergic", peanuts, sid)
    assert again["reinforced"] and not again["written"]
    transcript = rig.sessions.transcript(sid)
    ex = next(m for m in transcript if m.content.startswith("My ex"))
    revision = await delete_turn(rig.engine, turn.session, ex)
    assert [m.role for m in revision.messages] == ["user", "assistant"]
    assert revision.messages[0].content == ex.content
    assert [(r.content, r.reason) for r in revision.removed] == [
        ("The user's ex lives at 12 Elm Street", "formed only from the deleted message")
    ]
    assert contents(rig) == ["The user is allergic to peanuts"]
    # Gone from the lexical index, the export, the transcript, short-term and the reports.
    found = rig.long_term.lexical_candidates(NS, "Elm Street ex")
    assert found and all("Elm" not in m.content for m in found)
    assert "Elm" not in "".join(rig.long_term.export_jsonl(NS))
    assert all("Elm" not in m.content for m in rig.sessions.transcript(sid))
    state = rig.sessions.load_state(sid)
    assert all("Elm" not in item["text"] for item in state.short_term)
    assert rig.sessions.turn_report(sid, report2["turn_id"]) is None
    saved = rig.sessions.turn_report(sid, revision.report_id)
    assert saved is not None and saved["removed"][0]["content"].endswith("Elm Street")
    # The first peanut message goes: the memory stays, also formed from the third one.
    first = rig.sessions.transcript(sid)[0]
    kept = await delete_turn(rig.engine, turn.session, first)
    assert kept.removed == () and [k.reason for k in kept.kept] == [
        "also formed from another message"
    ]
    assert contents(rig) == ["The user is allergic to peanuts"]
    # And then the third: now nothing else formed it.
    third = rig.sessions.transcript(sid)[0]
    last = await delete_turn(rig.engine, turn.session, third)
    assert [r.content for r in last.removed] == ["The user is allergic to peanuts"]
    assert contents(rig) == []
    # The session goes on: a new message never takes a merged seq.
    turn4, _ = await say(rig, "hello again", (), sid)
    assert turn4.reply
    assert rig.sessions.transcript(sid)[-1].seq > rig.sessions.transcript(sid)[-2].seq


async def test_memories_without_provenance_are_left_alone(rig: Rig) -> None:
    rig.long_term.create(NS, rig.long_term.new_memory("The user is allergic to peanuts"))
    turn, report = await say(rig, "I'm allergic to peanuts", ("The user is allergic to peanuts",))
    assert report["reinforced"]  # the old memory, reinforced: its first source is unknown
    said = rig.sessions.transcript(turn.session.id)[0]
    revision = await delete_turn(rig.engine, turn.session, said)
    assert revision.removed == () and len(revision.kept) == 1
    assert contents(rig) == ["The user is allergic to peanuts"]


async def test_an_edit_removes_what_the_old_text_formed_and_the_branch_forms_the_new(
    rig: Rig,
) -> None:
    turn, _ = await say(rig, "I'm allergic to peanuts", ("The user is allergic to peanuts",))
    session = turn.session
    said = rig.sessions.transcript(session.id)[0]
    revision = await retract_for_edit(rig.engine, session, said)
    assert [r.reason for r in revision.removed] == ["formed only from the message before your edit"]
    assert contents(rig) == []
    # The parent keeps what was said; the branch starts from the message before it.
    assert rig.sessions.transcript(session.id)[0].content == said.content
    request = edit_request(
        session, rig.sessions.transcript(session.id), said, "I'm allergic to shellfish"
    )
    assert request.session_id.startswith(session.id + "~") and request.history == []
    rig.hippocampus.enqueue([hippo("The user is allergic to shellfish")])
    rig.chat.enqueue(["noted"])
    branch, report = await rig.engine.run(request)
    assert branch.session.id == request.session_id
    assert [w["content"] for w in report["written"]] == ["The user is allergic to shellfish"]
    assert contents(rig) == ["The user is allergic to shellfish"]


async def test_a_turn_not_merged_yet_is_waited_for_then_refused(rig: Rig) -> None:
    gate = asyncio.Event()
    rig.hippocampus.enqueue([hippo("The user is allergic to peanuts")], wait_for=gate)
    rig.chat.enqueue(["ok"])
    async with rig.engine.turn(TurnRequest(user_id="u1", text="I'm allergic to peanuts")) as turn:
        async for _ in turn.stream():
            pass
    said = rig.sessions.transcript(turn.session.id)[0]
    with pytest.raises(NotMergedYet):
        await delete_turn(rig.engine, turn.session, said, merge_wait_s=0.3)
    gate.set()
    deleting = asyncio.ensure_future(delete_turn(rig.engine, turn.session, said, merge_wait_s=10))
    revision = await deleting  # waits for the merge: the memory is formed, then removed
    assert [r.content for r in revision.removed] == ["The user is allergic to peanuts"]
    assert contents(rig) == []


async def test_a_store_outage_changes_nothing(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    turn, _ = await say(rig, "I'm allergic to peanuts", ("The user is allergic to peanuts",))
    said = rig.sessions.transcript(turn.session.id)[0]

    def down(*_: object, **__: object) -> int:
        raise VectorStoreUnavailable("the store is down")

    monkeypatch.setattr(rig.long_term, "delete_memories", down)
    with pytest.raises(VectorStoreUnavailable):
        await delete_turn(rig.engine, turn.session, said)
    assert len(rig.sessions.transcript(turn.session.id)) == 2
    assert rig.sessions.supported_by([said.id])[0].alone  # still its source
    monkeypatch.undo()
    revision = await delete_turn(rig.engine, turn.session, said)  # repeated: it works
    assert len(revision.removed) == 1 and contents(rig) == []


async def test_a_copy_in_a_branch_is_the_same_message(rig: Rig) -> None:
    turn, _ = await say(rig, "I'm allergic to peanuts", ("The user is allergic to peanuts",))
    session = turn.session
    _, jazz_report = await say(
        rig, "I play jazz guitar", ("The user plays jazz guitar",), session.id
    )
    assert jazz_report["written"]
    jazz = rig.sessions.transcript(session.id)[2]
    await retract_for_edit(rig.engine, session, jazz)
    transcript = rig.sessions.transcript(session.id)
    request = edit_request(session, transcript, jazz, "I play blues guitar")
    rig.hippocampus.enqueue([hippo("The user plays blues guitar")])
    rig.chat.enqueue(["Blues is a fine choice for an evening."])
    branch, _ = await rig.engine.run(request)
    assert contents(rig) == ["The user is allergic to peanuts", "The user plays blues guitar"]
    copy = rig.sessions.transcript(branch.session.id)[0]  # the parent's first message, copied
    assert copy.content == "I'm allergic to peanuts"
    assert rig.sessions.supported_by([copy.id]) == []  # the memory names the original
    revision = await delete_turn(rig.engine, branch.session, copy)
    assert [r.content for r in revision.removed] == ["The user is allergic to peanuts"]
    assert contents(rig) == ["The user plays blues guitar"]
    # The original stays in its conversation, no longer a source of anything.
    original = rig.sessions.transcript(session.id)[0]
    assert original.content == copy.content and rig.sessions.supported_by([original.id]) == []
