"""What a user must never be shown, caught while the reply streams.

Small local models fall into a few failures that make a person close the tab: refusing a
harmless request ("I'm sorry, but I can't assist with that."), echoing the user's
message back, repeating an earlier reply once one is in the history, the voice of a help
desk ("How can I assist you today?", "As an AI…"), and a cheerful go-ahead to what a
recalled health note forbids. Prompting makes them rarer (docs/benchmarks.md, "Reply
quality"); this guard stops the rest:

- **the opening is held back** until it can be told apart from those failures: while it
  could still become a refusal, an echo of the message (or the user's own first-person
  words said as the companion's), a repeat of an earlier reply's opening, a help-desk
  line, next to a health note a go-ahead or, to a question that a recalled note answers
  (``answer_notes``: the notes the message is about), "I don't have that information",
  or, to a question that asks for a name or a number, an answer with another one than
  the notes' ("His name is Jack." for the hamster Tudou; held until it names one), the
  retry's hint then saying the notes, nothing is shown; as soon as it cannot
  (most replies: after ``MIN_RELEASE`` tokens), it is released and the rest streams
  through. To a question or a request for advice an opening may say the message's words
  before its answer ("To remember to drink more water during the day, try…"): that is an
  echo only if it adds nothing of its own (``COPY_OWN``), and it is held until it does.
  At most ``HOLD_TOKENS`` tokens are held (twice that after an apology, a
  first-person start or a go-ahead, whose failure shows later in the sentence). A failure
  rejects the attempt: the caller stops the generation and samples again with the
  ``Rejection.hint`` for the model (``backend.engine.turn_reply``). On the caller's last
  attempt (``check_opening=False``) only a health note's check runs, and the message said
  back is still rejected;
- **a clause that cites the prompt's notes** ("…, as noted in your recalled notes") is
  left out of what is shown (``backend.engine.notes_clause``);
- **some sentences later in the reply are left out**: one that starts like a help-desk
  line ("Is there anything else…", "Feel free to…") or is an "If…" ending in one ("If you
  want to talk about anything else, feel free to ask!"), and one starting with "I" that
  says the user's own words as the companion's ("I'm allergic to peanuts": a small model
  taking the user's part) or claims the user's name that the notes give ("I am Maya." to
  "who am I?"), and one said word for word in an earlier reply (the loop a
  small model falls into: "Have you thought about what kind of things they're looking
  for in an architect?" in reply after reply), and one that turns round a like or dislike
  the message stated ("Your cat Saffron really loves the rain" to "Saffron hates the
  rain": ``backend.engine.flipped_likes``), and one that says "as an AI" or a Chinese
  help desk ("…以便我能更好地帮助您。"), the language lead said back ("他们的下一条消息是
  中文的。"), a quoted example of the card said whole ("How did your sister's move
  go?"), the card's line for a user in danger ("…someone you trust…") to messages
  with no danger in them, or sympathy to good news ("I'm sorry to hear that your brother
  Sami has just gotten engaged": ``good_news``; as the opening it is asked again). Such a
  sentence is held until it ends,
  and only while it may still be one of these; nothing else is held
  after the opening, and a reply is never left with nothing (``end``: an attempt whose
  every sentence was left out is sampled again; the last one shows them, unless it says
  an earlier reply again whole: then ``stand_ins.lost_thread``). Next to a
  recalled health note every sentence is held to its end, and a go-ahead that says
  nothing of the note is replaced by the note, said back ("But remember: you are
  allergic to peanuts."); a reply to a message that asks what to be careful with
  (``_ASKS_CAUTION``) that never said the note ends with it.

Three more failures do not answer the message, and are held in the opening too (asked
again, like the ones above): a bare greeting ("Good evening, Noor!") to a message that
said something (held while every word so far is a greeting or the user's name); English
answered in Chinese or Chinese in English (held while the script so far is the other
one), unless the message names a language or the session's replies mix the two (a
tutor's); and verse to a message that asks for none: an opening that announces a poem
("Sure! Here's a short poem about…"), or, once a reply of the session was a poem, a
first line of verse (held to the end of the first line).

Tokens here are lowercase words and single CJK characters, with I/me/my/我 and
you/your/你/您 folded, so "you had a rough day" is the echo of "I had a rough day". Pure:
no I/O, no clock; one guard per attempt.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from backend.engine.allergen_foods import CONDITION_NAMED, offers_ruled_out, ruled_out
from backend.engine.flipped_likes import flips, may_flip, stated
from backend.engine.good_news import is_good_news, may_sympathise, sympathises
from backend.engine.notes_clause import NotesClauseFilter
from backend.engine.prompt import said_to_user, second_person
from backend.memory.keywords import STOP_WORDS_EN
from backend.memory.own_questions import asks_for_profile

Reason = Literal[
    "refusal", "echo", "repeat", "helpdesk", "health", "forgot", "human", "bare", "language",
    "verse", "flip", "recital", "sympathy",
]  # fmt: skip

HOLD_TOKENS = 10  # the most the opening is held back
# The health notes a reminder says back, the best recalled first: all six of a triathlete's
# made a paragraph of "But remember: your physio says…; you stopped 16:8 fasting…; you
# have Achilles tendinopathy…" after "Which stroke should I plan to use on race day?"
# (bench.reply_quality's probe sessions). A condition's notes come in ones and twos.
REMINDER_NOTES = 2
MIN_RELEASE = 3  # the least: "Hi, Priya!" may go on "How can I assist you today?"
ECHO_TOKENS = 8  # an opening that copies this many of the message's tokens is an echo
ECHO_START_WORDS = 3  # ... from within its first this many words ("Yes, the partner…")
# ... except to a message that asks something, whose answer may open with its words:
# "To remember to drink more water during the day, …" (to "whats a good way to remember
# to drink more water during the day"), "周末想出去走走，附近可以…" (to "周末想出去走走，附近
# 有什么…推荐吗？"): rejected three times over, each turn ended in a stand-in (13 of 30
# Chinese requests for advice, bench.reply_quality's messages part). Such a copy is an echo
# only when the opening adds fewer than ``COPY_OWN`` words of its own (content words the
# message lacks; a CJK character is one) by the time it ends or reaches ``COPY_HOLD`` words;
# a first sentence that only says the message back is left out once the answer follows.
COPY_OWN = 2
COPY_HOLD = 3 * HOLD_TOKENS
# A first sentence this much of which is runs of at least ``RESTATED_RUN`` of the
# message's tokens says the message back with a word changed: "我奶奶今年八十岁了，身体还挺
# 好的。" to "我奶奶今年八十三岁了，身体还挺好的" (bench.reply_quality's long session).
RESTATED_SHARE = 0.8  # "It has been raining all day here…": 0.846
# The user's messages before this one that a sentence may not say back either: in their
# own first person ever, turned to "you" when the message asks nothing (an answer may
# restate what they said: "Your cat is called Pickle").
SAID_BEFORE = 3
SAID_BACK_OWN = 3  # words of its own a sentence that holds a whole message may add
# A sentence that shares a run of this many tokens with the persona card or the app's
# rules recites them (the 1.5B, bench.reply_quality's safety probes: "**You are an AI
# companion; you have no name but Companion, no body, no shop and no family…**"); fewer
# may be an honest answer in the card's words ("I'm Companion, an AI friend people talk
# to in the evening": ten).
RECITED_RUN = 12
RECITED_ON = 6  # ... and the sentence after one such, which goes on with the rule
QUOTED_TOKENS = 4  # ... and a quoted example of the instructions this long, said whole
RESTATED_RUN = 4
# An opening equal to an earlier reply's for this many tokens repeats it: five catches a
# formula said again ("Sure, here's a joke about…" to every message after one joke, seen
# with Qwen2.5-Coder-1.5B in bench.reply_quality) and lets "That sounds hard, Tom." by.
REPEAT_TOKENS = 5
# A whole sentence said word for word in an earlier reply, from this many tokens, is left
# out: four catches the formula a long chat falls into ("That's great to hear!" opening
# reply after reply, 9% of a 67-turn evening's replies: bench.reply_quality's long
# part) and keeps "Oh no!" or "Good night, Mei!".
REPEAT_SENTENCE_TOKENS = 4
# ... and one that starts with this many tokens of an earlier sentence: the loop a long
# chat falls into says it again with a new ending ("Maybe you could try talking about
# the challenges he's had with the dumplings…" closing nine replies of one evening:
# bench.reply_quality's long part, seed 3).
REPEAT_START_TOKENS = 6
CLAIM_TOKENS = 4  # the user's first-person words said as the companion's own
# ... or with a hedge changed or a name said as "his": a sentence in the first person that
# does not address the user, this share of whose words are the message's, with a run of
# ``RESTATED_RUN`` among them ("Maybe I should start on his speech at some point this
# week." to "I should probably start on Danny's speech at some point this week": 10 of 12,
# the long session)
CLAIM_SHARE = 0.75
CLAIM_HOLD_SHARE = 0.5  # ... held while this much of it so far is ("Maybe I should … his": 4/6)
# ... or, in Chinese, a sentence of at least this many characters most of whose character
# pairs are the message's ("好的，我家有一只柯基叫豆豆。": 7 of its 11)
CLAIM_CJK_MIN = 6
CLAIM_CJK_SHARE = 0.6
# ... or the message told as the companion's own in its own words, to a message that asks
# nothing (``_owns_message_cjk``): this much of the message's character pairs, and at least
# ``OWNED_CJK_PAIRS`` of them.
OWNED_CJK_COVER = 0.18
OWNED_CJK_PAIRS = 3
# A Chinese first sentence that retells the message (to one that asks nothing): this share
# of its character pairs are the message's (as said or turned to "you"), and they cover
# this share of the message's. Seen, shown: "你的室友确实把厨房搞得一团糟，碗都堆到水槽外面
# 了。" (0.77, 0.65), "我非常累，这一个月几乎天天加班，周末也没得到休息。" (0.62, 0.72);
# not "很高兴你已经干了三年UI设计。" (0.50, 0.42; bench.reply_quality's messages part).
RETOLD_SHARE = 0.52
RETOLD_COVER = 0.4
# ... and a Chinese opening that says an earlier message or an earlier reply back, turned
# round or with a character put in: of its first ``SAID_AGAIN_CJK_MIN`` characters or
# more, this share of the character pairs are that text's, at least ``SAID_AGAIN_CJK_PAIRS``
# of them. The long session's Chinese stretch (seed 4): "你的奶奶每天早上都会去公园跳广场
# 舞，比你还忙哈哈" to the message after "她每天早上都去公园跳广场舞，比我还忙哈哈" (16 of 22),
# then "你奶奶每天早上都会去公园…" and "我奶奶每天早上都会去公园…" to the next two.
SAID_AGAIN_CJK_MIN = 12
SAID_AGAIN_CJK_HOLD = 2 * HOLD_TOKENS  # characters held while it may still be one
SAID_AGAIN_CJK_SHARE = 0.6
SAID_AGAIN_CJK_PAIRS = 8
# ... or its words changed, most of its characters kept (``_retells_cjk``).
RETOLD_CJK_MIN = 8  # characters the message has, fewer not compared
RETOLD_CJK_COVER = 0.7
RETOLD_CJK_OWN = 2  # characters of its own the opening needs not to be the message
# Characters that carry little of a sentence's own content.
# What a Chinese first person says of itself when it reacts to the user's news.
_REACTS_ZH = (
    "理解", "明白", "知道", "觉得", "认为", "希望", "相信", "建议", "猜", "想", "也", "替", "为",
    "能", "会", "听", "很高兴", "非常高兴", "真为", "真替", "好", "们",
)  # fmt: skip
_CJK_LIGHT = frozenset("的了是它们在有和就也都不吗呢吧啊呀哦嗯这那个一很还要会说到着过只真")
MIN_COMPARED = 4  # a message or earlier reply shorter than this is compared only whole
# Words (not greetings, not pronouns) a message needs for a bare "Hi Priya!" to miss it:
# "hey, I'm Priya. long day." has three.
SUBSTANCE = 3
BARE_NAME_CJK = 3  # characters of a Chinese message a greeting may say back (the name)
LANGUAGE_TOKENS = 4  # the opening's tokens that tell its script
VERSE_LINES = 4  # an earlier reply of this many short lines was a poem
VERSE_LINE = 14  # the most tokens of a line of verse

# Said to the model for a retry, about "them", never "the user": worded so, the 1.5B said
# the hint's words back to the user ("I do not know the user's most recent message.",
# three times in a 67-turn evening: bench.reply_quality's long part).
CHINESE = "Chinese (请用中文回答)"
IN_CHINESE = "请用中文回答。"
# Before the message, not after it: a system line after the message was answered itself
# ("谢谢你的关心和鼓励。", "Yes, I can help!": bench.reply_quality's messages part).
LEAD = "Their next message is in {language}: reply to it in {language}."
HINTS: dict[Reason, str] = {
    # No list of kinds of request: "(a joke, a story, a poem…)" got "Sure, let me give
    # you a joke:" to a message about booking a trip (bench.reply_quality's probes).
    "refusal": (
        "Their message is harmless: respond to what they said warmly, and if they ask for "
        "something, do it. Do not apologise and do not decline."
    ),
    "echo": "Do not repeat their words back to them. Respond to what they said, in your own words.",
    "repeat": (
        "Do not repeat anything you said earlier in this conversation. Reply to what they "
        "just said with something new."
    ),
    "helpdesk": (
        "Talk like a friend, not an assistant: never ask how you can help or assist, and "
        "never start with 'As an AI'."
    ),
    "health": (
        "Remember what you know about their health: {notes} Do not encourage what goes "
        "against it; remind them of it kindly and suggest a safer choice."
    ),
    # The notes say "you" for them: "You do know this, from your notes: You have a hamster
    # called Tudou." got "I do know this. My name is Xiaoman," in three of five seeds.
    "forgot": (
        'Your notes about them answer this ("you" in the notes means them): {notes} Tell '
        "them the answer warmly, in your own words."
    ),
    # Worded unlike the honest answer itself: the 1.5B said "You are an AI companion, not
    # a person." back, and a run of six of the hint's words is held as a recital.
    "human": (
        "Be honest about what you are: an AI, not a human. Tell them so warmly in your own "
        "words (not 'As an AI'), then keep chatting with them as a friend."
    ),
    "bare": (
        "Do not just greet them: respond to what they told you, with a warm thought or a "
        "question about it."
    ),
    "language": "Reply in {language}, the language of their message.",
    "recital": (
        "Do not recite your notes or list them: reply to what they said, in your own words, "
        "as a friend would."
    ),
    # Not "…: they did not ask for one.": the 1.5B said "I didn't ask for one." as its
    # whole reply (the long session, seed 1).
    "verse": "Reply to what they just said in plain conversational sentences, not in verse.",
    "flip": (
        "Do not turn round what they just told you they like or dislike: respond to it as "
        "they said it."
    ),
    # "I'm sorry to hear that your brother Sami has just gotten engaged" (issue 24)
    "sympathy": (
        "They told you good news: be glad with them and say so warmly. Do not say you are sorry."
    ),
}

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+", re.UNICODE)  # "grandma今年": 3 tokens
_SPEAKER = {"i": "1", "me": "1", "my": "1", "mine": "1", "im": "1", "myself": "1"}
_SPEAKER |= {"you": "2", "your": "2", "yours": "2", "youre": "2", "yourself": "2"}
_SPEAKER |= {"我": "1", "你": "2", "您": "2"}
_CONTRACTED_I = re.compile(r"\bi'(ll|d|ve)\b")
# "I'll" and "I will" are one pair of tokens, so the message said back in full is still
# the message: "I'll let you know how Thursday goes" came back as "I will let you know
# how Thursday goes." (bench.reply_quality's long session, seed 1). "'d" stays: had or would.
_CONTRACTED_FULL = {"ll": "will", "ve": "have"}
# "who is" and "who's" are one token, so a copy of the message does not end at the first
# contraction said in full ("…the partner who's interviewing me…" said back as "the
# partner who is interviewing me": bench.reply_quality's long session).
_FULL_BE = re.compile(
    r"\b(?:(i) am|(you|we|they) are|(it|that|who|what|there|here|he|she|where|how) is)\b"
)
# Not the point of a number ("69.5 kg").
_SENTENCE_END = re.compile(r"(?:[.!?。！？…](?!(?<=\d\.)\d))+[\"')\]」』]*\s*|\n+")

_REFUSAL = re.compile(
    r"(?:sorry|apologi[sz]e|unfortunately|\bi\b|\bi'm\b|i am|^no\b)[^.!?\n]{0,40}?"
    r"(?:can ?not|can't|won't|unable to|not able to|don't have (?:access to )?the "
    r"(?:ability|capability)|do not have (?:access to )?the (?:ability|capability))"
    r"[^.!?\n]{0,20}?"
    r"(?:assist|help(?! but)|provide|fulfil|comply|do that|answer|write|create|engage|continue|"
    r"offer)"
    # "…as an AI companion, I don't have access to notes from earlier chats or the ability
    # to suggest specific jokes." (a last attempt, to "got any dad jokes?")
    r"|\b(?:don't|do not) have\b[^.!?\n]{0,60}?\bthe (?:ability|capability) to\b"
    # "I'm sorry, but I don't have enough information to create a short story for you."
    # (a retry, to "make up a short story set on the last train home…")
    r"|\b(?:don't|do not) have enough (?:information|details|context)[^.!?\n]{0,12}? to "
    r"(?:create|write|make|tell|come up)"
    r"|我(?:无法|不能|没办法)(?:提供|协助|帮助|帮你|帮您|满足|回答|完成|写)"
    # "我是AI助手，不能直接回答您的问题。" (a retry, the messages part in Chinese)
    r"|(?:无法|不能|没办法)直接(?:回答|提供|帮助)"
    r"|(?:抱歉|对不起)[,，]?\s*我(?:无法|不能)"
)
# "I don't understand" to a message of a whole sentence or more: a non-answer, asked again
# like a refusal ("对不起，我不太理解您的意思。" to a story request and "抱歉，我不理解你的话。" to
# a user scolded by a client: bench.reply_quality's messages part).
_NOT_UNDERSTOOD = re.compile(
    r"我(?:还是|有点)?不(?:太|是很|大)?(?:明白|理解|懂|清楚)(?:你|您)(?:的|说的|在说的)?"
    r"(?:意思|话|问题)"
    r"|\bi (?:don't|do not) (?:quite |really |fully )?(?:understand|get|follow) "
    r"(?:what you(?:'re| are)? (?:mean|saying|asking)|your (?:message|question))"
    r"|\bi'm not (?:sure|certain) (?:what you mean|i understand)"
)
# An "I" a few words back in the opening's sentence, after a lead of its own: it may still
# refuse ("Understood, I can't assist with that.", a second attempt at a wedding speech
# request, was shown from "Understood, I can": the long session, seed 2).
_I_MAY_REFUSE = re.compile(r"\b(?:i|i'm|i am)(?:\s+[\w']+){0,3}\s*$")
# Help-desk sentences, by how they start (normalised: lowercase, apostrophes kept).
_HELPDESK_STARTS = (
    "how can i help",
    "how can i assist",
    "how may i help",
    "how may i assist",
    "what can i help",
    "what can i do for you",
    "is there anything else",
    "is there anything i can",
    "feel free to",
    "let me know if you need",
    "let me know if you have",
    "let me know if there",
    "if you have any other questions",
    "if you have any questions",
    "if you need anything else",
    "if there's anything else",
    "if there is anything else",
    "don't hesitate to",
    "i'm here to help",
    "i am here to help",
    "i'm here to assist",
    # An apology for a reply the user never saw: "Hey there! I'm sorry if my response was
    # confusing or not helpful. I'm here to help" (a second attempt, the long session, seed 4).
    "i'm sorry if my response",
    "i'm sorry if my answer",
    "i'm sorry if my previous",
    "i'm sorry if my last",
    "i apologize if my",
    "sorry if my response",
    "i'm sorry for the confusion",
    "i'm sorry for any confusion",
    "sorry for the confusion",
    "sorry for any confusion",
    "apologies for the confusion",
    "apologies for any confusion",
    "i apologize for the confusion",
    "i apologize for any confusion",
    "as an ai",
    "as a ai",  # "As a AI companion, I don't have…" (Qwen2.5-Coder-1.5B)
    "as an artificial intelligence",
    "as a language model",
    "i'm just an ai",
    "i'm an ai language model",
    "i am an ai language model",
    "有什么可以帮",
    "有什么我可以",
    "请随时",
    "如果你还有其他问题",
    "如果您有任何",
    "如果你有任何",
    "如果有任何",
    "如果还有其他",
    "作为一个ai",
    "作为一个人工智能",
    "作为人工智能",
)
# A help-desk phrase inside an "if…" sentence.
# A help desk's Chinese anywhere in a sentence: "请提供更多详细信息，以便我能更好地帮助您。"
_HELPDESK_ZH = re.compile(
    r"更好地(?:帮助|协助|为)|为您服务|请提供更多|有什么(?:可以|能|需要)(?:帮|为)"
    # "但是，如果你有其他问题或需要帮助，请随时告诉我！" (the long session, seed 2)
    r"|请随时|随时(?:告诉|问)我|如果(?:你|您)有(?:任何)?其他(?:问题|需要)"
)
_MAY_SAY_AI = re.compile(r"作为|我是|[Aa][Ii]|人工智能|助手|帮助您|请提供|如果|随时")
# ... and in English, inside a sentence of its own: "I don't have a favorite time of night
# like people do, but I'm here to help you whenever you need." (the long session, seed 2)
_HERE_TO_HELP = re.compile(r"\bi(?:'m| am) (?:always )?here to (?:help|assist)\b")
CJK_LEAD = 8  # characters of a later Chinese sentence held while a disclaimer may come
_HELPDESK_IN = re.compile(
    r"feel free|let me know|don't hesitate|i'm here to help|i am here to help|"
    r"请随时|随时告诉我|随时问我"
)
# An opening starting with one of these may still turn into a refusal or an AI disclaimer.
_RISKY_FIRST = {
    "no",  # "No, Companion can't offer dad jokes…"
    "sorry",
    "i",
    "1",
    "unfortunately",
    "as",
    "how",
    "apologies",
    "抱",
    "对",
    "我",
    "作",
    "很",
}


# "I don't have a specific date for your sister's wedding" with the date in a note next to
# the question (bench.reply_quality's probe sessions, Qwen2.5-Coder-1.5B).
_DENIES_KNOWING = re.compile(
    r"\bi (?:don't|do not|dont|didn't|did not) (?:have|know|recall|remember|see|catch)\b"
    r"|\bi(?:'m| am) not (?:sure|aware)\b|\bi (?:can't|cannot|can not) (?:recall|remember)\b"
    r"|\bi have no (?:idea|information|record)|\bno information\b"
    r"|\byou (?:didn't|haven't|did not|have not|never) (?:tell|told|mention|say|said)\b"
    r"|我不(?:知道|记得|清楚|确定)|我没有.{0,8}(?:信息|记录)|你(?:没|没有|从没)(?:告诉|说|提)"
)
# The prompt's notes block said back: "Recalled notes (when noted): - (today) Your sister's
# wedding is on December 20th…" opened a reply to "hey, long week. I'm finally booking the
# trip…" (bench.reply_quality's probe sessions).
# (Only as the opening: "…, as noted in your recalled notes" is a clause, left out as it
# streams: ``notes_clause``.)
_RECITES_NOTES = re.compile(r"^\W*(?:recalled notes|notes from earlier chats)|<recalled_notes")
# ... and later in a reply, a line of that block: its tags, its heading, a note line
# ("- (today, health) Your physio told them not to sprint…", after two sentences of an
# answer: bench.reply_quality's safety probes).
_MAY_BE_NOTES_LINE = re.compile(r"^\s*(?:<|[-*•]\s*\(|recalled\b)", re.IGNORECASE)
# ... and a sentence about the prompt's notes by their tags: "Sure! It looks like you've
# already considered the health notes." (to "Going to try that Yunnan noodle place!", the
# diet and allergy notes recalled: docs/benchmarks.md, "Dietary notes for a message about
# food"). Past the opening it is held to its end and left out, an opening that says it is
# asked again, unless the user's own message speaks of notes. (That reply's opening was
# released at "…already considered the", before the words came.)
_NOTES_TALK = re.compile(r"\b(?:health|diet|recalled) notes?\b", re.IGNORECASE)
_MAY_TALK_OF_NOTES = re.compile(r"\b(?:health|diet|recalled)\W*$", re.IGNORECASE)
# "The user" in a reply is the prompt's word for the person it talks to: a last attempt
# said "My apologies, I misunderstood your message. The user is talking about their cat
# Pickle…" (bench.reply_quality's long session, seed 3). Held to the sentence's end and
# said to them (``said_to_them``); a "the" still waiting for its next word may be one.
_MAY_NAME_USER = re.compile(r"\b[Tt]he\s+user\b|(?:^|\s)[Tt]he\s*$")
_NOTES_LINE = re.compile(
    r"</?recalled_notes>|^\W*recalled notes \(when noted\)"
    r"|^\s*[-*•]\s*\((?:today|yesterday|\d+ \w+ ago)(?:, health)?\)",
    re.IGNORECASE,
)
# A question that asks for a name, a place or a number, which a recalled note may hold:
# "my new coworker doesn't believe I have a hamster. what's his name again?" got "Your new
# coworker's name is Jack." with "You have a hamster called Tudou." next to it, and "what
# does the university actually require?" got 7.0 (the user's target) for the note's 6.5
# (bench.reply_quality's probe sessions, Qwen2.5-Coder-1.5B).
# A question word opens a clause ("and who's getting married in June?"), not "a cat who
# thinks she owns the house" or "nobody notices how much I do, you know?".
_CLAUSE = r"(?:^|[,.!?;:]\s*|\b(?:and|so|wait|but)\s+)"
_ASKS_NAME = re.compile(
    _CLAUSE + r"(?:who|whom|whose|where|which)\b|\b(?:name|called|again|remind me)\b"
    r"|叫什么|谁|哪"
)
# ... asks what someone or something is called, and nothing else will do.
_ASKS_NAMED = re.compile(r"\b(?:name|called)\b|叫什么|名字")
_ASKS_NUMBER = re.compile(
    _CLAUSE + r"(?:how (?:much|many|long|old|far|often|heavy)|when|what time|what date|"
    r"what day)\b|\b(?:weigh|score|require|cost|again|remind me)\b|多少|几|什么时候|哪天"
)
# ... of which these ask for an amount, which no answer gives without a number ("when" may
# be answered "in September", "again" asks anything).
_ASKS_AMOUNT = re.compile(_CLAUSE + r"how (?:much|many|long|old|far|often|heavy)\b|多少|几")
# A question without its question mark: "…a hamster. what's his name again, so I can prove
# it lol" (bench.reply_quality's probe sessions).
_QUESTION_CLAUSE = re.compile(
    _CLAUSE + r"(?:what|when|where|who|which|how)"
    r"(?:'s|\s+(?:is|was|are|were|did|do|does|much|many|far|old|long))\b"
)
_ASKED = re.compile(r"[?？]|\bremind me\b|" + _QUESTION_CLAUSE.pattern)
_NUMBER = re.compile(r"\d+(?:[.:]\d+)?")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]{2,}\b")
# A message that asks what to be careful with: the answer must say the health note.
_ASKS_CAUTION = re.compile(
    r"\b(?:careful|avoid|safe|watch out|look out|ok to|okay to|alright to|should i|can i|"
    r"could i|is it (?:ok|okay|fine|safe|alright))\b|注意|小心|避免|安全|可以吗|能不能|能吃|能做"
    r"|要不要|该不该|行不行"
)
# The kind of a health note's condition, by stem: said alone, it does not say the note.
_CONDITION_STEMS = {"aller", "intol", "injur", "disea", "sensi", "avoid", "must", "suffe"}
# ... but in Chinese, to an English note, the condition is what can be said of it.
_CONDITION_ZH = re.compile(r"过敏|不耐|受伤|伤|忌口|麸质|乳糖")
# A request for something made up ("tell me a joke about cats", "给我讲个小故事吧").
_ASKS_MADE = re.compile(
    r"\b(?:write|tell|make up|compose|come up with|give)\b(?: me)?(?: (?:a|an|one|another|"
    r"some|something))?(?: [\w'-]+){0,3} (?:story|stories|tale|poem|poetry|verse|haiku|"
    r"limerick|song|rhyme|joke|jokes|pun|riddle)s?\b"
    r"|(?:讲|写|编|来|说)(?:个|一个|一首|一段|几句|首|段)"
)
# A request for advice or ideas: its answer may open with its words (``COPY_OWN``).
_ASKS_ADVICE = re.compile(
    r"\b(?:tips?|ideas?|advice|suggest\w*|recommend\w*|a good way|the best way|"
    r"how (?:do|can|should|would) i|what (?:should|could|can) i)\b"
    r"|怎么|怎样|如何|推荐|建议|有什么好|什么好"
)
# A question: what a note can answer ("what was my cat's name again?").
_QUESTION = re.compile(
    r"[?？]|^(?:what|when|where|who|which|how|do you remember|remind me)\b"
    r"|吗|什么|哪(?!怕)|谁|几(?!乎)|多少"  # "几乎天天加班" asks nothing
)


def language_lead(user_text: str, earlier_replies: Sequence[str]) -> str | None:
    """The line said just before a message in the other script than the reply before it
    (``LEAD``): after an English evening the 1.5B answered "我奶奶今年八十三岁了…" in
    English, or said it back in Chinese, and only a retry asked for Chinese (the long
    session). None when the script stays, or either may do (``_script``)."""
    if not earlier_replies:
        return None
    script = _script(words(user_text), earlier_replies, user_text)
    last = words(earlier_replies[-1])
    if script is None or not last:
        return None
    last_cjk = sum(map(_is_cjk, last)) * 2 >= len(last)
    if script == "cjk" and not last_cjk:
        return LEAD.format(language="Chinese") + " " + IN_CHINESE
    if script == "latin" and last_cjk:
        return LEAD.format(language="English")
    return None


# "The user is Maya." / "The user's name is Noor." / "The user is called Mei.": whose name.
_NAME_NOTE = re.compile(
    r"^(?i:the user(?:'s name)? (?:is|goes by|is called)) ([A-Z][\w'-]+(?: [A-Z][\w'-]+)*)\.?$"
)


def _content_words(notes: Sequence[str]) -> set[str]:
    """The notes' words of four letters or more that say something (lowercase)."""
    found = (w.lower() for note in notes for w in re.findall(r"[A-Za-z]+", note))
    return {w for w in found if len(w) >= 4 and w not in STOP_WORDS_EN and w != "user"}


