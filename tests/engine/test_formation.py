"""Memory formation through the turn: the screening of candidates and the compact mode."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from backend.engine.turn import TurnRequest
from backend.llm.port import LLMUnavailable
from backend.memory.types import Namespace

from .conftest import Rig, make_rig

pytestmark = pytest.mark.anyio
NS = Namespace("u1", "companion")


def full_answer(*contents: str, subject: str = "user") -> str:
    long_term = [
        {
            "content": content,
            "category": "personal_fact",
            "importance": 1.0,
            "confidence": 1.0,
            "subject": subject,
            "keywords": [],
        }
        for content in contents
    ]
    return json.dumps({"background": "bg", "long_term": long_term, "user_emotion": "happy!!"})


def compact_answer(*facts: str, emotion: str = "joy") -> str:
    return json.dumps({"facts": list(facts), "emotion": emotion})


async def test_the_gate_keeps_only_what_the_user_said(rig: Rig) -> None:
    rig.hippocampus.enqueue(
        [
            full_answer(
                "Hello there!",
                "The user's sister Mei lives in Osaka.",  # never said: a prompt example
                "I love green tea.",  # said by the user, filed as the persona's
                "The user loves green tea.",  # the same fact again, this turn
                subject="persona",
            )
        ]
    )
    rig.chat.enqueue(["Green tea is lovely."])
    _, report = await rig.engine.run(
        TurnRequest(user_id="u1", text="hi! I love green tea, the grassy kind")
    )
    assert [w["content"] for w in report["written"]] == ["The user loves green tea."]
    assert [r["content"] for r in report["reinforced"]] == ["The user loves green tea."]
    reasons = {r["content"]: r["reason"] for r in report["rejected"]}
    assert reasons["Hello there!"].startswith("content-free")
    assert "never said: mei, osaka" in reasons["The user's sister Mei lives in Osaka."]
    [stored] = rig.long_term.store.list(NS)
    assert stored.subject == "user" and stored.category == "preference"
    assert stored.importance < 1.0  # calibrated, not copied
    assert report["user_emotion"] == {"label": "joy", "intensity": 0.5}


@pytest.fixture
def compact(tmp_path: Path) -> Rig:
    made = make_rig(tmp_path)
    made.engine.settings = dataclasses.replace(made.engine.settings, hippocampus_mode="compact")
    return made


async def test_compact_mode_extracts_facts_and_code_keeps_the_rest(compact: Rig) -> None:
    compact.hippocampus.enqueue([compact_answer("The user's hamster Tudou is two years old.")])
    compact.chat.enqueue(["What a good boy."])
    turn, report = await compact.engine.run(
        TurnRequest(user_id="u1", text="my hamster Tudou is two years old today")
    )
    assert report["hippocampus"]["mode"] == "compact"
    assert [w["content"] for w in report["written"]] == [
        "The user's hamster Tudou is two years old."
    ]
    request = compact.hippocampus.calls[-1]
    assert request.json_schema is not None and "facts" in request.json_schema["properties"]
    assert "pattern" not in request.json_schema["properties"]["facts"]["items"]  # default
    state = compact.sessions.load_state(turn.session.id)
    assert state.background == "The user's hamster Tudou is two years old."
    assert [i["text"] for i in state.short_term] == [
        "my hamster Tudou is two years old today",
        "What a good boy.",
    ]


async def test_a_chinese_message_is_remembered_in_chinese(compact: Rig) -> None:
    # Asked in English, the default 0.5B translated ("The user's boyfriend is a
    # firefighter."), and the screening cannot ground a translation: nothing was kept.
    compact.hippocampus.enqueue([compact_answer("用户的男朋友阿杰是消防员。")])
    compact.chat.enqueue(["消防员很辛苦呢。"])
    said = "我男朋友叫阿杰，他是消防员。"
    _, report = await compact.engine.run(TurnRequest(user_id="u1", text=said))
    request = compact.hippocampus.calls[-1]
    assert request.json_schema is not None
    assert request.json_schema["properties"]["facts"]["items"]["pattern"].startswith("^((用户))")
    assert '"用户"' in request.messages[0]["content"]
    assert [w["content"] for w in report["written"]] == ["用户的男朋友阿杰是消防员。"]


async def test_compact_subjects_constrain_how_a_fact_opens(compact: Rig) -> None:
    settings = dataclasses.replace(compact.engine.settings, compact_subjects=True)
    compact.engine.settings = settings
    compact.hippocampus.enqueue([compact_answer("The user's hamster Tudou is two years old.")])
    compact.chat.enqueue(["What a good boy."])
    await compact.engine.run(TurnRequest(user_id="u1", text="my hamster Tudou is two years old"))
    schema = compact.hippocampus.calls[-1].json_schema
    assert schema is not None
    # Each fact opens with the user or a name of the user's words: grammar-constrained.
    pattern = schema["properties"]["facts"]["items"]["pattern"]
    assert "The user's hamster Tudou" in pattern and "|Tudou)" in pattern


async def test_a_failed_run_leaves_its_facts_to_the_next_one(compact: Rig) -> None:
    compact.hippocampus.enqueue([LLMUnavailable("down", model="h")])
    compact.chat.enqueue(["Oh no, shellfish!"])
    turn, report = await compact.engine.run(
        TurnRequest(user_id="u1", text="I'm allergic to shellfish, badly")
    )
    assert report["hippocampus"]["status"] == "failed" and report["written"] == []
    compact.hippocampus.enqueue([compact_answer("The user is allergic to shellfish.")])
    compact.chat.enqueue(["Nice!"])
    _, report = await compact.engine.run(
        TurnRequest(user_id="u1", text="anyway, nice weather", session_id=turn.session.id)
    )
    prompt = compact.hippocampus.calls[-1].messages[-1]["content"]
    assert "- I'm allergic to shellfish, badly\n- anyway, nice weather" in prompt
    assert [w["content"] for w in report["written"]] == ["The user is allergic to shellfish."]
    [stored] = compact.long_term.store.list(NS)
    assert stored.category == "health"
    assert not compact.sessions.load_state(turn.session.id).missed


async def test_what_a_failed_last_run_left_unread_is_read_in_the_next_session(
    compact: Rig,
) -> None:
    compact.hippocampus.enqueue([LLMUnavailable("down", model="h")])
    compact.chat.enqueue(["Oh no, shellfish!"])
    ended, report = await compact.engine.run(
        TurnRequest(user_id="u1", text="I'm allergic to shellfish, badly")
    )
    assert report["hippocampus"]["status"] == "failed"
    # That session ends there. Another user's session and another persona's read nothing
    # of it; the user's next session with this persona does, in its first run.
    for user, persona in (("u2", None), ("u1", "tutor")):
        compact.hippocampus.enqueue([compact_answer()])
        compact.chat.enqueue([f"Hello {user}!"])
        await compact.engine.run(TurnRequest(user_id=user, text="hello", persona_id=persona))
        assert "shellfish" not in compact.hippocampus.calls[-1].messages[-1]["content"]
    compact.hippocampus.enqueue([compact_answer("The user is allergic to shellfish.")])
    compact.chat.enqueue(["Nice!"])
    later, report = await compact.engine.run(TurnRequest(user_id="u1", text="anyway, nice weather"))
    assert later.session.id != ended.session.id
    prompt = compact.hippocampus.calls[-1].messages[-1]["content"]
    assert "- I'm allergic to shellfish, badly\n- anyway, nice weather" in prompt
    assert [w["content"] for w in report["written"]] == ["The user is allergic to shellfish."]
    # Read once: taken from the ended session, and off this one's once read.
    assert not compact.sessions.load_state(ended.session.id).missed
    assert not compact.sessions.load_state(later.session.id).missed


async def test_a_full_contract_session_ending_on_a_failed_run_is_read_in_the_next(
    rig: Rig,
) -> None:
    # The full contract (remote models) keeps the failed run's message in short-term; it
    # is listed as unread too, so the session need not go on for it to be read.
    rig.hippocampus.enqueue([LLMUnavailable("down", model="h")])
    rig.chat.enqueue(["Oh no, shellfish!"])
    ended, report = await rig.engine.run(
        TurnRequest(user_id="u1", text="I'm allergic to shellfish, badly")
    )
    assert report["hippocampus"]["status"] == "failed"
    assert [m["text"] for m in rig.sessions.load_state(ended.session.id).missed] == [
        "I'm allergic to shellfish, badly"
    ]
    rig.hippocampus.enqueue([full_answer("The user is allergic to shellfish.")])
    rig.chat.enqueue(["Nice!"])
    later, report = await rig.engine.run(TurnRequest(user_id="u1", text="anyway, nice weather"))
    assert later.session.id != ended.session.id
    prompt = rig.hippocampus.calls[-1].messages[-1]["content"]
    assert prompt.count("I'm allergic to shellfish, badly") == 1 and "missed_turns" in prompt
    assert [w["content"] for w in report["written"]] == ["The user is allergic to shellfish."]
    assert not rig.sessions.load_state(ended.session.id).missed
    assert not rig.sessions.load_state(later.session.id).missed


async def test_a_full_contract_session_that_goes_on_reads_its_failed_message(
    rig: Rig,
) -> None:
    rig.hippocampus.enqueue([LLMUnavailable("down", model="h")])
    rig.chat.enqueue(["Oh no, shellfish!"])
    turn, _ = await rig.engine.run(TurnRequest(user_id="u1", text="I'm allergic to shellfish"))
    rig.hippocampus.enqueue([full_answer("The user is allergic to shellfish.")])
    rig.chat.enqueue(["Nice!"])
    _, report = await rig.engine.run(
        TurnRequest(user_id="u1", text="anyway, nice weather", session_id=turn.session.id)
    )
    prompt = rig.hippocampus.calls[-1].messages[-1]["content"]
    # in short-term, and as a missed turn: the one its facts are formed from
    missed = prompt[prompt.index('"missed_turns"') :]
    assert "I'm allergic to shellfish" in missed
    assert [w["content"] for w in report["written"]] == ["The user is allergic to shellfish."]
    assert not rig.sessions.load_state(turn.session.id).missed


async def test_compact_facts_must_come_from_the_new_message(compact: Rig) -> None:
    compact.hippocampus.enqueue([compact_answer("The user's hamster Tudou is a night owl.")])
    compact.chat.enqueue(["Tudou!"])
    turn, _ = await compact.engine.run(
        TurnRequest(user_id="u1", text="my hamster Tudou is such a night owl")
    )
    compact.hippocampus.enqueue(
        [
            compact_answer(
                "The user's hamster Tudou is a night owl.",  # an earlier turn's fact
                "The user's hamster is a little golden guy, two years old.",
            )
        ]
    )
    compact.chat.enqueue(["Cute."])
    _, report = await compact.engine.run(
        TurnRequest(
            user_id="u1",
            text="my hamster is a little golden guy, two years old",
            session_id=turn.session.id,
        )
    )
    assert [w["content"] for w in report["written"]] == [
        "The user's hamster is a little golden guy, two years old."
    ]
    [rejected] = report["rejected"]
    assert rejected["content"] == "The user's hamster Tudou is a night owl."
    assert rejected["reason"].startswith("not grounded")


async def test_the_users_name_is_kept_when_the_model_forms_no_fact_of_it(compact: Rig) -> None:
    # The 0.5B's answer to the default install's first chat named the job, not the user.
    compact.hippocampus.enqueue([compact_answer("The user teaches chemistry in Leeds.")])
    compact.chat.enqueue(["Chemistry! Lovely."])
    turn, report = await compact.engine.run(
        TurnRequest(user_id="u1", text="hi! I'm Noor, I teach chemistry in Leeds")
    )
    assert [w["content"] for w in report["written"]] == [
        "The user teaches chemistry in Leeds.",
        "The user is Noor.",
    ]
    # ... and with no fact at all: the name still is one; said again, it is the same memory.
    compact.hippocampus.enqueue([compact_answer()])
    compact.chat.enqueue(["How was your week at school?"])
    _, report = await compact.engine.run(
        TurnRequest(
            user_id="u1", text="it's Noor again, I'm Noor from Leeds", session_id=turn.session.id
        )
    )
    stored = [m.content for m in compact.long_term.store.list(NS)]
    assert stored.count("The user is Noor.") == 1
    assert not report["written"]


async def test_the_name_said_again_is_the_name_stored_in_other_words(compact: Rig) -> None:
    compact.hippocampus.enqueue([compact_answer("The user's name is Noor.")])
    compact.chat.enqueue(["Lovely to meet you."])
    turn, _ = await compact.engine.run(TurnRequest(user_id="u1", text="my name is Noor"))
    compact.hippocampus.enqueue([compact_answer()])
    compact.chat.enqueue(["Of course I do."])
    _, report = await compact.engine.run(
        TurnRequest(user_id="u1", text="I'm Noor, remember me?", session_id=turn.session.id)
    )
    assert not report["written"]
    stored = [m.content for m in compact.long_term.store.list(NS) if "Noor" in m.content]
    assert stored == ["The user's name is Noor."]
