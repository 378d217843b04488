"""The reply guard in the turn (backend.engine.turn_reply): a refusal, an echo or a repeat
is never shown; the model is asked again with a hint; the last attempt is shown."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from backend.engine.reply_guard import HINTS
from backend.engine.stand_ins import lost_thread
from backend.engine.turn import TurnRequest
from backend.engine.turn_reply import recall_reminder
from backend.llm.port import Finish, Sampling
from backend.memory.types import Namespace

from .conftest import Rig, make_rig

pytestmark = pytest.mark.anyio

QUIET = json.dumps({"background": "", "short_term": [], "long_term": []})


async def reply(rig: Rig, text: str, session: str = "s1", **extra: object) -> tuple[str, list]:
    rig.hippocampus.enqueue([QUIET])
    request = TurnRequest(user_id="u1", text=text, session_id=session, **extra)  # type: ignore[arg-type]
    async with rig.engine.turn(request) as turn:
        shown = "".join([piece async for piece in turn.stream()])
    await turn.merged  # type: ignore[misc]
    return shown, turn.rejected


async def test_a_refusal_is_sampled_again_with_a_hint(rig: Rig) -> None:
    rig.chat.enqueue(
        ["I'm", " sorry", ",", " but", " I", " can't", " assist", " with", " that", "."]
    )
    rig.chat.enqueue(["Why", " did", " the", " cat", " sit", " on", " the", " laptop", "?"])
    shown, rejected = await reply(rig, "tell me a joke about cats")
    assert shown == "Why did the cat sit on the laptop?"
    assert rejected == ["refusal"]
    first, second = rig.chat.calls[-2:]
    assert not any(HINTS["refusal"] == m["content"] for m in first.messages)
    assert second.messages[-1] == {"role": "system", "content": HINTS["refusal"]}
    # what the user saw is what was stored
    stored = rig.sessions.transcript("s1")
    assert stored[-1].content == shown


async def test_a_loop_is_broken_and_a_fixed_seed_moves_on(rig: Rig) -> None:
    rig.chat.enqueue(["Hi", ",", " Priya", "!", " Lovely", " to", " meet", " you", "."])
    await reply(rig, "hey, I'm Priya")
    rig.chat.enqueue(["Hi", ",", " Priya", "!", " Lovely", " to", " meet", " you", "."])
    rig.chat.enqueue(["A", " night", " nurse", "!", " You", " must", " be", " shattered", "."])
    shown, rejected = await reply(rig, "I'm a nurse on the night shift", sampling=Sampling(seed=42))
    assert shown == "A night nurse! You must be shattered."
    assert rejected == ["repeat"]
    seeds = [call.sampling.seed for call in rig.chat.calls[-2:] if call.sampling]
    assert seeds[0] == 42 and seeds[1] != 42
    temperatures = [call.temperature for call in rig.chat.calls[-2:]]
    assert temperatures[1] is not None and temperatures[1] > (temperatures[0] or 0)


async def test_an_echo_is_never_shown_even_when_every_attempt_echoes(rig: Rig) -> None:
    echo = ["I", " had", " a", " rough", " day", ",", " my", " boss", " yelled", " at", " me", "."]
    for _ in range(3):
        rig.chat.enqueue(list(echo))
    message = "I had a rough day, my boss yelled at me"
    shown, rejected = await reply(rig, message)
    # Two retries; the last attempt is never asked again (the guard never loops), and
    # the message said back a third time is not shown either: a plain request to go on.
    assert rejected == ["echo", "echo", "echo"]
    assert len(rig.chat.calls) == 3
    assert shown == lost_thread(message)
    # A last attempt that starts like the message but goes on is shown as it comes.
    for _ in range(2):
        rig.chat.enqueue(list(echo))
    rig.chat.enqueue(["I", " had", " a", " feeling", " you", "'d", " say", " that", "."])
    shown, rejected = await reply(rig, "I had a rough day, my boss yelled at me again")
    assert rejected == ["echo", "echo"] and shown == "I had a feeling you'd say that."


async def test_a_chinese_statement_retold_first_is_answered_on_the_first_attempt(
    rig: Rig,
) -> None:
    retold = "外面确实好安静啊，整栋楼好像就你家灯还亮着。这么晚了还没睡吗？早点休息哦。"
    rig.chat.enqueue(list(retold))  # a character a piece, as the model streams Chinese
    shown, rejected = await reply(rig, "外面好安静啊，整栋楼好像就我家灯还亮着")
    assert rejected == [] and len(rig.chat.calls) == 1
    assert shown == "这么晚了还没睡吗？早点休息哦。"


async def test_a_refusal_is_never_shown_even_when_every_attempt_refuses(rig: Rig) -> None:
    refusal = ["I", "'m", " sorry", ",", " but", " I", " cannot", " help", " with", " that",
               " request", "."]  # fmt: skip
    for _ in range(3):
        rig.chat.enqueue(list(refusal))
    message = "a friend signed me up for a 10k on Sunday, I want to go flat out"
    shown, rejected = await reply(rig, message)
    assert rejected == ["refusal", "refusal", "refusal"]
    assert shown == lost_thread(message)


async def test_help_desk_lines_are_left_out_of_the_reply(rig: Rig) -> None:
    rig.chat.enqueue(
        ["Night", " shifts", " are", " hard", ".", " Is", " there", " anything", " else",
         " I", " can", " help", " with", "?"]
    )  # fmt: skip
    shown, rejected = await reply(rig, "just got home from the night shift")
    assert shown == "Night shifts are hard."
    assert rejected == []


async def test_the_guard_can_be_switched_off(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    try:
        rig.engine.settings = dataclasses.replace(rig.engine.settings, reply_guard=False)
        rig.chat.enqueue(["I'm sorry, but I can't assist with that."])
        shown, rejected = await reply(rig, "tell me a joke")
        assert shown == "I'm sorry, but I can't assist with that." and rejected == []
        assert len(rig.chat.calls) == 1
    finally:
        rig.services.close()


async def test_a_go_ahead_against_a_health_note_is_never_shown(rig: Rig) -> None:
    ns = Namespace("u1", "companion")
    note = rig.long_term.new_memory(
        "The user is allergic to shellfish.", category="health", importance=0.95
    )
    rig.long_term.create(ns, note)
    for _ in range(3):  # every attempt says the same
        rig.chat.enqueue(["Definitely", " go", " for", " it", ",", " pile", " it", " high", "!"])
    shown, rejected = await reply(rig, "my mate is doing a seafood boil, should I pile my plate?")
    assert rejected == ["health", "health", "health"]
    assert "allergic to shellfish" in shown and "go for it" not in shown.lower()
    hint = rig.chat.calls[1].messages[-1]["content"]
    assert "The user is allergic to shellfish." in hint
    # a reply that keeps it in mind is shown at once
    rig.chat.enqueue(["Go", " for", " the", " company", ",", " but", " skip", " the",
                      " shellfish", "."])  # fmt: skip
    shown, rejected = await reply(rig, "and the dessert afterwards?", session="s2")
    assert shown == "Go for the company, but skip the shellfish." and rejected == []


async def test_a_health_note_that_forbids_nothing_stops_no_go_ahead(rig: Rig) -> None:
    # bench.reply_quality's probe sessions: "You could try the river path" to a night-run
    # question was stopped twice as a go-ahead against this note, and the reply became
    # the lactose note beside it.
    ns = Namespace("u1", "companion")
    habit = "The user has started running at night to deal with stress, 3km along the river."
    rig.long_term.create(ns, rig.long_term.new_memory(habit, category="health", importance=0.9))
    rig.chat.enqueue(["You", " could", " try", " the", " canal", " path", ",", " it", "'s",
                      " lovely", "!"])  # fmt: skip
    shown, rejected = await reply(rig, "where's a nice route for a night run near home?")
    assert rejected == [] and shown == "You could try the canal path, it's lovely!"


async def test_a_last_attempt_that_only_says_a_hint_back_is_never_shown(rig: Rig) -> None:
    hello = ["Hi", ",", " Priya", "!", " Lovely", " to", " meet", " you", "."]
    rig.chat.enqueue(list(hello))
    await reply(rig, "hey, I'm Priya")
    rig.chat.enqueue(list(hello))
    rig.chat.enqueue(list(hello))
    # Seen with Qwen2.5-Coder-1.5B after two retries: the retry's hint, said back.
    rig.chat.enqueue([" Reply", " to", " what", " they", " just", " said", " with",
                      " something", " new", "."])  # fmt: skip
    shown, rejected = await reply(rig, "I'm a nurse on the night shift")
    assert rejected == ["repeat", "repeat"]
    assert shown == lost_thread("I'm a nurse on the night shift")
    assert "something new" not in rig.sessions.transcript("s1")[-1].content
    assert lost_thread("我今天好累") != shown  # said in Chinese to a message in Chinese


async def test_a_reply_that_forgets_what_a_recalled_note_says_is_asked_again(rig: Rig) -> None:
    ns = Namespace("u1", "companion")
    wedding = "The user's sister Mei is getting married on 20 December."
    rig.long_term.create(ns, rig.long_term.new_memory(wedding, category="relationship"))
    rig.chat.enqueue(["I", " don't", " have", " a", " specific", " date", " for", " your",
                      " sister", "'s", " wedding", "."])  # fmt: skip
    rig.chat.enqueue(["On", " 20", " December", "!", " Not", " long", " now", "."])
    shown, rejected = await reply(rig, "when is my sister Mei's wedding again?")
    assert rejected == ["forgot"] and shown == "On 20 December! Not long now."
    hint = rig.chat.calls[-1].messages[-1]["content"]
    assert hint.startswith("Your notes about them answer this")
    assert "Your sister Mei is getting married" in hint


async def test_a_wrong_number_next_to_a_health_note_that_answers_is_asked_again(rig: Rig) -> None:
    # bench.reply_quality's probe sessions: "How much weight have I lost since we
    # started?" got "You have lost 3.0 kg" with the weight note in the block.
    ns = Namespace("u1", "companion")
    weight = "The user's weight is 69.5 kg now."
    rig.long_term.create(ns, rig.long_term.new_memory(weight, category="health", importance=0.8))
    rig.chat.enqueue(["You", " have", " lost", " 3", ".", "0", " kg", " since", " then", "."])
    rig.chat.enqueue(["You", "'re", " at", " 69", ".", "5", " kg", " now", "!"])
    shown, rejected = await reply(rig, "how much does my weight come to now?")
    assert rejected == ["forgot"] and shown == "You're at 69.5 kg now!"
    assert "Your weight is 69.5 kg now." in rig.chat.calls[-1].messages[-1]["content"]


async def test_asked_what_it_knows_of_the_user_it_says_their_notes(rig: Rig) -> None:
    # The default install's first chat: "what do you know about me?" names no note, and
    # the 1.5B answered "I don't have any knowledge of you" with none in the prompt.
    ns = Namespace("u1", "companion")
    for fact in ("The user is Maya.", "The user just moved to Lisbon for a job as a nurse."):
        rig.long_term.create(ns, rig.long_term.new_memory(fact, importance=0.8))
    rig.chat.enqueue(["I", " don", "'t", " have", " any", " knowledge", " of", " you", "."])
    rig.chat.enqueue(["You", "'re", " Maya", ",", " a", " nurse", " new", " to", " Lisbon", "!"])
    shown, rejected = await reply(rig, "what do you know about me?")
    assert rejected == ["forgot"] and shown == "You're Maya, a nurse new to Lisbon!"
    first = rig.chat.calls[0].messages
    notes = "\n".join(str(m["content"]) for m in first)
    assert "You are Maya." in notes and "Lisbon" in notes
    # "tell me about myself" asks the same, with no question mark.
    rig.chat.enqueue(
        ["Sorry", ",", " I", " don", "'t", " know", " anything", " about", " you", "."]
    )
    rig.chat.enqueue(["You", "'re", " Maya", "!"])
    shown, rejected = await reply(rig, "tell me about myself", session="s2")
    assert rejected == ["forgot"] and shown == "You're Maya!"


async def test_when_every_attempt_forgets_the_note_the_note_is_said(rig: Rig) -> None:
    ns = Namespace("u1", "companion")
    cat = "The user's cat is called Pickle."
    rig.long_term.create(ns, rig.long_term.new_memory(cat, category="relationship"))
    for _ in range(3):
        rig.chat.enqueue(["I", "'m", " sorry", ",", " I", " don", "'t", " know", " your",
                          " cat", "'s", " name", "."])  # fmt: skip
    shown, rejected = await reply(rig, "what is my cat called again?")
    assert rejected == ["forgot", "forgot", "forgot"]
    assert shown == recall_reminder("what is my cat called again?", [cat])
    assert shown == "I do remember what you told me: Your cat is called Pickle."
    assert recall_reminder("我的猫叫什么？", [cat]).startswith("我记得你说过：")


async def test_a_last_echo_to_a_question_says_the_note_that_answers_not_a_health_note(
    rig: Rig,
) -> None:
    # bench.reply_quality's probe sessions on d732007, seed 2: three failed attempts at the
    # hamster question ended in "Hold on, I remember this: You are lactose intolerant…".
    ns = Namespace("u1", "companion")
    hamster = "The user has a hamster called Tudou."
    lactose = "The user is lactose intolerant."
    rig.long_term.create(ns, rig.long_term.new_memory(hamster, category="relationship"))
    rig.long_term.create(ns, rig.long_term.new_memory(lactose, category="health", importance=0.9))
    message = "what is my hamster called again?"
    echo = ["What", " is", " my", " hamster", " called", " again", "?"]
    for _ in range(3):
        rig.chat.enqueue(list(echo))
    shown, rejected = await reply(rig, message)
    # A question may be said before its answer (``COPY_OWN``): one said back whole is held
    # to its end, where it has not named the hamster ("forgot"); the last attempt's echo.
    assert rejected == ["forgot", "forgot", "echo"]
    assert shown == "I do remember what you told me: You have a hamster called Tudou."


async def test_a_sentence_of_the_persona_card_is_left_out_of_the_reply(rig: Rig) -> None:
    ns = Namespace("u1", "companion")
    knee = "The user has a torn meniscus in their right knee."
    rig.long_term.create(ns, rig.long_term.new_memory(knee, category="health", importance=0.95))
    card = rig.engine.personas.resolve("companion").system_prompt
    recited = next(line for line in card.split("\n") if "Say back the heart" in line)
    rig.chat.enqueue(["Mind", " your", " knee", " with", " those", " squats", ".", " ", recited])
    shown, rejected = await reply(rig, "heavy squats three times a week, should I push through?")
    assert rejected == [] and shown.strip() == "Mind your knee with those squats."


def test_the_request_to_go_on_is_not_the_one_said_last() -> None:
    first = lost_thread("I had a rough day")
    second = lost_thread("I had a rough day", [first])
    assert second != first and lost_thread("I had a rough day", [second]) == first
    assert lost_thread("我今天好累", [lost_thread("我今天好累")]) != lost_thread("我今天好累")
    # A long evening's stand-ins never say one again while another is unsaid (the long
    # session's Chinese stretch said one twice), then the one said longest ago.
    for message in ("I had a rough day", "我今天好累", "do you remember my cat?", "我叫什么？"):
        said: list[str] = []
        for _ in range(4):
            said.append(lost_thread(message, ["Other reply.", *said]))
        assert len(set(said)) == 4
        assert lost_thread(message, said) == said[0]


async def test_the_guard_compares_with_replies_the_prompt_no_longer_shows(rig: Rig) -> None:
    # A reply said early in the session, then enough turns for it to leave the window.
    rig.chat.enqueue(["That", "'s", " great", " to", " hear", "!", " Tell", " me", " more", "."])
    await reply(rig, "I finally finished the quarterly report today")
    for i in range(12):
        rig.chat.enqueue([f"Reply number {i} about thing {i}."])
        await reply(rig, f"message number {i} with some words {i}")
    rig.chat.enqueue(
        ["That", "'s", " great", " to", " hear", "!", " Say", " hi", " to", " Rosie", "."]
    )
    async with rig.engine.turn(
        TurnRequest(user_id="u1", text="my flatmate Rosie just came home", session_id="s1")
    ) as turn:
        rig.hippocampus.enqueue([QUIET])
        shown = "".join([piece async for piece in turn.stream()])
    await turn.merged  # type: ignore[misc]
    assert turn.session_replies[0].startswith("That's great to hear! Tell me more.")
    assert shown.strip() == "Say hi to Rosie."


async def test_a_reply_cut_by_the_cap_ends_at_its_last_whole_sentence(rig: Rig) -> None:
    # The 1.5B's "hi! I'm Noor…" reply ran into the cap at "…Do you have a" and was shown
    # so (bench.reply_quality's messages).
    cut = [
        "Hi", " Noor", "!", " What", " a", " lovely", " name", ".", " I", " love", " cats",
        " too", ".", " Do", " you", " have", " a", Finish("length"),
    ]  # fmt: skip
    rig.chat.enqueue(cut)
    # The cap 45 puts the last 40 pieces (all but the first four) a sentence at a time.
    shown, rejected = await reply(rig, "hi! I'm Noor and I adore cats", max_tokens=45)
    assert rejected == []
    assert shown == "Hi Noor! What a lovely name. I love cats too."
    assert rig.sessions.transcript("s1")[-1].content == shown
    # A reply that ends by itself is shown to its end, a last phrase without a full stop too.
    rig.chat.enqueue(["Sleep", " well", ",", " Noor", ".", " Talk", " soon", Finish("stop")])
    shown, _ = await reply(rig, "goodnight, off to bed", max_tokens=45)
    assert shown == "Sleep well, Noor. Talk soon"


def test_to_a_question_about_what_they_said_the_last_resort_is_i_dont_remember() -> None:
    # The long session, seed 4: "and who's getting married in June, do you remember?", no
    # note about the wedding, two help-desk attempts, then "Sorry, I lost my train of
    # thought there." The honest answer is that it does not remember.
    asked = lost_thread("and who's getting married in June, do you remember?")
    assert "don't remember" in asked and asked != lost_thread("I had a rough day")
    assert "不记得" in lost_thread("你还记得我妹妹什么时候结婚吗？")
    assert lost_thread("what's your favourite time of night?") == lost_thread("night")


async def test_a_message_that_changes_language_is_asked_for_in_its_language(rig: Rig) -> None:
    rig.chat.enqueue(["Oh", ",", " a", " long", " day", "!", " What", " happened", "?"])
    await reply(rig, "hey, long day at the studio")
    rig.chat.enqueue(["八", "十", "三", "岁", "还", "这", "么", "硬", "朗", "，", "真", "好", "！"])
    shown, rejected = await reply(rig, "我奶奶今年八十三岁了，身体还挺好的")
    assert rejected == [] and shown == "八十三岁还这么硬朗，真好！"
    # Said just before the message, never after it (the 1.5B answered a line after it).
    *_, lead, message = rig.chat.calls[-1].messages
    assert lead["role"] == "system" and "请用中文回答" in lead["content"]
    assert message == {"role": "user", "content": "我奶奶今年八十三岁了，身体还挺好的"}
    # The same language again: nothing said before the first attempt.
    rig.chat.enqueue(["她", "每", "天", "都", "锻", "炼", "吗", "？"])
    await reply(rig, "她每天早上都去公园跳广场舞")
    assert rig.chat.calls[-1].messages[-1]["role"] == "user"


async def test_a_reply_that_says_an_earlier_message_back_is_asked_again(rig: Rig) -> None:
    # The guard is given the prompt's earlier user messages: the long session's Chinese
    # stretch said the message before back to the next two.
    rig.chat.enqueue(["真", "好", "！", "她", "身", "体", "怎", "么", "样", "？"])
    await reply(rig, "我奶奶每天早上都去公园跳广场舞")
    said_back = ["你", "的", "奶", "奶", "说", *"我奶奶每天早上都去公园跳广场舞", "。"]
    rig.chat.enqueue(said_back)
    rig.chat.enqueue(["她", "想", "你", "了", "吧", "？"])
    shown, rejected = await reply(rig, "上次打电话她一直问我什么时候回家")
    assert rejected == ["echo"] and shown == "她想你了吧？"


async def test_a_last_attempt_that_says_a_chinese_message_back_word_for_word_is_not_shown(
    rig: Rig,
) -> None:
    # The messages part's ongoing session: two echo retries, then the message itself.
    rig.chat.enqueue(["Sounds", " lovely", "."])
    await reply(rig, "it is raining today and I love it")
    message = "室友又把厨房搞得一团糟，碗都堆到水槽外面了，我真的要崩溃了"
    echo = [*"室友把厨房搞得一团糟", "，", "太", "糟", "了", "。"]
    rig.chat.enqueue(echo)
    rig.chat.enqueue(echo)
    said_back = "室友 又 把 厨房 搞 得 一团 糟 ， 碗 都 堆 到 水槽 外面 了 ， 我 真的 要 崩溃 了 。"
    rig.chat.enqueue(said_back.split())
    shown, rejected = await reply(rig, message)
    assert rejected == ["echo", "echo", "echo"]
    assert shown == lost_thread(message, ["Sounds lovely."])


async def test_the_attempt_after_an_echo_is_biased_against_the_messages_words(rig: Rig) -> None:
    vocabulary: dict[str, int] = {}
    rig.chat.token_ids = lambda text: [vocabulary.setdefault(text, len(vocabulary))]  # type: ignore[attr-defined]
    message = "I'll tell you how Thursday goes"
    rig.chat.enqueue(["I", "'ll", " tell", " you", " how", " Thursday", " goes", "."])
    rig.chat.enqueue(["Fingers", " crossed", "!", " Text", " me", " after", "?"])
    # The client's own bias for a token wins over the guard's.
    own = {"0": 2.0}  # " tell", the first word the bias reads
    shown, rejected = await reply(rig, message, sampling=Sampling(logit_bias=own))
    assert rejected == ["echo"] and shown == "Fingers crossed! Text me after?"
    first, second = rig.chat.calls[-2:]
    assert first.sampling is not None and first.sampling.logit_bias == own
    assert second.sampling is not None and second.sampling.logit_bias is not None
    biased = second.sampling.logit_bias
    assert biased["0"] == 2.0 and biased[str(vocabulary[" Thursday"])] < 0
    assert " you" not in vocabulary and " how" not in vocabulary  # function words


async def test_a_retry_for_another_reason_is_not_biased(rig: Rig) -> None:
    rig.chat.token_ids = lambda text: [ord(c) for c in text]  # type: ignore[attr-defined]
    rig.chat.enqueue(["I'm", " sorry", ",", " but", " I", " can't", " assist", " with", " that"])
    rig.chat.enqueue(["Why", " did", " the", " cat", " sit", " on", " the", " laptop", "?"])
    _, rejected = await reply(rig, "tell me a joke about cats")
    assert rejected == ["refusal"]
    assert all(call.sampling is None for call in rig.chat.calls[-2:])


async def test_after_three_echoes_of_a_statement_no_note_is_said(rig: Rig) -> None:
    # The long session, seed 1: "I do remember what you told me: Your interview next
    # Wednesday…" to "thanks, that's fair. I'll wait until after the interview", and the
    # cat note to a poem request. A note is said back to a question only.
    ns = Namespace("u1", "companion")
    cat = "The user's cat Pickle thinks she owns the house."
    rig.long_term.create(ns, rig.long_term.new_memory(cat, category="relationship"))
    for message in (
        "my cat Pickle thinks she owns the house",
        "can you write me a short poem about my cat Pickle who thinks she owns the house?",
    ):
        rig.hippocampus.enqueue([QUIET])
        for _ in range(3):
            rig.chat.enqueue(list(pieces_of(message)))
        request = TurnRequest(user_id="u1", text=message, session_id=f"s-{len(message)}")
        async with rig.engine.turn(request) as turn:
            shown = "".join([piece async for piece in turn.stream()])
        await turn.merged  # type: ignore[misc]
        assert turn.answer_notes == (cat,)  # the note was there to say
        assert turn.rejected == ["echo", "echo", "echo"]
        assert shown == lost_thread(message)
    # ... and to a question the note answers, it is said
    for _ in range(3):
        rig.chat.enqueue(list(pieces_of("what does my cat Pickle think she owns")))
    shown, rejected = await reply(rig, "what does my cat Pickle think she owns?", session="s3")
    assert rejected == ["echo", "echo", "echo"]
    assert shown == recall_reminder("what does my cat Pickle think she owns?", [cat])


def pieces_of(text: str) -> list[str]:
    return re.findall(r"\s*[\w']+|\s*[^\w\s]", text)