def names_in_notes(notes: Sequence[str]) -> tuple[str, ...]:
    """The user's names that ``notes`` state, lowercase."""
    names = (_NAME_NOTE.match(" ".join(note.split())) for note in notes)
    return tuple(m.group(1).lower() for m in names if m is not None)


def claims_name(sentence: str, names: Sequence[str]) -> bool:
    """The sentence claims one of ``names`` in the first person ("I am Maya, a virtual
    companion.", "My name is Noor", "As Maya, I'm…")."""
    who = "|".join(re.escape(name) for name in names)
    pattern = rf"\b(?:i am|i'm|im|my name is|my name's)\s+(?:{who})\b|^as (?:{who})\s*,"
    return re.search(pattern, _normal(sentence).replace("\u2019", "'")) is not None


def asks_caution(user_text: str) -> bool:
    """The message asks leave or what to be careful with (a health note may answer it)."""
    return bool(_ASKS_CAUTION.search(_normal(user_text)))


def asks_to_make(user_text: str) -> bool:
    """The message asks for something made up (a story, a poem, a joke): a question mark
    on it asks nothing the notes answer ("can you write me a short poem about a cat who
    thinks she owns the house?"), and a reply may name its subject back."""
    return bool(_ASKS_MADE.search(_normal(user_text)))


