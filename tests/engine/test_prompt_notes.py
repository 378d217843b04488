"""How recalled notes read in the main prompt (backend.engine.prompt): said to the user in
the second person, with the health rule next to a health note."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend.engine.prompt import (
    HEALTH_RULE,
    MEMORY_PREAMBLE,
    NOTES_OPEN,
    build_main_messages,
    memory_block,
    note_line,
    noted_when,
    second_person,
)
from backend.engine.stand_ins import is_stand_in, lost_thread
from backend.hippocampus.state import SessionMemoryState, ShortTermItem
from backend.memory.types import Memory

T = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (
            "The user's sister Xiaoyu is getting married in October in Chengdu.",
            "Your sister Xiaoyu is getting married in October in Chengdu.",
        ),
        ("The user is allergic to peanuts.", "You are allergic to peanuts."),
        ("The user has a hamster called Tudou.", "You have a hamster called Tudou."),
        ("The user doesn't eat beef or pork.", "You don't eat beef or pork."),
        ("The user teaches chemistry in Leeds.", "You teach chemistry in Leeds."),
        ("The user still studies at night.", "You still study at night."),
        ("The user goes running at night.", "You go running at night."),
        ("The user can swim.", "You can swim."),
        ("Xiaoyu asked the user to give a speech.", "Xiaoyu asked you to give a speech."),
        ("用户的姐姐在成都。", "你的姐姐在成都。"),
        ("Pixel is a grumpy old pug.", "Pixel is a grumpy old pug."),
        # Their second verb too (the health reminder said "you have asthma and carries an
        # inhaler"), but not a noun after "and".
        ("The user has asthma and carries an inhaler.", "You have asthma and carry an inhaler."),
        ("The user is allergic to bee stings and carries an EpiPen and always uses it.",
         "You are allergic to bee stings and carry an EpiPen and always use it."),
        ("The user loves cats and dogs.", "You love cats and dogs."),
        ("Mei loves cats and carries treats.", "Mei loves cats and carries treats."),
        # "the user" as an object: the verb after it is someone else's (a background line
        # said "Your partner who's interviewing you are on a site visit").
        ("The user's partner who's interviewing the user is on a site visit.",
         "Your partner who's interviewing you is on a site visit."),
        ("The dog that follows the user is called Rex.", "The dog that follows you is called Rex."),
        ("Every morning the user goes running.", "Every morning you go running."),
        ("The studio the user has wanted to join is hiring.",
         "The studio you have wanted to join is hiring."),
        ("A friend of the user is visiting.", "A friend of yours is visiting."),
    ],
)  # fmt: skip
def test_a_note_is_said_to_the_user(stored: str, shown: str) -> None:
    assert second_person(stored) == shown


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        # The user's own pronouns (the oracle store's notes: the 1.5B read "in her left
        # heel" as someone else's, and "so he changed his exam" as not the user's).
        (
            "The user has Achilles tendinopathy in her left heel; it flared up last year "
            "when she ramped up running too fast.",
            "You have Achilles tendinopathy in your left heel; it flared up last year "
            "when you ramped up running too fast.",
        ),
        (
            "The user's company is sending him on a business trip in March, so he changed "
            "his exam to May 10.",
            "Your company is sending you on a business trip in March, so you changed "
            "your exam to May 10.",
        ),
        (
            "The user stopped 16:8 fasting after getting dizzy in the pool twice; she now "
            "eats breakfast before morning sessions.",
            "You stopped 16:8 fasting after getting dizzy in the pool twice; you now eat "
            "breakfast before morning sessions.",
        ),
        (
            "The user had a nightmare about the speech: she froze and everyone was staring at her.",
            "You had a nightmare about the speech: you froze and everyone was staring at you.",
        ),
        (
            "The user can only swim breaststroke; freestyle makes her panic.",
            "You can only swim breaststroke; freestyle makes you panic.",
        ),
        (
            "The user's name is Xiaoman; most people call her Man.",
            "Your name is Xiaoman; most people call you Man.",
        ),
        (
            "The user usually takes lactase pills but sometimes forgets them.",
            "You usually take lactase pills but sometimes forget them.",
        ),
        ("The user wants to improve their English.", "You want to improve your English."),
        (
            "The user will be a bridesmaid at her sister Xiaoyu's wedding.",
            "You will be a bridesmaid at your sister Xiaoyu's wedding.",
        ),
        # Someone else's pronouns stay theirs.
        (
            "The user's sister moved her wedding to December.",
            "Your sister moved her wedding to December.",
        ),
        (
            "The user's friend Chen Jing checked his essay.",
            "Your friend Chen Jing checked his essay.",
        ),
        (
            "The user met Anna at the gym and she is a nurse.",
            "You met Anna at the gym and she is a nurse.",
        ),
        ("The user told her mum she likes dogs.", "You told your mum she likes dogs."),
        (
            "Tudou survived the train trip in his travel box.",
            "Tudou survived the train trip in his travel box.",
        ),
        # Pronouns named, not used; both genders: nothing is swapped.
        (
            "The user always mixes up he and she in English.",
            "You always mix up he and she in English.",
        ),
        (
            "The user said her boss is mean and she hates him.",
            "You said her boss is mean and she hates him.",
        ),
    ],
)
def test_a_notes_pronouns_for_the_user_are_said_to_them(stored: str, shown: str) -> None:
    assert second_person(stored) == shown


def memory(content: str, **extra: object) -> Memory:
    fields: dict = {"category": "general", "importance": 0.8, "created_at": T, **extra}
    return Memory(id="m", content=content, last_accessed=T, **fields)


def test_note_lines_and_the_health_rule() -> None:
    allergy = memory("The user is allergic to peanuts.", category="health")
    later = T + timedelta(days=17)
    assert note_line(allergy, later) == "- (2 weeks ago, health) You are allergic to peanuts."
    # only a health note says its category (the rule below points at it)
    cat = memory("The user's cat is Tama.", category="relationship")
    assert note_line(cat, T) == "- (today) Your cat is Tama."
    # what the companion itself said stays as it was written
    own = memory("The companion said it loves rain.", subject="persona")
    assert note_line(own, T).endswith(") The companion said it loves rain.")
    block = memory_block("", [allergy])
    assert block is not None and block.endswith(HEALTH_RULE)
    plain = memory_block("", [memory("The user's cat is Tama.", category="relationship")])
    assert plain is not None and HEALTH_RULE not in plain and "Your cat is Tama." in plain


def test_a_note_of_what_the_user_does_not_eat_gets_the_rule_too() -> None:
    # A preference to the hippocampus, a constraint to a dinner plan.
    diet = memory("The user is pescatarian now: no meat.", category="preference")
    assert note_line(diet, T) == "- (today, diet) You are pescatarian now: no meat."
    block = memory_block("", [diet])
    assert block is not None and block.endswith(HEALTH_RULE)
    assert "do not eat" in HEALTH_RULE
    # A taste is not a constraint.
    spicy = memory("The user loves very spicy food.", category="preference")
    assert note_line(spicy, T) == "- (today) You love very spicy food."


def test_a_brief_block_opens_on_its_tag_but_a_background_gets_the_rules_whole() -> None:
    cat = memory("The user's cat is Tama.", category="relationship")
    brief = memory_block("", [cat], brief=True)
    assert brief is not None and brief.startswith(NOTES_OPEN + "\nRecalled notes")
    assert MEMORY_PREAMBLE not in brief and "Your cat is Tama." in brief
    whole = memory_block("The user moved to Leeds.", [cat], brief=True)
    assert whole is not None and whole.startswith(MEMORY_PREAMBLE)


def test_the_background_is_said_to_the_user_line_by_line() -> None:
    # Shown as formed, the 1.5B said a background line back: "You said you're planning to
    # interview the user for Thursday" (bench.reply_quality's long session, seed 5).
    background = (
        "The user's interview moved to Thursday.\n"
        "The user's partner who's interviewing the user is on a site visit.\n"
        "The user lives in Manchester.\n"
        "Pickle is glaring at the user because her dinner is late."
    )
    block = memory_block(background, [])
    assert block is not None
    summary = next(line for line in block.split("\n") if line.startswith("Summary"))
    assert summary == (
        "Summary of the conversation so far: Your interview moved to Thursday. Your partner"
        " who's interviewing you is on a site visit. You live in Manchester. Pickle is"
        " glaring at you because her dinner is late."
    )
    assert "the user" not in summary.lower()


@pytest.mark.parametrize(
    ("days", "said"),
    [
        (0, "today"), (1, "yesterday"), (2, "2 days ago"), (13, "13 days ago"),
        (14, "2 weeks ago"), (59, "8 weeks ago"), (60, "2 months ago"), (729, "24 months ago"),
        (730, "2 years ago"), (-1, "today"),
    ],
)  # fmt: skip
def test_a_note_says_how_long_ago_it_was_noted(days: int, said: str) -> None:
    assert noted_when(T, T + timedelta(days=days)) == said


def test_the_block_and_the_turn_count_ages_from_the_same_moment() -> None:
    old_note = memory("The user moved to Geelong.", created_at=T - timedelta(days=40))
    block = memory_block("", [old_note], now=T)
    assert block is not None and "- (5 weeks ago) You moved to Geelong." in block


def test_the_apps_stand_in_replies_are_left_out_of_the_history() -> None:
    # The long session's Chinese stretch: the model took the stand-in for the
    # conversation's voice and opened the next replies with it.
    stand_in = lost_thread("她每天早上都去公园跳广场舞")
    state = SessionMemoryState(
        short_term=(
            ShortTermItem("user", "我奶奶今年八十三岁了"),
            ShortTermItem("assistant", "八十三还这么硬朗，真好！"),
            ShortTermItem("user", "她每天早上都去公园跳广场舞"),
            ShortTermItem("assistant", f" {stand_in} "),
        )
    )
    messages = build_main_messages(
        system_prompt="You are Companion.",
        client_system=None,
        state=state,
        memories=(),
        user_message="上次打电话她一直问我什么时候找男朋友",
    )
    said = [m["content"] for m in messages if m["role"] == "assistant"]
    assert said == ["八十三还这么硬朗，真好！"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "user"]
    # The model's own words are kept, even when they are near the stand-in's.
    assert not is_stand_in("嗯，我刚才有点分心了。你接着说吧，我听着呢。")
    assert all(is_stand_in(lost_thread(m)) for m in ("hi", "你好", "do you remember my cat?"))
