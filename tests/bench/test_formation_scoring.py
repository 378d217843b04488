"""The judge of bench.memory_formation (bench/formation_scoring.py): junk, subject errors,
duplicates and probes, by its documented definitions; and the hand-written oracle facts
pass it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import formation_scoring as scoring
from bench.formation_scoring import StoredMemory, Utterance
from tests.support import imported_modules

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"

DIARY = [
    Utterance("user", "hey... you up? can't sleep again", 0),
    Utterance("assistant", "I'm here. What's keeping you awake tonight?", 0),
    Utterance("user", "my hamster Tudou is sprinting on his wheel. so loud at 2am", 1),
    Utterance("assistant", "Tudou sounds like the only one in the flat with energy left.", 1),
    Utterance(
        "user", "hamsters are nocturnal so yes lol. he's a little golden guy, two years old", 2
    ),
    Utterance("assistant", "It's normal to feel tired when a pet keeps you up at night.", 2),
    Utterance("user", "my sister lives in Osaka and she's getting married in October", 3),
    Utterance("assistant", "I grew up by the sea in a small fishing town.", 3),
]


def _judge(*memories: StoredMemory, vectors: dict[str, list[float]] | None = None):
    return scoring.judge(list(memories), DIARY, vectors=vectors)


def _ids(findings) -> list[str]:
    return [f.memory_id for f in findings]


def test_the_judge_does_not_use_the_apps_gate_or_grounding() -> None:
    path = Path(scoring.__file__)
    modules = imported_modules(path)
    assert not [m for m in modules if m.startswith("backend")], modules


@pytest.mark.parametrize(
    "text",
    ["hi", "Hello there", "Hello!", "Hi everyone!", "The user said hello.",
     "The user greeted the assistant.", "Thanks so much!", "ok lol", "Good night!",
     "The user thanked the companion for listening."],
)  # fmt: skip
def test_greetings_thanks_and_filler_are_phatic(text: str) -> None:
    assert scoring.phatic_reason(text) is not None


@pytest.mark.parametrize("text", ["你好！", "晚安", "谢谢你", "用户说你好", "哈哈好的"])
def test_chinese_greetings_are_phatic(text: str) -> None:
    assert scoring.phatic_reason(text) is not None


@pytest.mark.parametrize(
    "text",
    ["The user runs at night.", "The user's knee is fine now.", "用户的姐姐在成都结婚",
     "用户老家在成都。", "The user always mixes up he and she in English."],
)  # fmt: skip
def test_short_facts_are_not_phatic(text: str) -> None:
    assert scoring.phatic_reason(text) is None


def test_a_greeting_in_the_store_is_junk() -> None:
    verdict = _judge(StoredMemory("m1", "Hello there", "user", turn=0))
    assert _ids(verdict.junk) == ["m1"]
    assert verdict.junk[0].reason.startswith("phatic")


def test_a_chinese_greeting_in_the_store_is_junk() -> None:
    verdict = _judge(StoredMemory("m1", "你好！晚安", "user", turn=3))
    assert _ids(verdict.junk) == ["m1"]


def test_a_supported_paraphrase_is_not_junk() -> None:
    memory = StoredMemory(
        "m1", "The user's hamster is called Tudou; he is a two-year-old golden hamster.", "user",
        turn=2,
    )  # fmt: skip
    verdict = _judge(memory)
    assert verdict.junk == () and verdict.subject_errors == ()
    assert verdict.supported["m1"].ok


@pytest.mark.parametrize(
    "text", ["The user's sister Mei lives in Osaka.", "Mei, the user's sister, lives in Osaka."]
)
def test_an_unsupported_name_is_junk_even_when_the_words_match(text: str) -> None:
    # "Mei" was never said: the other words alone would pass the 60% share.
    verdict = _judge(StoredMemory("m1", text, "user", turn=3))
    assert _ids(verdict.junk) == ["m1"]
    assert "names not said: mei" in verdict.junk[0].reason


def test_a_number_never_said_is_junk() -> None:
    verdict = _judge(StoredMemory("m1", "The user's hamster Tudou is 3 years old.", "user", turn=2))
    assert _ids(verdict.junk) == ["m1"]
    assert "numbers not said: 3" in verdict.junk[0].reason


def test_invented_content_is_junk() -> None:
    verdict = _judge(
        StoredMemory(
            "m1", "The user enjoys reading mystery novels by the fireplace.", "user", turn=3
        )
    )
    assert _ids(verdict.junk) == ["m1"]


def test_words_stitched_together_from_several_messages_are_junk() -> None:
    # Every word was said, but no message said most of them: "loud" and "wheel" (turn 1),
    # "golden" and "nocturnal" (turn 2), "sister" and "Osaka" (turn 3).
    stitched = "The user's sister in Osaka has a loud golden wheel that is nocturnal."
    verdict = _judge(StoredMemory("m1", stitched, "user", turn=3))
    assert _ids(verdict.junk) == ["m1"]
    assert verdict.supported["m1"].ratio >= scoring.SUPPORT_MIN_RATIO
    assert verdict.supported["m1"].anchor < scoring.SUPPORT_MIN_ANCHOR


def test_support_counts_only_what_was_said_up_to_the_memorys_turn() -> None:
    fact = "The user's hamster Tudou is a little golden hamster, two years old."
    early = _judge(StoredMemory("m1", fact, "user", turn=1))  # "golden", "two years" came later
    late = _judge(StoredMemory("m1", fact, "user", turn=2))
    assert _ids(early.junk) == ["m1"]
    assert late.junk == ()


def test_the_assistants_words_filed_as_a_user_fact_are_a_subject_error_and_junk() -> None:
    memory = StoredMemory(
        "m1", "The user feels it is normal to be tired when a pet keeps them up at night.",
        "user", turn=3,
    )  # fmt: skip
    verdict = _judge(memory)
    assert _ids(verdict.subject_errors) == ["m1"]
    assert _ids(verdict.junk) == ["m1"]
    assert "only the assistant said it" in verdict.subject_errors[0].reason


def test_a_user_fact_filed_as_persona_is_a_subject_error() -> None:
    verdict = _judge(
        StoredMemory("m1", "The companion's sister lives in Osaka.", "persona", turn=3)
    )
    assert _ids(verdict.subject_errors) == ["m1"]
    assert verdict.junk == ()


def test_a_persona_fact_said_by_the_assistant_is_fine() -> None:
    memory = StoredMemory(
        "m1", "The companion grew up by the sea in a small fishing town.", "persona", turn=4
    )
    verdict = _judge(memory)
    assert verdict.subject_errors == () and verdict.junk == ()


def test_a_persona_fact_said_by_nobody_is_junk_unless_the_card_says_it() -> None:
    memory = StoredMemory("m1", "The companion keeps a shop that sells old maps.", "persona")
    assert _ids(scoring.judge([memory], DIARY).junk) == ["m1"]
    card = "You keep a small shop that sells old maps and postcards."
    assert scoring.judge([memory], DIARY, persona_text=card).junk == ()


def test_duplicates_by_words_count_each_later_restatement_once() -> None:
    memories = [
        StoredMemory("a", "The user's hamster Tudou is two years old.", "user"),
        StoredMemory("b", "The user's sister lives in Osaka.", "user"),
        StoredMemory("c", "Tudou, the user's hamster, is two years old.", "user"),
        StoredMemory("d", "The hamster Tudou is two years old.", "user"),
    ]
    found = scoring.duplicates(memories)
    assert [(f.memory_id, f.other_id) for f in found] == [("c", "a"), ("d", "a")]


def test_duplicates_by_embedding_and_superseded_memories_are_ignored() -> None:
    memories = [
        StoredMemory(
            "a", "The user's sister is getting married in October.", "user", current=False
        ),
        StoredMemory("b", "The user's sister is getting married in December.", "user"),
        StoredMemory("c", "Xiaoyu's wedding is on December 20th.", "user"),
        StoredMemory("d", "The user has a golden hamster.", "user"),
    ]
    vectors = {"a": [1.0, 0.0], "b": [1.0, 0.05], "c": [0.99, 0.1], "d": [0.0, 1.0]}
    found = scoring.duplicates(memories, vectors)
    assert [(f.memory_id, f.other_id) for f in found] == [("c", "b")]
    assert "cosine" in found[0].reason
    assert scoring.duplicates(memories) == []  # the words alone differ


def test_only_current_memories_are_judged() -> None:
    verdict = _judge(
        StoredMemory("m1", "Hello there", "user", current=False),
        StoredMemory("m2", "The user has a hamster called Tudou.", "user", turn=1),
    )
    assert verdict.memories == 1 and verdict.junk == ()


def test_probe_hit_and_stale() -> None:
    contents = ["The user has a hamster.", "The wedding moved from October to December."]
    assert scoring.probe_hit(contents, ["DECEMBER", "20th"]) == 1
    assert scoring.probe_hit(contents, ["speech"]) is None
    activated = [
        ("The wedding moved from October to December.", True),  # says the old value as past
        ("The wedding is in October.", False),  # superseded: not presented as current
        ("The sister marries in October in Chengdu.", True),  # stale
    ]
    assert scoring.stale_hit(activated, ["december"], ["october"]) == 2
    assert scoring.stale_hit(activated[:2], ["december"], ["october"]) is None
    assert scoring.stale_hit(activated, ["december"], []) is None


def test_percentile() -> None:
    assert scoring.percentile([], 0.5) == 0.0
    assert scoring.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert scoring.percentile([1.0, 2.0], 0.5) == 1.5


@pytest.mark.parametrize("stem", ["late_night_diary", "language_tutor", "fitness_coach"])
def test_every_oracle_fact_is_supported_by_what_the_user_said_in_its_session(stem: str) -> None:
    """The judge passes every hand-written fact, and each is supported by the user's words
    of its own session up to its turn: what the hippocampus sees, since every session of
    the bench starts with an empty state (an older fact may still be quoted in
    ``supersedes``, which is not stored)."""
    script = json.loads(
        (DATA / "eval" / "conversations" / f"{stem}.json").read_text(encoding="utf-8")
    )
    oracle = json.loads((DATA / "formation_oracle" / f"{stem}.json").read_text(encoding="utf-8"))
    said: dict[tuple[int, int], list[str]] = {}  # (session, turn) → the session's user words
    numbers: dict[tuple[int, int], int] = {}
    transcript: list[Utterance] = []
    for s, session in enumerate(script):
        users: list[str] = []
        for turn in session:
            if turn["role"] == "user":
                users.append(turn["content"])
                said[(s, len(users) - 1)] = list(users)
                numbers[(s, len(users) - 1)] = len(numbers)
                transcript.append(Utterance("user", turn["content"], len(numbers) - 1))
            else:
                transcript.append(Utterance("assistant", turn["content"], len(numbers) - 1))
    memories = []
    contents: set[str] = set()
    for entry in oracle["turns"]:
        key = (entry["session"], entry["turn"])
        for i, fact in enumerate(entry["long_term"]):
            if "supersedes" in fact:
                assert fact["supersedes"] in contents  # quotes an older fact exactly
            contents.add(fact["content"])
            within = scoring.support(fact["content"], scoring.Evidence.of(said[key]))
            assert within.ok, (fact["content"], within.describe())
            memories.append(
                StoredMemory(f"{key}.{i}", fact["content"], fact["subject"], turn=numbers[key])
            )
    verdict = scoring.judge(memories, transcript)
    assert verdict.junk == () and verdict.subject_errors == ()


def test_a_name_standing_alone_is_a_fact_not_filler() -> None:
    from bench.formation_scoring import phatic_reason

    assert phatic_reason("The user is Xiaoman.") is None
    assert phatic_reason("Hi Juniper!") is not None
    assert phatic_reason("Remind me when it is again.") is not None


def test_naming_verbs_are_no_content() -> None:
    from bench.formation_scoring import content_words

    assert "call" not in content_words("The user has a condition called Achilles tendinopathy.")