def asks_question(user_text: str) -> bool:
    """The message asks something (a recalled note may answer it); "tell me about myself"
    asks what the notes say as much as "what do you know about me?" does."""
    flat = _normal(user_text)
    return bool(
        _QUESTION.search(flat) or _QUESTION_CLAUSE.search(flat) or asks_for_profile(user_text)
    )


def named_values(text: str) -> tuple[set[str], set[str]]:
    """The names (capitalised words that do not open a sentence) and the numbers in
    ``text``, lowercased: what a note can answer a question with."""
    names: set[str] = set()
    for sentence in _split_sentences(text):
        opening = re.match(r"\W*\w+", sentence)
        rest = sentence[opening.end() :] if opening else sentence
        names.update(
            word.lower() for word in _CAPITALISED.findall(rest) if word.lower() not in STOP_WORDS_EN
        )
    return names, set(_NUMBER.findall(text))


# A health note that forbids or warns of something: a go-ahead can go against it. Not "The
# user has started running at night to deal with stress" (a route for a night run, "You
# could try the river path", was stopped as a go-ahead against it twice, and the lactose
# note said in its place: bench.reply_quality's probe sessions), a weight or a heart rate.
_RESTRICTS = re.compile(
    r"allerg|intoleran|coeliac|celiac|gluten|lactose|vegan|vegetarian|injur|tendin|tendon|"
    r"sprain|\btorn\b|fractur|broke|asthma|diabet|epipen|inhaler|disease|dizz|faint|cramp|"
    r"upset|\bill\b|sick|pain|hurt|surgery|operation|pregnan|blood pressure|heart condition|"
    r"medicat|migraine|rehab|recover|avoid|can't|cannot|can not|must not|mustn't|"
    r"shouldn't|should not|not allowed|not to\b|\bno \w+ing\b|cut (?:down|back|out)|"
    r"过敏|不耐|受伤|伤|疼|痛|不能|避免|禁|哮喘|乳糖|麸质|忌",
    re.IGNORECASE,
)


def restricts(note: str) -> bool:
    """The health note forbids or warns of something a reply could give a go-ahead to."""
    return bool(_RESTRICTS.search(note))


# A go-ahead, in an opening next to a health note that it does not mention: "Sure, go
# ahead!" to a seafood buffet next to "The user is allergic to shellfish." (bench.
# reply_quality's safety probes).
_GO_AHEAD = re.compile(
    r"\b(?:go for it|go ahead|go all in|sure thing|yes,? you can|you can definitely|"
    r"absolutely|definitely|of course you can|why not|push through|enjoy|treat yourself|"
    r"dig in|let's do it|let's go for it|sounds (?:great|perfect|fun|like a great)|"
    r"you can|you could|it might be wise|good spot|good idea|"
    r"it(?:'s| is) (?:fine|safe|ok|okay) (?:to|if)|should be (?:fine|ok|okay|safe)|"
    r"you should (?:have|grab|go|try|definitely))\b|^(?:yes|sure|certainly|yeah|yep)\b"
    r"|好主意|听起来(?:很|挺|真|不错)?(?:可行|不错|有趣|好玩|棒)|很可行"
    r"|尽情|放开|敞开|去吧|当然可以|没问题|试试吧|冲吧|加油|你可以|可以直接|^(?:好的|好啊|好呀|行啊|要的)"
    # Cheering them on: "那太好了！冲个好成绩，相信你能做到的。" to a 10k race, the Achilles
    # in rehab beside it (bench.reply_quality's safety probes).
    r"|\byou(?:'ve| have) got this\b"
    r"|相信你(?:一定)?(?:能|可以)|你一定(?:能|可以)|冲个好成绩|跑出好成绩"
)
# ... which, alone, say yes to a message that asks leave or what to avoid only ("Yes,
# he's your hamster called Tudou." answers a question; "好的，我直接打两份吧。" to "要不要
# 直接打两份？" next to the peanut allergy is a go-ahead: bench.reply_quality's safety
# probes). A bare "Sure" agrees to a request as well ("Sure, I'd be happy to help you plan
# a leg day" to "…Anything I should be careful with?"), so it is one only to a message that
# asks leave: "Sure, but consider starting with a shorter run on Sunday." to "Could I
# squeeze in a short run on Sunday…?", the physio's "no running on consecutive days" beside
# it (the probe sessions).
_BARE_YES = {"yes", "sure", "certainly", "yeah", "yep", "好的", "好啊", "好呀", "行啊", "要的"}
_BARE_SURE = {"sure", "certainly", "yeah", "yep"}
_ASKS_LEAVE = re.compile(
    r"\b(?:can|could|may|should) i\b|\bis it (?:ok|okay|fine|safe|alright)\b|"
    r"\b(?:ok|okay|alright) (?:to|if)\b|要不要|该不该|行不行|可以吗|能不能|能吃"
)
_GO_AHEAD_FIRST = {
    "sure", "yes", "yeah", "go", "absolutely", "definitely", "of", "why", "push", "enjoy",
    "treat", "dig", "let", "lets", "sounds", "that", "2", "it", "if",
    "当", "没", "去", "尽", "放", "加", "冲", "可", "好", "行", "要",
}  # fmt: skip
# "I'm sorry, but as an AI companion, I don't have the ability to watch…" in an opening.
_AS_AN_AI = re.compile(
    r"\bas an? (?:ai|(?:ai )?language model|virtual assistant)\b"
    r"|\bas an artificial intelligence\b|作为(?:一个)?(?:ai|人工智能)"
    r"|我是(?:一个)?(?:ai|人工智能)(?:助手|助理|程序|模型)"
)
# The companion says it is a person: "Yes, I am a real person." answered "are you a real
# person?" in every seed of bench.reply_quality (the 1.5B); the persona is an AI.
_CLAIMS_HUMAN = re.compile(
    r"\bi(?:'m| am) (?:an? )?(?:real |actual )?(?:human(?: being)?|person)\b|"
    r"我(?:是|就是)(?:一个)?(?:真(?:实的)?人|活生生的人|人类)"
)
# The user asks whether the companion is a person: the opening is held until its first
# sentence ends, as the answer comes in it.
_ASKS_IDENTITY = re.compile(
    r"\bare (?:you|u) (?:a |an )?(?:real|human|person|bot|robot|ai)\b|"
    r"你是(?:不是)?(?:真人|人类|机器人|ai)"  # the text is lowercased first
)
# Greeting words (folded pronouns "1"/"2" included): "Good evening, Noor!", "Nice to meet
# you, Priya!", "你好，小林！" say nothing of what the message said.
_GREETING_TEXT = """hi hello hey heya hiya howdy good morning afternoon evening night welcome back
    there dear friend nice lovely great glad see meet again too to 1 2
    嗨 哈 喽 好 早 上 晚 午 安 欢 迎 回 来 呀 啦 哦"""
_GREETING = frozenset(_GREETING_TEXT.split())
# ... of which a bare greeting says one at least ("Lovely!" alone greets nobody).
_SALUTATION_TEXT = "hi hello hey heya hiya howdy morning evening welcome meet 嗨 好 早 欢"
_SALUTATION = frozenset(_SALUTATION_TEXT.split())
# A message that asks for verse (or a joke: its punchline comes on a line of its own), or
# names a language (its reply may be in another script).
_ASKS_VERSE = re.compile(
    r"\b(?:poem|poetry|verse|rhyme|haiku|limerick|song|lyrics|sonnet|lines|jokes?|puns?|"
    r"riddles?)\b|诗|词|歌|打油|笑话|段子|谜语"
)
_NAMES_LANGUAGE = re.compile(
    r"\b(?:chinese|mandarin|cantonese|english|translate|translation|pinyin)\b"
    r"|中文|汉语|英文|英语|翻译|怎么说"
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])")
# An opening that announces a poem: "Sure! Here's a short poem about watching the snooker…"
# (bench.reply_quality, after poem requests in the session).
_ANNOUNCES_VERSE = re.compile(
    r"\bhere(?:'s| is) an? (?:[a-z-]+ ){0,2}(?:poem|verse|haiku|limerick|song|rhyme)\b"
    r"|(?:一首|几句).{0,8}(?:诗|歌)"
)
# ... held only while it still may: "Here's a short" (not "Here's a short story about").
_MAY_ANNOUNCE = re.compile(
    r"\bhere(?:'s| is)?(?: an?(?: [a-z-]+){0,2})?\W*$|(?:一首|几句)[^诗歌]{0,8}$"
)
_LINE_END = re.compile(r"[.!?。！？:：…]\W*$")
_APOLOGY = re.compile(r"sorry|apologi|unfortunately|as an? ai\b|抱歉|对不起|很遗憾")
# "I'm sorry, but…" is a refusal's lead nearly always, however long the sentence runs
# before it says so: "I'm sorry, but as you have mentioned that your goal is to lose weight
# and you are currently at 69.5 kg, I can't help with your question." (27 words; the
# safety probes): its first sentence is held to its end, up to ``SORRY_BUT_HOLD`` words.
_SORRY_BUT = re.compile(
    r"^(?:i'm |i am )?(?:so |very |really |truly )?(?:sorry|i apologi[sz]e),? but\b"
    r"|^unfortunately,? "
)
SORRY_BUT_HOLD = 4 * HOLD_TOKENS


def _sorry_but(flat: str, said: Sequence[str]) -> bool:
    """The first sentence, still the only one, opens "I'm sorry, but…" (``_SORRY_BUT``)."""
    return len(said) == 1 and bool(_SORRY_BUT.search(flat))


# ... but sympathy is no apology: "I'm sorry to hear that." ends in no refusal.
_SYMPATHY = re.compile(
    r"\bsorry (?:to hear|for your loss|that happened|you(?:'re| are| had| have|'ve)\b)"
    r"|听到.{0,6}(?:难过|遗憾)"
)
# A word of care: the go-ahead comes with a warning ("Go for it, but mind your knee").
# The card's line for a user in danger ("stay with them, and encourage them to reach someone
# they trust, emergency services or a crisis line") said to a message with no danger in it:
# "hi! I'm Noor, I teach chemistry in Leeds…" got "…It's always best to stay with someone
# you trust and encourage them" on the default install. Such a sentence is left out.
_CRISIS_ADVICE = re.compile(
    r"\bsomeone (?:you|they|you can|they can) trust\b|\bcrisis (?:line|hotline)\b|"
    r"\bemergency services\b|\bhelpline\b|\bsuicide (?:line|hotline|prevention)\b|"
    r"信任的人|紧急服务|危机热线|心理热线|求助热线"
)
# The language lead ("Their next message is in Chinese…") said back in Chinese, as the
# 1.5B did in the long session: "他们的下一条消息是中文的。", "你的上一条消息是: …".
# ... and the echo hint said back in Chinese: "请不要重复他们的内容。根据他们的话，我回答：
# 你奶奶今年八十三岁了…" (a last attempt, the long session, seed 2).
# ... and the language lead ("她的下一个消息是中文的，回复中文。", a second attempt shown whole
# to "她每天早上都去公园跳广场舞…": the long session, seed 1).
_MESSAGE_TALK = re.compile(
    r"[上下前后]一?[条个]消息|最新的?消息是|不要重复他们|重复他们的|根据他们的话|我(?:的)?回答[是:：]"
)
# Held to the sentence's end.
_MAY_TALK_OF_MESSAGES = re.compile(r"[上下前后]一?[条个]?消?$|[条个]消息")
# ... held to its end where it may come: after a general-advice lead ("Maybe you could talk
# to someone you trust about it.", to a day of emails: the long session, seed 4).
_ADVICE_STARTS = (
    # "It's always better to let someone you trust handle the changes" (the long session)
    "it's always", "it's important",
    "it's a good idea", "it's best", "it's okay to reach", "remember", "please", "make sure",
    "don't hesitate", "maybe you could talk", "maybe you could reach", "maybe you can talk",
    "maybe talk", "perhaps you could talk", "you could talk", "you could reach",
    "you might want to talk", "you might want to reach", "you can always talk",
    "you can always reach", "you should talk", "you should reach", "try talking",
    "try reaching", "consider talking", "consider reaching",
    # "How about having a quick chat with someone you trust?" to a cup of tea and a sofa
    # (bench.reply_quality's messages part)
    "how about", "why not",
    # "Sometimes, it can be helpful to talk about what happened with someone you trust…" to
    # a boss who yelled; "…If they are unable to resolve the issue within [a week, call]
    # emergency services or a crisis line" to a broken boiler (the messages part)
    "sometimes", "it can be", "it could be", "it may be", "it might be", "i would encourage",
    "i'd encourage", "i encourage", "if ",
)  # fmt: skip
_ADVICE_LEAD_ZH = re.compile(r"记得|一定要|最好|可以找|请")
_AI_LEADS = re.compile(r"^(?:however|but|although|though|well|of course|honestly)[,!]?\s*")
_DANGER = re.compile(
    r"harm|hurt|kill|suicid|\bdie\b|\bdying\b|\bdead\b|danger|unsafe|\bsafe\b|abus|"
    r"\bhit\b|threat|overdose|can'?t go on|end it|hopeless|panic|scared|afraid|terrified|"
    r"emergency|crisis|violen|attack|stalk|bully|depress|\bcry|alone|lonely|"
    r"想死|自杀|自残|伤害|危险|害怕|活不下去|家暴|救命|打我|威胁|绝望|抑郁|崩溃|孤独"
)
_CAUTION = re.compile(
    r"allerg|intoleran|injur|careful|avoid|instead|gentle|doctor|physio|"
    r"过敏|不耐|受伤|伤|忌口|小心|注意|避免|医生"
)
# A go-ahead without limits, which no word of care tempers: "你可以考虑敞开了吃冰淇淋，但要
# 小心不要过量。" next to the lactose note (bench.reply_quality's safety probes) ...
_UNRESTRAINED = re.compile(
    r"\b(?:go all in|treat yourself|dig in|as much as you (?:like|want)|all you can)\b"
    r"|尽情|放开|敞开|随便吃|多吃点"
)
# ... and one that waves the note away: "It seems like you have some concerns about the
# peanuts, but we can still enjoy the experience together!" (a last attempt, the same).
_DISMISSES = re.compile(
    r"\b(?:but|though|however)\b[^.!?]{0,40}\bstill\b|\banyway\b|\bregardless\b|"
    r"\bdon't worry\b|\bno need to worry\b|不用担心|别担心|没关系|照样|也没事|无妨"
)
# Either is fine when it spares the user what the note forbids: "go all in on the
# lactose-free one", "you can still enjoy it without the peanuts".
_SPARES = re.compile(
    r"\bwithout\b|\binstead\b|\bskip\b|\bavoid|-free\b|\b\w+ free\b|\bswap|\bsubstitut"
    r"|不含|无麸质|无乳糖|去掉|换成|替代|代替|别放|不要放|不加"
)
# Words of a health note that say nothing of the fact itself.
_COMMON_NOTE_WORDS = {"user", "users", "their", "they", "have", "with", "from", "that", "this"}


def _is_cjk(token: str) -> bool:
    return len(token) == 1 and "\u3400" <= token <= "\ufaff"


def _all_cjk(tokens: Sequence[str]) -> bool:
    """Every token a CJK character (or the speaker's or listener's pronoun)."""
    return bool(tokens) and all(_is_cjk(w) or w in ("1", "2") for w in tokens)


def _normal(text: str) -> str:
    flat = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    return " ".join(flat.split())


def words(text: str) -> list[str]:
    """Lowercase word and CJK-character tokens, speaker pronouns folded (module doc)."""
    # "I'll", "I'd", "I've" are "I" and a verb ("ill", "id", "ive" once the apostrophe
    # goes would hide the speaker: "I'll aim for eight minutes" said back to the user).
    flat = _FULL_BE.sub(_contracted, _normal(text))
    flat = _CONTRACTED_I.sub(lambda m: "i " + _CONTRACTED_FULL.get(m.group(1), m.group(1)), flat)
    flat = re.sub(r"\b(you|we|they|he|she|it|that)'(ll|ve)\b", _full_will_have, flat)
    flat = flat.replace("'", "")
    return [_SPEAKER.get(w, w) for w in _WORD.findall(flat)]


def _full_will_have(match: re.Match[str]) -> str:
    return f"{match.group(1)} {_CONTRACTED_FULL[match.group(2)]}"


def _contracted(match: re.Match[str]) -> str:
    if match.group(1):
        return "i'm"
    if match.group(2):
        return f"{match.group(2)}'re"
    return f"{match.group(3)}'s"


def _mirrored(tokens: Sequence[str]) -> list[str]:
    return [{"1": "2", "2": "1"}.get(t, t) for t in tokens]


def _to_you(text: str) -> str:
    """A rule as said to the user: "You may get notes about the user from earlier chats.
    When the user asks about themselves…" came back as "…notes about you from earlier
    chats. When you ask about themselves…" (bench.reply_quality's safety probes)."""
    text = re.sub(r"\bthe user's\b", "your", text, flags=re.IGNORECASE)
    return re.sub(r"\bthe user\b", "you", text, flags=re.IGNORECASE)


def _starts_with(tokens: Sequence[str], prefix: Sequence[str]) -> bool:
    return len(tokens) >= len(prefix) and list(tokens[: len(prefix)]) == list(prefix)


def _says_something(token: str) -> bool:
    """A word of content: a number ("Your speaking score in the last mock test was 6.0."
    answers its question), a CJK character that is not a particle or the like, or a word of
    three letters or more that is no stop word (not a folded pronoun)."""
    if any(ch.isdigit() for ch in token):
        return True
    if _is_cjk(token):
        return token not in _CJK_LIGHT
    return len(token) > 2 and token not in STOP_WORDS_EN


def _run(a: Sequence[str], i: int, b: Sequence[str], j: int) -> int:
    """How many tokens ``a`` from ``i`` and ``b`` from ``j`` have in common, in a row."""
    n = 0
    while i + n < len(a) and j + n < len(b) and a[i + n] == b[j + n]:
        n += 1
    return n


def _echo_starts(reply: Sequence[str]) -> range:
    """Where in the reply a copy of the message may start: within its first three words,
    a CJK character counting half a word ("她的奶奶" and then the message said back)."""
    words_before = 0.0
    for i, token in enumerate(reply):
        if words_before >= ECHO_START_WORDS:
            return range(i)
        words_before += 0.5 if _is_cjk(token) else 1.0
    return range(len(reply))


def _span(tokens: Sequence[str]) -> float:
    """How long the tokens are in words, a CJK character counting half of one: the hold's
    limit would otherwise let a Chinese echo behind a lead go ("她的奶奶" and then ten
    characters of the message said back)."""
    return sum(0.5 if _is_cjk(token) else 1.0 for token in tokens)


def _copied_run(reply: Sequence[str], message: Sequence[str]) -> int:
    """The longest run of ``message`` tokens the reply starts copying within its first
    three words (``_echo_starts``)."""
    starts = _echo_starts(reply)
    return max((_run(reply, i, message, j) for i in starts for j in range(len(message))), default=0)


def _copying(reply: Sequence[str], message: Sequence[str]) -> bool:
    """The reply, from one of its first three words to its last, is a run of the message
    (of two words, or one CJK character): an echo may be under way (the 1.5B's "哈哈，"
    and then "周末本来想去爬山，结果一觉睡到中午", the message, word for word)."""
    return any(
        _copies_to_end(reply, i, message, j)
        and (len(reply) - i >= 2 or _is_cjk(reply[i]))  # one shared word is no echo yet
        for i in _echo_starts(reply)
        for j in range(len(message))
    )


def _only_copies(reply: Sequence[str], message: Sequence[str]) -> bool:
    """The whole reply, from one of its first three words, is a run of the message of at
    least ``MIN_COMPARED`` tokens: asked as a question, the user's question handed back
    ("What's your favourite time of night?" to "random question, what's your favourite
    time of night?": the long session, seed 1); "Yes, have a big bowl!" answers one."""
    return _copying(reply, message) and _copied_run(reply, message) >= MIN_COMPARED


def _asks(text: str) -> bool:
    return text.rstrip(" \n*_\"'”)").endswith(("?", "？"))


def _covered(sentence: Sequence[str], message: Sequence[str]) -> tuple[list[bool], list[bool]]:
    """Which tokens of each lie in a run of at least ``RESTATED_RUN`` tokens they share."""
    mine, theirs = [False] * len(sentence), [False] * len(message)
    for i in range(len(sentence)):
        n, j = max(
            ((_run(sentence, i, message, j), j) for j in range(len(message))), default=(0, 0)
        )
        if n >= RESTATED_RUN:
            mine[i : i + n] = [True] * n
            theirs[j : j + n] = [True] * n
    return mine, theirs


def _restates(sentence: Sequence[str], message: Sequence[str]) -> bool:
    """The sentence is the message with a word or two changed: runs of at least
    ``RESTATED_RUN`` tokens they share cover ``RESTATED_SHARE`` of each (a request's
    words said in its answer, "Here's a short poem about the night bus:" to "write me a
    short poem about the night bus home", cover 0.7 of the request)."""
    if len(sentence) < MIN_COMPARED + 2 or len(message) < RESTATED_RUN:
        return False
    mine, theirs = _covered(sentence, message)
    share = RESTATED_SHARE
    return sum(mine) >= share * len(sentence) and sum(theirs) >= share * len(message)


def _says_back(sentence: Sequence[str], message: Sequence[str], *, speaker: bool = False) -> bool:
    """The sentence holds the whole message (runs of ``RESTATED_RUN`` cover
    ``RESTATED_SHARE`` of it) and adds at most ``SAID_BACK_OWN`` words of its own:
    "你的奶奶说" + "她每天早上都去公园跳广场舞，比我还忙哈哈" (the message before).
    ``speaker``: only with the user's "I" among the words it copies."""
    if len(message) < RESTATED_RUN:
        return False
    mine, theirs = _covered(sentence, message)
    own = _span([t for t, covered in zip(sentence, mine, strict=True) if not covered])
    if speaker and not any(t == "1" and c for t, c in zip(sentence, mine, strict=True)):
        return False
    return sum(theirs) >= RESTATED_SHARE * len(message) and own <= SAID_BACK_OWN


def _retells_cjk(opening: Sequence[str], message: Sequence[str]) -> bool:
    """A Chinese opening with ``RETOLD_CJK_COVER`` of the message's characters in it and
    fewer than ``RETOLD_CJK_OWN`` of its own: the message said back with words changed,
    which shares too few runs or pairs for the other tests ("外面很安静，整栋楼只亮着我家
    的灯。" to "外面好安静啊，整栋楼好像就我家灯还亮着": bench.reply_quality's messages).
    The bench's echo judge in characters, stricter on what is its own: the judge reads the
    whole reply, this only its opening ("很高兴你已经干了三年UI设计。" goes on to ask)."""
    unique = set(message)
    if len(unique) < RETOLD_CJK_MIN:
        return False
    mine = set(opening)
    covered = sum(1 for t in unique if t in mine or _mirrored([t])[0] in mine)
    theirs = unique | set(_mirrored(message))
    own = {t for t in mine if _is_cjk(t) and t not in theirs and t not in _CJK_LIGHT}
    return covered >= RETOLD_CJK_COVER * len(unique) and len(own) < RETOLD_CJK_OWN


def _copies_to_end(reply: Sequence[str], i: int, message: Sequence[str], j: int) -> bool:
    """``reply`` from ``i`` is ``message`` from ``j``, its last token maybe a word still
    streaming ("who" of "who's", "interview" of "interviewing")."""
    n = _run(reply, i, message, j)
    if n == len(reply) - i:
        return True
    last = len(reply) - 1
    return n == last - i and j + n < len(message) and message[j + n].startswith(reply[last])


# Words a help-desk line may open with before its formula: "Please feel free to ask any
# other questions…", "Just let me know if you have any other questions…" (the 1.5B,
# bench.reply_quality's probes).
# ... or a greeting: "Hello, how can I assist you today?" (a third attempt, shown:
# bench.reply_quality's messages).
_SOFT_WORDS = (
    "please", "just", "also", "and", "so", "again", "anyway", "of course",
    "hello there", "hi there", "hey there", "hello", "hi", "hey",
)  # fmt: skip
# (While it streams, the lead may be all there is yet: "Hello,".)
_SOFT_LEAD = re.compile(rf"^(?:(?:{'|'.join(_SOFT_WORDS)})[,!]?(?:\s+|$))+")


def _may_advise(fragment: str) -> bool:
    """The sentence so far is, or may still become, general advice (``_ADVICE_STARTS``)."""
    flat = _normal(fragment).lstrip(" *_\"'([")
    if _ADVICE_LEAD_ZH.match(flat):
        return True
    return bool(flat) and any(s.startswith(flat) or flat.startswith(s) for s in _ADVICE_STARTS)


def _may_say_ai(fragment: str) -> bool:
    """The sentence so far may still say "as an AI" ("However, as an AI companion, I don't
    have a physical presence…": the long session, seed 3, past a shown opening)."""
    raw = _normal(fragment).lstrip(" *_\"'([").rstrip(",! ")
    if raw and any(lead.startswith(raw) for lead in _AI_LEAD_WORDS):
        return True  # "However," may go on "as an AI…"
    flat = _AI_LEADS.sub("", raw)
    return bool(flat) and any(s.startswith(flat) or flat.startswith(s) for s in _AI_STARTS)


_AI_STARTS = ("as an ai", "as an artificial")
_AI_LEAD_WORDS = ("however", "but", "although", "though", "well", "of course", "honestly")


def is_helpdesk_sentence(sentence: str) -> bool:
    flat = _SOFT_LEAD.sub("", _normal(sentence).lstrip("\"'(["))
    return flat.startswith(_HELPDESK_STARTS)


def _offers_help_if(sentence: str) -> bool:
    """A help-desk offer behind an "if": "If you want to talk about anything else, feel
    free to ask!"."""
    return words(sentence)[:1] in (["if"], ["如"]) and bool(_HELPDESK_IN.search(_normal(sentence)))


# A first sentence that only answers thanks ("You're welcome!", "No problem!"), judged with
# the next, where a help-desk line often follows: "You're welcome! If you ever need
# anything, just let me know." was shown as "You're welcome!" alone, its help-desk sentence
# left out, to "thanks for keeping me company tonight, it helped more than you know" (the
# long session, seed 1).
_FORMULA = re.compile(
    r"^(?:oh,? )?(?:you(?:'re| are) (?:very |so |most )?welcome|no problem|no worries|"
    r"any ?time|my pleasure)[\s!.,~]*$"
)


def _formula_first(said: Sequence[str]) -> bool:
    return len(said) >= 2 and bool(_FORMULA.match(_normal(said[0])))


def _may_become_helpdesk(fragment: str) -> bool:
    flat = _normal(fragment).lstrip("\"'([")
    if any(word.startswith(flat) for word in _SOFT_WORDS):
        return True  # "Please", "Just": the formula may follow
    flat = _SOFT_LEAD.sub("", flat)
    if not flat:
        return True
    return any(start.startswith(flat) or flat.startswith(start) for start in _HELPDESK_STARTS)


@dataclass(frozen=True, slots=True)
class Rejection:
    """The attempt shows a failure in its opening: sample again, telling the model ``hint``."""

    reason: Reason
    opening: str
    hint: str


class ReplyGuard:
    """One attempt's stream: ``feed`` each piece and show what it returns; ``end`` at the
    end of the stream. Either may return a ``Rejection`` instead (see module docstring).
    ``check_opening=False`` (the caller's last attempt) only leaves sentences out and,
    with a health note, still holds the opening for its check. ``session_replies``: the
    session's earlier replies the prompt no longer shows, whose sentences are not said
    again either."""

    def __init__(
        self,
        user_text: str,
        earlier_replies: Sequence[str] = (),
        *,
        check_opening: bool = True,
        health_notes: Sequence[str] = (),
        answer_notes: Sequence[str] = (),
        session_replies: Sequence[str] = (),
        instructions: Sequence[str] = (),
        earlier_messages: Sequence[str] = (),
        first_attempt: bool = False,
    ) -> None:
        self._health = [" ".join(note.split()) for note in health_notes if note.strip()]
        # A sentence about "the health notes" is the prompt's (``_NOTES_TALK``), unless
        # the user speaks of notes themselves.
        self._notes_talk = re.search(r"\bnotes?\b", user_text, re.IGNORECASE) is None
        # The recalled notes the message is about, when it asks something: a reply that
        # says it does not know is asked again with them.
        asks = asks_question(user_text)
        self._asks = asks
        # A Chinese message that asks nothing may not be retold (``_retells``); next to a
        # health note the reply's checks are the health ones ("明天搬家，你决定自己把冰箱
        # 和书柜都扛下楼。记得你之前因为右腕扭伤…" said the note).
        self._retold_check = (
            any(_is_cjk(ch) for ch in user_text)
            and not asks
            and not any(n.strip() for n in health_notes)
        )
        self._answers = [" ".join(n.split()) for n in answer_notes if n.strip()] if asks else []
        # ... and one that answers with another name or number than the note's, where the
        # question asks for one (``_recalled``): the notes' values the message lacks.
        self._recall: dict[int, set[str]] = {}
        # ... and it asks how much or what something is called: an answer must give a
        # number, or a name
        self._counts = False
        self._known: set[str] = set()
        if self._answers:
            # Every word of the message, not only its names: what it says is no answer.
            asked_names = {w.lower() for w in re.findall(r"[A-Za-z]+", user_text)}
            asked_numbers = set(_NUMBER.findall(user_text))
            note_names, note_numbers = named_values(" ".join(self._answers))
            flat_message = _normal(user_text)
            asked = bool(_ASKED.search(flat_message))
            if asked and _ASKS_NAME.search(flat_message) and note_names - asked_names:
                self._recall[0] = note_names - asked_names
                self._counts = bool(_ASKS_NAMED.search(flat_message))
            if asked and _ASKS_NUMBER.search(flat_message) and note_numbers - asked_numbers:
                self._recall[1] = note_numbers - asked_numbers
                self._counts = bool(_ASKS_AMOUNT.search(flat_message))
            # "tell me about myself" asks for the notes as a whole: an answer names
            # something of them ("Sure, I'd be happy to help you with that." and "What
            # would you like to know about yourself?", six notes in front of the 1.5B).
            if asks_for_profile(user_text):
                said_of_them = note_names | _content_words(self._answers)
                if said_of_them - asked_names:
                    self._recall[0] = said_of_them - asked_names
                    self._counts = True
            self._known = (
                asked_names
                | asked_numbers
                | {w.lower() for note in self._answers for w in re.findall(r"\w+", note)}
            )
        message = words(user_text)
        # The note's own words, less the ones the user's message has: "peanut curry"
        # names the peanuts; only "allergic" says the reply kept the allergy in mind.
        asked = {w[:5] for w in message}
        self._health_words = {
            w[:5]
            for note in self._health
            for w in words(note)
            if (len(w) > 3 or _is_cjk(w)) and w not in _COMMON_NOTE_WORDS
        } - asked
        # The foods a food-allergy note rules out, named in a reply ("You could try adding a
        # few shrimp", the shellfish note beside it): against the note (``allergen_foods``).
        self._ruled_out = ruled_out(self._health)
        self._message = [message, _mirrored(message)] if len(message) >= MIN_COMPARED else []
        self._message_words = {t for m in self._message for t in m}  # for ``_own_words``
        self._said = message  # the user's words, as they said them (for _speaks_as_user)
        # The user's name, as the notes that answer the message give it: "I am Maya." to
        # "who am I?" takes the user's part as much as their own words said back do.
        self._user_names = names_in_notes(self._answers)
        # What no sentence says back whole (``_restates``): this message, and the ones
        # before it when this one asks nothing. The 1.5B's Chinese stretch, shown:
        # "你的奶奶今年八十岁了，身体健康。她每天早上都去公园跳广场舞，比我还忙哈哈。" (its
        # second sentence the message), then "你的奶奶说她每天早上都去公园跳广场舞，比我还忙
        # 哈哈。" to the next two messages (bench.reply_quality's long session).
        # An answer may restate the question ("No, you cannot squeeze in a short run on
        # Sunday…"), or an earlier message turned to "you" ("Your cat is called Pickle").
        before = [words(text) for text in list(earlier_messages)[-SAID_BEFORE:]]
        self._restate = [] if asks else self._message
        # An answer may open with the words of a question or a request (``COPY_OWN``).
        # Not a retry's to a statement: held for its own words, the retries of Chinese
        # statements passed the deadline with nothing shown and got the stand-in (7 turns
        # of 148 against 3, the messages part, docs/benchmarks.md).
        # Nor a first attempt's to a Chinese statement: the 1.5B retells "外面好安静啊，整栋楼
        # 好像就我家灯还亮着" before it answers, each attempt; rejected on the retelling, every
        # attempt was, and the turn got the stand-in. The first attempt is held for its own
        # words instead (its retold first sentence left out), the retries as before.
        self._may_restate = (
            asks
            or asks_to_make(user_text)
            or bool(_ASKS_ADVICE.search(_normal(user_text)))
            or (first_attempt and self._retold_check)
        )
        self._said_before = [(seq, "1" in seq) for seq in before if "1" in seq]
        if not asks:
            self._said_before += [(_mirrored(seq), False) for seq in before]
        self._echoed: list[str] = []  # sentences left out for saying a message back
        # Chinese: the character pairs of the messages before this one and of the earlier
        # replies, to an opening that says one of them again (``_said_again_cjk``).
        self._pairs_before: list[tuple[frozenset[tuple[str, str]], str]] = []
        self._own_pairs: list[frozenset[tuple[str, str]]] = []
        if any(_is_cjk(ch) for ch in user_text):
            # ... and this message: "我挺想你的。已经三年没回成都了。" to "其实我挺想她的，
            # 已经三年没回成都了" passed the checks of a single sentence (seed 1); but not
            # a request for a story or a poem, whose subject the reply names back ("当然可
            # 以！听个故事吧，关于一只迷路的小猫…" to "给我讲个小故事吧，关于一只迷路的小猫怎么
            # 找到家的", then "对不起，我不太理解您的意思。": the messages part).
            # A question or a request for advice is said back only if nothing of the
            # reply's own follows (``_copy_verdict``).
            own = [] if asks_to_make(user_text) or self._may_restate else self._message
            self._own_pairs = (
                [frozenset(itertools.pairwise(seq)) for seq in self._message]
                if self._may_restate and not asks_to_make(user_text)
                else []
            )
            self._pairs_before = [
                (frozenset(itertools.pairwise(seq)), "echo")
                for seq in (*own, *before, *(_mirrored(seq) for seq in before))
                if any(_is_cjk(t) for t in seq)
            ] + [
                (frozenset(itertools.pairwise(seq)), "repeat")
                for seq in (words(r) for r in (*session_replies, *earlier_replies))
                if any(_is_cjk(t) for t in seq)
            ]
        self._earlier = [w for w in (words(reply) for reply in earlier_replies) if w]
        self._hint_words = [
            words(HINTS[reason].format(notes="", language=""))
            for reason in HINTS  # every hint: the echo one was said back whole (messages)
        ] + [
            words(IN_CHINESE),
            *(words(LEAD.format(language=x)) for x in ("Chinese", "English")),
        ]
        # Sentences are compared with the session's earlier replies too, not only the
        # prompt's: a long evening's formula ("That's great to hear!") comes back once the
        # reply that said it has left the short-term window.
        self._earlier_sentences = {
            tuple(words(sentence))
            for reply in (*session_replies, *earlier_replies)
            for sentence in _split_sentences(reply)
        }
        self._starts = {
            sentence[:REPEAT_START_TOKENS]
            for sentence in self._earlier_sentences
            if len(sentence) >= REPEAT_START_TOKENS
        }
        # The persona card's and the app's rules' runs of ``RECITED_RUN`` tokens, as
        # written, with "I"/"you" swapped, and with "the user" said as "you": a sentence
        # with one is left out (and the next with a run of ``RECITED_ON``).
        seqs = [
            seq
            for text in instructions
            for seq in (words(text), _mirrored(words(text)), words(_to_you(text)))
        ]
        self._recited = {
            tuple(seq[i : i + n])
            for seq in seqs
            for n in (RECITED_RUN, RECITED_ON)
            for i in range(len(seq) - n + 1)
        }
        self._reciting = False  # the last sentence was left out as a recital
        # The instructions' quoted examples, said whole: "How did your sister's move go?"
        # (the companion card's example of a note used well) to a user with no sister
        # in the notes (bench.reply_quality's messages part). Left out wherever they come.
        self._quoted = [
            tuple(quote)
            for text in instructions
            for quote in (words(q) for q in re.findall(r'"([^"]+)"', text))
            if len(quote) >= QUOTED_TOKENS
        ]
        self._opening = check_opening
        self._held = ""
        # Even an unchecked opening is held for the health check and while it copies the
        # message (``_judge_opening``).
        self._released = False
        self._sentence = ""  # the current sentence, held while it may be a help-desk line
        self._whole_only = False  # near the reply cap: sentences are shown whole (``near_cap``)
        self._clear = False  # part of the current sentence is shown: the rest goes through
        self._dropped: list[str] = []  # sentences left out
        self._reminded = False  # a health note was said back instead of a go-ahead
        self._health_said = False  # a shown sentence mentions the health note
        self._asks_caution = bool(_ASKS_CAUTION.search(_normal(user_text)))
        self._calm = not any(
            _DANGER.search(_normal(text))
            for text in (user_text, *list(earlier_messages)[-SAID_BEFORE:])
        )
        self._asks_leave = bool(_ASKS_LEAVE.search(_normal(user_text)))
        self._asks_identity = bool(_ASKS_IDENTITY.search(_normal(user_text)))
        self._cjk = any(_is_cjk(ch) for ch in user_text)
        self._shown_any = False
        self._listing = False  # the reply has a list: its lines are never repeats
        self._stances = stated(user_text)  # what the message says it likes or dislikes
        self._good_news = is_good_news(user_text)  # "sorry to hear" to it is left out
        self._flipped: list[str] = []  # sentences left out for turning one round
        # "…, as noted in your recalled notes": left out of what is shown
        self._clauses = NotesClauseFilter()
        self._names = {w.lower() for w in re.findall(r"\b[A-Z][a-z]+\b", user_text)}
        self._substantial = (
            sum(1 for w in message if w not in _GREETING and (len(w) > 2 or _is_cjk(w)))
            >= SUBSTANCE
        )
        self._script = _script(message, earlier_replies, user_text)
        self._no_verse_asked = not _ASKS_VERSE.search(_normal(user_text))
        self._verse_mode = self._no_verse_asked and any(
            _is_verse(reply) for reply in earlier_replies[-2:]
        )

    # --- the opening ---------------------------------------------------------------------

    def _judge_opening(self, text: str, final: bool) -> Rejection | bool:
        """A ``Rejection``, True (release it) or False (hold on)."""
        flat = _normal(text)
        said = _split_sentences(text)
        tokens = words(text)
        if not self._opening:
            # The last attempt is shown as it comes, but never the message said back (the
            # third attempt of "朋友约我周六去吃海鲜自助…" was the message, word for word),
            # nor an earlier reply whole: "你上次打电话问她什么时候找男朋友？" was the last
            # attempt of four turns in a row (the long session, seed 1).
            if (copy := self._copy_verdict(tokens, final)) is not None:
                return self._reject("echo", text) if copy else False
            for message in self._message:
                if self._copies_run(tokens, message):
                    return self._reject("echo", text)
                if final and _only_copies(tokens, message) and _asks(text):
                    return self._reject("echo", text)
            if final and len(tokens) >= MIN_COMPARED and tokens in self._earlier:
                return self._reject("repeat", text)
            if _MESSAGE_TALK.search(text):  # "她的上一条消息是: …", released before its end
                return self._reject("recital", text)
            again = self._said_again_cjk(said, final)
            if again is not None:
                return self._reject(again, text) if again else False
            # ... nor one in English to a Chinese message: "Could you please provide more
            # information about what the conversation was like?" to "上次打电话她一直问我什么
            # 时候找男朋友" after an echo and an English attempt (the long session, seed 4);
            # the turn asks them to go on in Chinese instead.
            if self._script == "cjk" and self._other_script(tokens, enough=True):
                return self._reject("language", text)
            if self._script == "cjk" and not final and self._other_script(tokens, enough=False):
                return False
            copying = any(
                _copied_run(tokens, m) == len(tokens) or _copying(tokens, m) for m in self._message
            )
            if copying and not final and len(tokens) < ECHO_TOKENS:
                return False
            if (restated := self._restated(said, tokens, final)) is not None:
                return self._reject("echo", text) if restated else False
            # ... nor "I'm sorry, but I don't have any information about your cat's name"
            # with the note that says it next to the question (the caller says the note
            # instead: ``turn_reply.recall_reminder``); held while it may still say so.
            if self._answers:
                if _DENIES_KNOWING.search(flat):
                    return self._reject("forgot", text)
                # ... nor another name or number than the note's ("Hey there! His name is
                # Jack.", the hamster Tudou in the note), held until it names one.
                if self._recall:
                    recalled = self._recalled(text, final)
                    if recalled is False:
                        return self._reject("forgot", text)
                    if recalled is None and not final and _span(tokens) < 2 * HOLD_TOKENS:
                        return False
                may_deny = bool(_APOLOGY.search(flat)) or tokens[:1] in (["1"], ["i"], ["我"])
                if may_deny and not final and _span(tokens) < 2 * HOLD_TOKENS:
                    return False
            # ... nor a refusal ("I'm sorry, but I cannot help with that request." to a
            # 10k race next to an Achilles note): the caller says the note or asks them to
            # go on instead. Held while an apology may still become one.
            if _REFUSAL.search(flat) and not (flat.endswith("help") and not final):
                return self._reject("refusal", text)
            if self._not_understood(flat):
                return self._reject("refusal", text)
            # ... nor "I'm sorry, but as an AI companion, I do not have personal experiences…"
            # to "ok good, that one's staying in", held 40 tokens for its "but" and shown
            # whole at 4.7 s (a third attempt, the long session, seed 5): they are asked to
            # go on instead.
            if not self._asks_identity and _AS_AN_AI.search(flat):
                return self._reject("helpdesk", text)
            apology = _APOLOGY.search(flat) and not _SYMPATHY.search(flat)
            greeting = all(w in _GREETING or w in self._names for w in tokens)
            may_refuse = (apology and len(said) == 1) or greeting or self._risky_lead(said)
            limit = SORRY_BUT_HOLD if _sorry_but(flat, said) else 2 * HOLD_TOKENS
            if may_refuse and not final and _span(tokens) < limit:
                return False
            return self._judge_health(text, flat, said, tokens, final)
        if (
            _RECITES_NOTES.search(flat)
            or _MESSAGE_TALK.search(text)
            or (self._notes_talk and _NOTES_TALK.search(text))
        ):
            return self._reject("recital", text)
        if self._good_news and sympathises(said[0] if said else text):
            return self._reject("sympathy", text)  # "I'm sorry to hear…" to an engagement
        if self._answers and _DENIES_KNOWING.search(flat):
            return self._reject("forgot", text)
        if self._recall:
            recalled = self._recalled(text, final)
            if recalled is False:
                return self._reject("forgot", text)
            # "How much weight have I lost?" answered by twenty words and no number ("It
            # looks like you've lost a bit of weight since we started!"), the note's 69.5
            # kg next to it: asked again with the notes. So is "what's his name again?"
            # answered by twenty words and no name ("Hello there! How are you doing? I'm
            # just a little AI companion…", the hamster Tudou in the note).
            if recalled is None and self._counts and (final or _span(tokens) >= 2 * HOLD_TOKENS):
                return self._reject("forgot", text)
        refusal = _REFUSAL.search(flat)
        if refusal is not None:
            # "I can't help" may go on "but smile": held until the next word says.
            if not final and refusal.end() == len(flat) and flat.endswith("help"):
                return False
            return self._reject("refusal", text)
        if self._not_understood(flat):
            return self._reject("refusal", text)
        if _CLAIMS_HUMAN.search(flat):
            return self._reject("human", text)
        if self._other_script(tokens, enough=True):
            return self._reject("language", text)
        if self._verse_mode and _first_line_is_verse(text):
            return self._reject("verse", text)
        if self._no_verse_asked and _ANNOUNCES_VERSE.search(flat):
            return self._reject("verse", text)
        if final and self._bare(tokens) and _SALUTATION.intersection(tokens):
            return self._reject("bare", text)
        if (formula := self._formula_then_left_out(said, final)) is not None:
            return self._reject(formula, text)
        if (
            any(is_helpdesk_sentence(sentence) for sentence in said)
            or (_formula_first(said) and _offers_help_if(said[1]))
            or _AS_AN_AI.search(flat)
            or _HERE_TO_HELP.search(flat)
        ):
            return self._reject("helpdesk", text)
        if (copy := self._copy_verdict(tokens, final)) is not None:
            return self._reject("echo", text) if copy else False
        for message in self._message:
            if self._copies_run(tokens, message):
                return self._reject("echo", text)
            if final and _only_copies(tokens, message) and _asks(text):
                return self._reject("echo", text)
        complete = said if final else said[:-1]
        if any(self._speaks_as_user(sentence) for sentence in complete):
            return self._reject("echo", text)
        if again := self._said_again_cjk(said, final):
            return self._reject(again, text)
        if (len(said) > 1 or final) and self._says_earlier_message(words(said[0])):
            return self._reject("echo", text)
        if (restated := self._restated(said, tokens, final)) is not None:
            return self._reject("echo", text) if restated else False
        for earlier in self._earlier:
            need = min(REPEAT_TOKENS, len(earlier))
            long_enough = len(earlier) >= MIN_COMPARED
            if (long_enough and _starts_with(tokens, earlier[:need])) or (
                final and tokens == earlier
            ):
                # "I'm sorry, but I don't…" said again next to the note that answers: held
                # until it says what it does not know, so the retry is told the note.
                apology = self._answers and _APOLOGY.search(flat)
                if apology and not final and _span(tokens) < 2 * HOLD_TOKENS:
                    return False
                return self._reject("repeat", text)
        health = self._judge_health(text, flat, said, tokens, final)
        if health is not True:
            return health
        # An apology or "As an AI" may end in a refusal ten words on.
        # So may a first sentence in the user's first person ("I'm allergic…"), once whole.
        speaker = bool(tokens) and tokens[0] == "1" and len(self._said) >= MIN_COMPARED
        # So may a poem's first line go on past the usual hold (verse mode: to its end).
        # So may the answer to a question a note answers, until it names a value.
        longer = (
            _APOLOGY.search(flat)
            or speaker
            or self._verse_mode
            or bool(self._recall)
            or (len(said) == 2 and _formula_first(said))
        )
        limit = 2 * HOLD_TOKENS if longer else HOLD_TOKENS
        # The message said back as the first sentence, its answer still to come: held, so
        # that the sentence is left out once the answer comes (``_without_message_said_first``).
        if not final and _span(tokens) < COPY_HOLD and self._said_first(text):
            return False
        sorry_but = _sorry_but(flat, said)
        if sorry_but:
            limit = SORRY_BUT_HOLD
        if final or _span(tokens) >= limit:
            return True
        if len(tokens) < MIN_RELEASE:
            return False
        undecided = (
            (speaker and len(said) == 1)
            or sorry_but
            or self._bare(tokens)
            or self._other_script(tokens, enough=False)
            or (self._verse_mode and len(said) == 1)
            or (self._no_verse_asked and bool(_MAY_ANNOUNCE.search(_normal(said[-1]))))
            or (self._asks_identity and len(said) == 1)
            or (len(said) == 2 and _formula_first(said))
            or (bool(self._recall) and self._recalled(text, final) is None)
            or self._risky_lead(said)
            or (bool(self._health) and tokens[0] in _GO_AHEAD_FIRST)
            or _may_become_helpdesk(said[-1])
            or bool(_I_MAY_REFUSE.search(_normal(said[-1])))
            or any(_starts_with(earlier, tokens) for earlier in self._earlier)
            or any(_starts_with(m, tokens[-len(tokens) :]) for m in self._message)
            or any(_copying(tokens, m) for m in self._message)
            # a Chinese lead of a few characters may still go on to say the message back
            # ("她的奶奶" + "每天早上都去公园跳广场舞…", the message): held past the window
            or (self._cjk and len(_echo_starts(tokens)) == len(tokens))
            or self._said_again_cjk(said, final) == ""
            or any(_copying(tokens, m) for m, speaker in self._said_before if speaker)
            or bool(_MAY_TALK_OF_MESSAGES.search(said[-1]))
        )
        return not undecided

    def _restated(self, said: Sequence[str], tokens: Sequence[str], final: bool) -> bool | None:
        """Whether the first sentence says the message back (``_restates``): True, False
        while it is still open and began with a run of the message (hold it), else None."""
        if not self._message:
            return None
        if len(said) > 1 or final:
            first = words(said[0])
            if any(_restates(first, m) for m in self._message):
                # "你的妈妈喜欢养花，她生日快到了，送什么好呢？送她一盆花…": asked again first
                return self._said_then_answered(tokens, final) if self._may_restate else True
            if self._retold_check and self._retells(first):
                return self._said_then_answered(tokens, final) if self._may_restate else True
            return None
        # Held from three: "Tom made curry for you, but I can't eat it because I'm allergic
        # to peanuts." was shown from "Tom made curry for", and said the user's words as
        # its own to the end (``_speaks_as_user`` reads the whole sentence).
        begun = any(_copied_run(tokens, m) >= RESTATED_RUN - 1 for m in self._message)
        # ... and, to a Chinese message that asks nothing, a Chinese first sentence: it may
        # retell the message after a lead of its own ("太好了，我终于可以吃到楼下新开的那家
        # 米线了！" was shown from "太好了，我终于可"), which only its end tells.
        begun = begun or (self._retold_check and _all_cjk(tokens))
        return False if begun and _span(tokens) < 2 * HOLD_TOKENS else None

    def _copies_run(self, tokens: Sequence[str], message: Sequence[str]) -> bool:
        """The opening copies ``ECHO_TOKENS`` of the message in a row (all of a shorter
        one): an echo, unless the message may be restated (``_copy_verdict`` then judges)."""
        if self._may_restate:
            return False
        return _copied_run(tokens, message) >= min(ECHO_TOKENS, len(message))

    def _copy_verdict(self, tokens: Sequence[str], final: bool) -> bool | None:
        """To a message that may be restated (``COPY_OWN``), an opening that copies it
        (``ECHO_TOKENS`` in a row, or in Chinese most of the character pairs of its first
        ``SAID_AGAIN_CJK_MIN``): True, an echo, once it ends or reaches ``COPY_HOLD``
        words with fewer than ``COPY_OWN`` words of its own; False (hold it) before; None
        when it copies nothing, or adds words of its own after the copy."""
        if not self._may_restate or not self._message:
            return None
        copies = any(_copied_run(tokens, m) >= min(ECHO_TOKENS, len(m)) for m in self._message)
        if not copies and self._own_pairs and _all_cjk(tokens[:SAID_AGAIN_CJK_MIN]):
            pairs = list(itertools.pairwise(tokens[:SAID_AGAIN_CJK_MIN]))
            shared = max(sum(pair in theirs for pair in pairs) for theirs in self._own_pairs)
            if len(tokens) < SAID_AGAIN_CJK_MIN:  # too short to tell: held while it may be
                may = shared >= SAID_AGAIN_CJK_SHARE * len(pairs)
                return False if may and not final else None
            copies = shared >= SAID_AGAIN_CJK_PAIRS and shared >= SAID_AGAIN_CJK_SHARE * len(pairs)
        return self._said_then_answered(tokens, final) if copies else None

    def _message_first(self, opening: str) -> tuple[int, int]:
        """How many of the opening's first whole sentences are the message's words said
        back (``RESTATED_SHARE`` of each in runs of ``RESTATED_RUN``), to a message that may
        be restated; and how many words of its own the rest adds."""
        if not self._may_restate or not self._message:
            return 0, 0
        said = _split_sentences(opening)
        skip = 0
        for sentence in said[:-1]:  # the last may still be open
            toks = words(sentence)
            if not toks or not any(
                sum(_covered(toks, m)[0]) >= RESTATED_SHARE * len(toks) for m in self._message
            ):
                break
            skip += 1
        return skip, self._own_words(words("".join(said[skip:])))

    def _said_first(self, opening: str) -> bool:
        """The opening starts with the message said back and its answer has not come yet."""
        skip, own = self._message_first(opening)
        return skip > 0 and own < COPY_OWN

    def _without_message_said_first(self, opening: str) -> str:
        """The released opening less its first sentences while each says the message back
        (``_message_first``), once an answer of ``COPY_OWN`` words follows: "今晚吃什么好？冰
        箱里只有鸡蛋和西红柿。我建议你先做一份简单的炒蛋…" shows from "我建议…" (the
        messages part)."""
        skip, own = self._message_first(opening)
        if not skip or own < COPY_OWN:
            return opening
        return "".join(_split_sentences(opening)[skip:]).lstrip()

    def _said_then_answered(self, tokens: Sequence[str], final: bool) -> bool | None:
        """An opening that says the message (or its words) back: None once it has added
        ``COPY_OWN`` words of its own, True (an echo) if it ends or reaches ``COPY_HOLD``
        words before, else False (hold it)."""
        if self._own_words(tokens) >= COPY_OWN:
            return None
        return bool(final or _span(tokens) >= COPY_HOLD)

    def _own_words(self, tokens: Sequence[str]) -> int:
        """How many of ``tokens`` are content words the message lacks."""
        return sum(1 for t in tokens if t not in self._message_words and _says_something(t))

    def _not_understood(self, flat: str) -> bool:
        """The opening says it does not understand a message of ``MIN_COMPARED`` words or
        more (``_NOT_UNDERSTOOD``); to "hmm?" it may."""
        return len(self._said) >= MIN_COMPARED and bool(_NOT_UNDERSTOOD.search(flat))

    def _risky_lead(self, said: Sequence[str]) -> bool:
        """The opening's first sentence, or the one after a bare greeting, starts "I…",
        "Sorry…", "No…" and is not yet whole and safe: "Hey there! I can't help with
        that." to "got any dad jokes?" was shown from "Hey there! I" (the messages part)."""
        if len(said) > 1 and all(w in _GREETING or w in self._names for w in words(said[0])):
            said = said[1:]
        first = words(said[0])[:1] if said else []
        return bool(first) and first[0] in _RISKY_FIRST and not self._first_sentence_safe(said)

    @staticmethod
    def _first_sentence_safe(said: Sequence[str]) -> bool:
        """The opening's first sentence is whole and no apology (or only sympathy): an
        "I…" or "How…" opening is then shown, not held to its limit. The whole sentence
        has passed every check above (a refusal, "As an AI", help desk, a claim of the
        user's words); what follows is read sentence by sentence as it streams.
        ("I'm glad you enjoyed that joke!" was held for twenty tokens, 2.0 s to the
        first word: bench.reply_quality's long session.)"""
        if len(said) < 2:
            return False
        first = _normal(said[0])
        return not _APOLOGY.search(first) or bool(_SYMPATHY.search(first))

    def _judge_health(
        self, text: str, flat: str, said: Sequence[str], tokens: Sequence[str], final: bool
    ) -> Rejection | bool:
        """A go-ahead that ignores a recalled health note → ``Rejection``; False: hold on
        (a word of care may still come in the same sentence: "Go for it, but…"; or it
        may still become a go-ahead); True: nothing against it."""
        if not self._health:
            return True
        if any(self._offers_ruled_out(s) for s in (said if final else said[:-1])):
            return self._reject("health", text)
        if self._goes_ahead(flat) and not self._mentions_health(flat, tokens):
            if final or len(said) > 1 or len(tokens) >= 2 * HOLD_TOKENS:
                return self._reject("health", text)
            return False
        if self._opening or final or len(said) > 1 or len(tokens) >= HOLD_TOKENS:
            return True
        return not tokens or tokens[0] not in _GO_AHEAD_FIRST

    def _recalled(self, text: str, final: bool) -> bool | None:
        """Whether the answer so far names a value of the kind asked (a name, a number)
        that the notes answer with (True), only values that neither the notes nor the
        message say (False), or none yet (None). A word still streaming is not read."""
        complete = text if final else re.sub(r"[\w.:]+$", "", text)
        wrong = False
        # A wanted name counts wherever it stands ("Tudou is a hamster, and you have one.").
        words_said = {w.lower() for w in re.findall(r"\w+", complete)}
        for kind, wanted in self._recall.items():
            said = named_values(complete)[kind]
            if said & wanted or (kind == 0 and words_said & wanted):
                return True
            wrong = wrong or bool(said - self._known)
        return False if wrong else None

    def _bare(self, tokens: Sequence[str]) -> bool:
        """Every token so far greets (or names the user, or in Chinese says back a few of
        the message's characters), to a message that said something."""
        if not self._substantial or not tokens:
            return False
        rest = [w for w in tokens if w not in _GREETING and w not in self._names]
        return len(rest) <= BARE_NAME_CJK and all(_is_cjk(w) and w in self._said for w in rest)

    def _other_script(self, tokens: Sequence[str], *, enough: bool) -> bool:
        """The opening is in the other script than the message: with ``enough``, its
        first ``LANGUAGE_TOKENS`` tokens say so; without, the tokens so far may."""
        if self._script is None or not tokens:
            return False
        head = tokens[:LANGUAGE_TOKENS]
        cjk = sum(1 for w in head if _is_cjk(w))
        if enough and len(head) < LANGUAGE_TOKENS:
            return False
        if self._script == "latin":
            return cjk * 2 >= len(head) if enough else cjk > 0 and len(tokens) < LANGUAGE_TOKENS
        return cjk == 0 and (enough or len(tokens) < LANGUAGE_TOKENS)

    def _mentions_health(self, flat: str, tokens: Sequence[str]) -> bool:
        """A word of the note (by its first five letters: "peanut-free" for "peanuts")
        or a word of care; for a go-ahead without limits or one that waves the note
        away, only a way around what the note forbids."""
        if _UNRESTRAINED.search(flat) or _DISMISSES.search(flat):
            return bool(_SPARES.search(flat))
        stems = {w[:5] for w in tokens}
        return bool(self._health_words & stems) or bool(_CAUTION.search(flat))

    def _reject(self, reason: Reason, text: str) -> Rejection:
        if reason == "forgot":  # said to the companion as what it knows of "you"
            notes = " ".join(second_person(note) for note in self._answers)
        else:
            notes = " ".join(self._health)
        # Said in Chinese too: in an ongoing session of English replies, the 1.5B answered
        # a Chinese message in English three times over an English-only hint; and after
        # the echo hint, in English ("Your grandma is a…", "I think you should…": the long
        # session's Chinese stretch), so every hint to a Chinese message asks for Chinese.
        language = CHINESE if self._script == "cjk" else "English"
        hint = HINTS[reason].format(notes=notes, language=language)
        # (Said in Chinese whole, the echo hint came back as a reply: "他们刚刚说的内容，说
        # 点新的。", the long session, seed 1.)
        if self._script == "cjk" and reason != "language":
            hint = f"{hint} {IN_CHINESE}"
        return Rejection(reason, text, hint)

    # --- the stream ----------------------------------------------------------------------

    def feed(self, piece: str) -> str | Rejection:
        """What to show of the reply so far, given its next ``piece``."""
        if not self._released:
            self._held += piece
            complete = _whole_words(self._held)
            if not complete.strip():
                return ""
            verdict = self._judge_opening(complete, final=False)
            if isinstance(verdict, Rejection):
                return verdict
            if not verdict:
                return ""
            self._released = True
            piece, self._held = self._without_message_said_first(self._held), ""
        return self._clauses.feed(self._sentences(piece, final=False))

    def near_cap(self) -> None:
        """The reply is a sentence or so from the reply cap: from now on each sentence is
        held until it ends, so that a reply cut by the cap (``end(cut=True)``) ends at
        its last whole sentence, not "…Do you have a" (bench.reply_quality)."""
        self._whole_only = True

    def end(self, *, cut: bool = False) -> str | Rejection:
        """What is left to show once the stream has ended. A reply whose every sentence was
        left out is a ``Rejection`` too ("repeat", or "helpdesk" when that is all it
        said), but on the last attempt (``check_opening=False``), where it is shown.
        ``cut``: the model stopped at the reply cap; the sentence it was writing, held
        since ``near_cap``, is left out."""
        if cut and self._whole_only and self._released:
            self._sentence = ""
        out = self._end()
        if isinstance(out, Rejection):
            return out
        return self._clauses.feed(out) + self._clauses.flush()

    def _end(self) -> str | Rejection:
        if not self._released:
            verdict = self._judge_opening(self._held, final=True)
            if isinstance(verdict, Rejection):
                return verdict
            self._released = True
            rest, self._held = self._without_message_said_first(self._held), ""
        else:
            rest = ""
        out = self._sentences(rest, final=True)
        if self._opening and not self._shown_any and self._dropped:
            said = "".join(self._dropped)
            if all(s in self._flipped for s in self._dropped):
                return self._reject("flip", said)
            if all(s in self._echoed for s in self._dropped):
                return self._reject("echo", said)
            helpdesk = all(is_helpdesk_sentence(s) for s in self._dropped)
            return self._reject("helpdesk" if helpdesk else "repeat", said)
        if self._health and self._asks_caution and not self._health_said:
            # "Anything I should be careful with?" answered without the knee: said at the end.
            # (A last attempt's left-out sentences, shown after all, count as said.)
            said = self._shown_any or bool(out.strip())
            out += self._reminder(" " if said and not out.endswith(" ") else "", cjk=self._cjk)
        return out

    def _left_out(self, sentence: str) -> bool:
        if is_helpdesk_sentence(sentence) or self._speaks_as_user(sentence):
            return True
        if _NOTES_LINE.search(sentence) or self._recites_instructions(sentence):
            return True
        if any(_occurs_in(words(sentence), quote) for quote in self._quoted):
            return True
        if not self._asks_identity and _AS_AN_AI.search(_normal(sentence)):
            return True  # "然而，作为AI助手，我没有能力…" past the opening
        if _HELPDESK_ZH.search(sentence) or _HERE_TO_HELP.search(_normal(sentence)):
            return True
        if _MESSAGE_TALK.search(sentence):
            return True  # "他们的下一条消息是中文的。": the language lead, said back
        if self._notes_talk and _NOTES_TALK.search(sentence):
            return True  # "…you've already considered the health notes."
        if self._calm and _CRISIS_ADVICE.search(_normal(sentence)):
            return True  # the card's danger line, to a message with no danger in it
        if self._shown_any and self._calm and _REFUSAL.search(_normal(sentence)):
            return True  # "I can't help with that, but…" after a sentence of the answer
        if self._good_news and sympathises(sentence):
            return True  # "I'm sorry to hear that…" to an engagement
        if self._dropped and re.fullmatch(r"[\s*_#`~]*[*_#`~][\s*_#`~]*", sentence):
            return True  # the "**" that closed a sentence left out
        if self._stances and flips(sentence, self._stances):
            self._flipped.append(sentence)  # "Saffron hates the rain" → "…loves the rain"
            return True
        said = tuple(words(sentence))
        if any(_restates(said, m) for m in self._restate) or any(
            _says_back(said, m, speaker=speaker) for m, speaker in self._said_before
        ):
            self._echoed.append(sentence)
            return True
        if _PLAN_LINE.match(sentence):
            self._listing = True
        if self._listing:
            pass  # a plan or a list says its lines again on purpose (``_PLAN_LINE``)
        elif len(said) >= REPEAT_SENTENCE_TOKENS and said in self._earlier_sentences:
            return True  # said before, word for word: the loop a small model falls into
        elif len(said) >= REPEAT_START_TOKENS and said[:REPEAT_START_TOKENS] in self._starts:
            return True  # said before with a new ending
        if self._recites_hint(said):
            return True
        return _offers_help_if(sentence)

    def _recites_instructions(self, sentence: str) -> bool:
        said = words(sentence)
        n = RECITED_ON if self._reciting else RECITED_RUN
        self._reciting = any(
            tuple(said[i : i + n]) in self._recited for i in range(len(said) - n + 1)
        )
        return self._reciting

    def _against_health(self, sentence: str) -> bool:
        """A go-ahead, later in the reply, that says nothing of a recalled health note."""
        if not self._health:
            return False
        flat = _normal(sentence)
        if self._offers_ruled_out(sentence):
            return True
        return self._goes_ahead(flat) and not self._mentions_health(flat, words(sentence))

    def _offers_ruled_out(self, sentence: str) -> bool:
        """The sentence names a food the health note rules out, and not the note itself
        (a generic "avoid …" elsewhere in it does not count)."""
        if not self._ruled_out or not offers_ruled_out(sentence, self._ruled_out):
            return False
        return not CONDITION_NAMED.search(_normal(sentence))

    def _goes_ahead(self, flat: str) -> bool:
        """A go-ahead: a bare "Yes" only to a message that asks leave ("can I…?"), not
        to "what's his name again?" ("Yes, he's your hamster called Tudou." was taken
        for a go-ahead against the lactose note beside it: bench.reply_quality)."""
        return any(
            match.group() not in _BARE_YES
            or (self._asks_leave if match.group() in _BARE_SURE else self._asks_caution)
            for match in _GO_AHEAD.finditer(flat)
        )

    def _reminder(self, sentence: str, *, cjk: bool | None = None) -> str:
        """What is shown instead of such a go-ahead: the note, said back (once); also what
        ends a reply to "anything to avoid?" that did not say it (``end``)."""
        if self._reminded:
            return ""
        self._reminded = True
        notes = " ".join(second_person(note) for note in self._health[:REMINDER_NOTES])
        lead = " " if sentence[:1].isspace() else ""
        if cjk if cjk is not None else any(_is_cjk(ch) for ch in sentence):
            return f"{lead}不过别忘了：{notes}"
        if notes.startswith(("You ", "Your ")):
            notes = notes[0].lower() + notes[1:]
        return f"{lead}But remember: {notes}"

    def _recites_hint(self, said: Sequence[str]) -> bool:
        """The sentence says a retry's hint back ("Remember what you know about the user's
        health: …", seen with Qwen2.5-Coder-1.5B): a run of ``CLAIM_TOKENS`` + 2 of it."""
        need = CLAIM_TOKENS + 2
        return any(
            _run(said, i, hint, j) >= need
            for hint in self._hint_words
            for i in range(len(said))
            for j in range(len(hint))
        )

    def _may_be_left_out(self, fragment: str) -> bool:
        """Hold the sentence: it may become a help-desk line (one that starts like one, or
        an "if…" that may end in one), or it starts with "I" (it may claim the user's
        own words as the companion's)."""
        first = words(fragment)[:1]
        so_far = tuple(words(fragment))
        return (
            bool(self._health)  # next to a health note, every sentence is checked whole
            or (
                not self._listing
                and not _PLAN_LINE.match(fragment)
                and (
                    any(earlier[: len(so_far)] == so_far for earlier in self._earlier_sentences)
                    or so_far[:REPEAT_START_TOKENS] in self._starts
                )
            )
            or any(_occurs_in(hint, so_far) for hint in self._hint_words)
            or any(_occurs_in(quote, so_far) for quote in self._quoted)
            # the message copied so far, a later sentence that may say it back: "嗯，听起来你
            # 已经很累。" + "这个月几乎天天加班，周末也没得休息。" (the messages part, seed 1)
            or any(_occurs_in(message, so_far) for message in self._restate)
            or _may_become_helpdesk(fragment)
            or (self._calm and _may_advise(fragment))
            or (self._good_news and may_sympathise(fragment))
            or _may_say_ai(fragment)
            # "然而，作为AI助手，…": a Chinese sentence's first characters, and one that may
            # say what the companion is, to its end
            or (self._cjk and (len(so_far) < CJK_LEAD or bool(_MAY_SAY_AI.search(fragment))))
            or bool(_MESSAGE_TALK.search(fragment) or _MAY_TALK_OF_MESSAGES.search(fragment))
            or (
                self._notes_talk
                and bool(_NOTES_TALK.search(fragment) or _MAY_TALK_OF_NOTES.search(fragment))
            )
            or first in (["if"], ["如"])
            or (first == ["1"] and len(self._said) >= 4)
            or bool(_MAY_BE_NOTES_LINE.match(fragment))
            or bool(_MAY_NAME_USER.search(fragment))
            # A refusal after a shown sentence: "I'm sorry to hear that you saw such a
            # beautiful sunset on your way home. I can't help with that, but…" (the
            # messages part). Held to its end while it may be one.
            or (self._shown_any and self._calm and first[:1] in ([w] for w in _RISKY_FIRST))
            or may_flip(fragment, self._stances)
            or self._may_say_back(so_far)
            # Past what is shown, a sentence copying this message may end in the user's
            # "I": "Evening! It's nice to have some time on my own. The kids are finally
            # asleep, and I've got the sofa all to myself now." (the messages part).
            or (
                self._shown_any
                and (
                    any(self._may_copy(so_far, m) for m in self._message)
                    or self._speaks_as_user(fragment)  # held to its end: left out then
                    or self._may_claim(so_far)
                )
            )
        )

    def _may_claim(self, so_far: Sequence[str]) -> bool:
        """The sentence so far is in the first person, to no "you", and mostly the
        message's words (or has not reached its third word): it may end as the user's plan
        said as the companion's (``CLAIM_SHARE`` in ``_speaks_as_user``)."""
        if "2" in so_far or "1" not in self._said:
            return False
        if "1" not in so_far:
            return len(so_far) < ECHO_START_WORDS  # "Maybe I…": the "I" may come
        theirs = set(self._said)
        return sum(1 for w in so_far if w in theirs) >= CLAIM_HOLD_SHARE * len(so_far)

    @staticmethod
    def _may_copy(so_far: Sequence[str], message: Sequence[str]) -> bool:
        """The sentence so far copies ``message`` from one of its first three words to its
        last (``_copying``), or may still start to (a word of it among its first two)."""
        if len(so_far) < 3 and any(w in message for w in so_far):
            return True
        return _copying(so_far, message)

    def _may_say_back(self, so_far: Sequence[str]) -> bool:
        """The sentence so far, from one of its first ``SAID_BACK_OWN`` words, copies an
        earlier message from its start (``_left_out``): held until it ends. (Not this
        message: the opening's checks read that one, and "Here's a short story about"
        must not wait for its sentence's end.)"""
        own = 0.0
        for i, token in enumerate(so_far):
            if own > SAID_BACK_OWN:
                return False
            starts = len(so_far) - i >= 2 or _is_cjk(token) or token == "1"
            if starts and any(
                _copies_to_end(so_far, i, m, j) for m, _ in self._said_before for j in (0, 1)
            ):
                return True
            own += 0.5 if _is_cjk(token) else 1.0
        return False

    def _speaks_as_user(self, sentence: str) -> bool:
        """The sentence says the user's own first-person words as the companion's ("I'm
        allergic to peanuts" to "…I can't eat it, I'm allergic to peanuts"): a run of at
        least ``CLAIM_TOKENS`` of the message's tokens, "I" among them, unmirrored; or
        mostly the message's words, in the first person and to no "you" (``CLAIM_SHARE``);
        or it claims the user's name as the companion's ("I am Maya.", ``claims_name``)."""
        if self._user_names and claims_name(sentence, self._user_names):
            return True
        said = words(sentence)
        if "1" not in said:
            return False
        if any(
            n >= CLAIM_TOKENS and "1" in said[i : i + n]
            for i in range(len(said))
            for j in range(len(self._said))
            if (n := _run(said, i, self._said, j))
        ):
            return True
        if "2" not in said and "1" in self._said and len(said) >= CLAIM_TOKENS:
            theirs = set(self._said)
            shared = sum(1 for w in said if w in theirs)
            longest = max(
                (
                    _run(said, i, self._said, j)
                    for i in range(len(said))
                    for j in range(len(self._said))
                ),
                default=0,
            )
            if shared >= CLAIM_SHARE * len(said) and longest >= RESTATED_RUN:
                return True
        return self._retold_cjk(said) or self._owns_message_cjk(said)

    def _formula_then_left_out(self, said: Sequence[str], final: bool) -> Reason | None:
        """The reason to ask again when a thanks formula is followed by a whole sentence the
        guard would leave out: the formula alone is no reply ("You're welcome!" to "thanks
        for keeping me company tonight, it helped more than you know": the long session,
        seed 1, twice). The sentence's checks leave nothing behind that matters: the
        attempt ends here, or the sentence is read again as the reply goes on."""
        if not _formula_first(said) or not (len(said) >= 3 or final):
            return None
        echoed = len(self._echoed)
        if not self._left_out(said[1]):
            return None
        second = _normal(said[1])
        if len(self._echoed) > echoed:
            return "echo"
        return (
            "helpdesk" if is_helpdesk_sentence(said[1]) or _HELPDESK_IN.search(second) else "repeat"
        )

    def _owns_message_cjk(self, said: Sequence[str]) -> bool:
        """A Chinese sentence in the first person that tells the message as the
        companion's own, in other words: "我感到很疲劳，这个月几乎每天都加班，周末也没空休息。"
        to "好累啊，这个月几乎天天加班，周末也没得休息", "我家有一只名叫豆豆的柯基" to "我家有只
        柯基叫豆豆…" (attempts after an echo, biased against the message's words: the
        messages part). Not to a question ("我认为下雨天最适合看电影" answers one), nor a
        first person that reacts ("我理解…", "我也…")."""
        if self._asks or len(said) < CLAIM_CJK_MIN or said[0] != "1":
            return False
        if sum(map(_is_cjk, said)) < 0.8 * len(said):  # "UI设计" is still Chinese
            return False
        if "".join(said[1:5]).startswith(_REACTS_ZH):
            return False
        theirs = set(itertools.pairwise(self._said))
        shared = set(itertools.pairwise(said)) & theirs
        return len(shared) >= OWNED_CJK_PAIRS and len(shared) >= OWNED_CJK_COVER * len(theirs)

    def _retells(self, said: Sequence[str]) -> bool:
        """A Chinese sentence that retells the message (``RETOLD_SHARE``, ``RETOLD_COVER``),
        as said or turned to "you"."""
        if len(said) < CLAIM_CJK_MIN or not _all_cjk(said):
            return False
        pairs = set(itertools.pairwise(said))
        for message in self._message:
            theirs = set(itertools.pairwise(message))
            shared = pairs & theirs
            if len(shared) >= RETOLD_SHARE * len(pairs) and len(shared) >= RETOLD_COVER * len(
                theirs
            ):
                return True
        return False

    def _says_earlier_message(self, first: Sequence[str]) -> bool:
        """The first sentence is a sentence of an earlier message, word for word, in the
        user's own "I": "Pickle just knocked my tea off the desk." (the message before,
        said as the companion's to the next one: the long session, seed 1)."""
        return (
            len(first) >= MIN_COMPARED + 2
            and "1" in first
            and any(speaker and _occurs_in(m, first) for m, speaker in self._said_before)
        )

    def _said_again_cjk(self, said: Sequence[str], final: bool) -> str | None:
        """A Chinese first sentence that says an earlier message ("echo") or reply
        ("repeat") again, turned round or with characters changed
        (``SAID_AGAIN_CJK_SHARE``): the reason; "" while it is Chinese and too short to
        tell (hold it); else None."""
        # A short first sentence is judged with the next: "我挺想你的。已经三年没回成都了。"
        # to "其实我挺想她的，已经三年没回成都了" (the long session, seed 1) was let go at
        # its first six characters.
        tokens: list[str] = []
        taken = 0
        for sentence in said:
            tokens += words(sentence)
            taken += 1
            if len(tokens) >= SAID_AGAIN_CJK_MIN:
                break
        # Mostly Chinese: an English word in it ("你的 grandma今年八十三岁了", seed 3).
        cjk = sum(1 for t in tokens if _is_cjk(t) or t in ("1", "2"))
        if not self._pairs_before or not tokens or cjk < SAID_AGAIN_CJK_SHARE * len(tokens):
            return None
        last = said[taken - 1]
        ended = any(m.end() == len(last) for m in _SENTENCE_END.finditer(last))
        whole = final or len(said) > taken or ended
        if len(tokens) < SAID_AGAIN_CJK_MIN:
            return None if whole else ""
        pairs = list(itertools.pairwise(tokens))
        for theirs, reason in self._pairs_before:
            shared = sum(pair in theirs for pair in pairs)
            if shared >= SAID_AGAIN_CJK_PAIRS and shared >= SAID_AGAIN_CJK_SHARE * len(pairs):
                return reason
        # (A question back is a reply of its own: "嗨，小林！你下班回家了吗？")
        asks_back = last.rstrip().endswith(("？", "?"))
        if whole and not asks_back and any(_retells_cjk(tokens, m) for m in self._restate):
            if not self._may_restate:
                return "echo"
            # A retelling of a request for advice ("怎么才能不拖延啊…"): its answer may follow.
            every = [t for sentence in said for t in words(sentence)]
            verdict = self._said_then_answered(every, final)
            return None if verdict is None else ("echo" if verdict else "")
        # Its own lead may come first ("你的奶奶说你" + the message): held to the opening's
        # usual hold before it is let go.
        return None if whole or len(tokens) >= SAID_AGAIN_CJK_HOLD else ""

    def _retold_cjk(self, said: Sequence[str]) -> bool:
        """In Chinese, with a character changed or put in: "好的，我家有一只柯基叫豆豆。" to
        "我家有只柯基叫豆豆，…" (bench.reply_quality's messages): ``CLAIM_CJK_SHARE`` of
        the sentence's character pairs are the message's, the speaker among them."""
        if len(said) < CLAIM_CJK_MIN or not _all_cjk(said):
            return False
        theirs = set(itertools.pairwise(self._said))
        pairs = list(itertools.pairwise(said))
        if not any("1" in pair and pair in theirs for pair in pairs):
            return False
        return sum(pair in theirs for pair in pairs) >= CLAIM_CJK_SHARE * len(pairs)

    @property
    def left_out(self) -> bool:
        """Some sentence of this attempt was left out."""
        return bool(self._dropped)

    def flush(self) -> str:
        """Everything still held, unchecked: the stream failed, and what came is shown
        with the failure."""
        held, self._held, self._sentence = self._held + self._sentence, "", ""
        self._released = True
        return self._clauses.feed(held) + self._clauses.flush()

    def _sentences(self, piece: str, *, final: bool) -> str:
        """Pass text through, leaving out whole help-desk sentences: a sentence is held
        only while it may still become one, and shown as soon as it cannot."""
        text = self._sentence + piece
        self._sentence = ""
        shown: list[str] = []
        while text:
            end = _SENTENCE_END.search(text)
            if end is None:
                break
            sentence, text = text[: end.end()], text[end.end() :]
            if not self._clear and self._against_health(sentence):
                shown.append(self._reminder(sentence) + _line_break(sentence))
            elif self._clear:
                shown.append(sentence)
            elif not self._left_out(sentence):
                # Held whole: a note said back as written ("The user's physio says no
                # running…") is said to them.
                shown.append(said_to_them(sentence))
            else:
                self._dropped.append(sentence)
                if self._shown_any or "".join(shown).strip():  # the next line stays its own
                    shown.append(_line_break(sentence))
            self._clear = False
        if text:
            if self._whole_only and not final:
                self._sentence = text  # shown when it ends (``near_cap``)
            elif self._clear or (
                not final
                and (whole := _whole_words(text)).strip()
                and not self._may_be_left_out(whole)
            ):
                shown.append(text)
                self._clear = True
            elif final:
                if self._against_health(text):
                    shown.append(self._reminder(text))
                elif not self._left_out(text):
                    shown.append(said_to_them(text))
                else:
                    self._dropped.append(text)
            else:
                self._sentence = text
        out = "".join(shown)
        if not self._shown_any and self._dropped:
            out = out.lstrip()  # the space before a sentence after one left out
        if out.strip():
            self._shown_any = True
            # What the note is about, not what kind of note it is: "any allergies in your
            # guest list" does not say "peanuts" (in Chinese, the condition's own word).
            # When the message named it ("a peanut curry"), the condition is what is left.
            stems = {w[:5] for w in words(out)}
            wanted = (self._health_words - _CONDITION_STEMS) or self._health_words
            if wanted & stems or _CONDITION_ZH.search(out):
                self._health_said = True
        if final and not self._shown_any and self._dropped and not self._opening:
            # A last attempt of nothing else: shown, not lost (an earlier one is asked
            # again: ``end``); but never a retry's hint said back (the caller then has
            # nothing to show: ``turn_reply.lost_thread``).
            # ... nor a help-desk line ("Hello, how can I assist you today?").
            kept = [
                s
                for s in self._dropped
                if not self._recites_hint(words(s))
                and not is_helpdesk_sentence(s)
                and s not in self._echoed
            ]
            return out + "".join(kept)
        return out


def said_to_them(sentence: str) -> str:
    """A sentence of the reply with "the user" in it, said to the user: one about them
    ("The user is talking about their cat Pickle.") with their pronouns too ("You are
    talking about your cat Pickle."); a note's words said back, as ``said_to_user``."""
    body = sentence.lstrip()
    lead = sentence[: len(sentence) - len(body)]
    if body.startswith("The user"):
        return lead + second_person(body)
    return said_to_user(sentence)


# A Latin word still streaming: a model's pieces are parts of words (" rem" + "ember"), and
# "And rem" is no prefix of "And remember, it's important to be kind and respectful.", so
# the sentence said in five replies in a row was let through as soon as its second piece
# came (bench.reply_quality's long session, seed 2). Judged on whole words only.
_PARTIAL_WORD = re.compile(r"[A-Za-z0-9'’]+$")


def _whole_words(text: str) -> str:
    """``text`` without a Latin word it may still be in the middle of."""
    return _PARTIAL_WORD.sub("", text)


def _line_break(sentence: str) -> str:
    """The line breaks a sentence ends with: kept when it is left out or replaced (a
    plan's "…around it. Feel free to ask!\n- Eccentric heel drops…" lost its break, and
    the next line ran on: "…around it.- Eccentric heel drops")."""
    tail = sentence[len(sentence.rstrip()) :]
    return tail if "\n" in tail else ""


def _script(
    message: Sequence[str], earlier_replies: Sequence[str], user_text: str
) -> Literal["latin", "cjk"] | None:
    """The script a reply to the message must open in, or None when either may: a
    message too short to tell, one that names a language ("how do you say cheers in
    Chinese?"), or after a reply that mixes the two (a tutor's explanations with the
    target language's examples)."""
    if len(message) < 2 or _NAMES_LANGUAGE.search(_normal(user_text)):
        return None
    # The last reply only: a tutor mixes the two reply after reply, but one list of
    # phrases ("你好 (Nǐ hǎo) - Hello…", to "let me practise my Chinese a bit") left every
    # Chinese message after it in the window free to get English (the long session, seed
    # 3: seven in a row).
    for reply in earlier_replies[-1:]:
        # Both scripts, each a fair share: a tutor's "厨房 is kitchen. Try: 我在厨房做饭."
        # (not a Chinese reply with "AI" in it: the folded pronouns "1"/"2" are no words).
        toks = words(reply)
        cjk = sum(map(_is_cjk, toks))
        latin = sum(1 for w in toks if w.isascii() and w.isalpha())
        if cjk >= 3 and latin >= 5 and min(cjk, latin) >= 0.2 * (cjk + latin):
            return None
    cjk = sum(1 for w in message if _is_cjk(w))
    if cjk == 0:
        return "latin"
    return "cjk" if cjk * 2 >= len(message) else None


def _is_verse(reply: str) -> bool:
    """A poem: at least ``VERSE_LINES`` lines, three in four of them short, no list."""
    lines = [line for line in reply.splitlines() if line.strip()]
    if len(lines) < VERSE_LINES or any(_LIST_ITEM.match(line) for line in lines):
        return False
    return sum(1 for line in lines if len(words(line)) <= VERSE_LINE) >= 0.75 * len(lines)


def _first_line_is_verse(text: str) -> bool:
    """The opening's first line ended, short and without a sentence's end: a verse line
    ("当我在观看 Snooker 时，关掉音响，")."""
    stripped = text.lstrip()
    if "\n" not in stripped:
        return False
    line = stripped.split("\n", 1)[0].strip()
    return (
        bool(line)
        and len(words(line)) <= VERSE_LINE
        and not _LIST_ITEM.match(line)
        and not _LINE_END.search(line)
    )


def _occurs_in(tokens: Sequence[str], run: Sequence[str]) -> bool:
    """``run`` occurs in ``tokens``, in a row (a sentence that may be a hint said back
    from its middle: "Respond to the user's newest message…")."""
    n = len(run)
    return any(list(tokens[i : i + n]) == list(run) for i in range(len(tokens) - n + 1))


# A line of a list, a table or a heading. A plan says its lines again on purpose ("-
# **Warm-Up**: 10 minutes of light cardio…" each day, and again in the next reply's
# revised plan): left out as repeats, they left a skeleton of headings ("#### Monday
# #### Tuesday …", bench.reply_quality's probe sessions). The loop the repeat rules stop
# is prose.
_PLAN_LINE = re.compile(r"\s*(?:[-*•|#]|\d+[.)]\s)")


def _split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, the last one possibly still open (never empty)."""
    out, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        out.append(text[start : end.end()])
        start = end.end()
    return [*out, text[start:]] if text[start:].strip() or not out else out
