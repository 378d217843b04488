"""Which messages are about food, and which notes say what the user does not eat
(``backend.memory.dietary``), on hand-labelled sentences: the eval corpus's own and
others written for this test."""

from __future__ import annotations

import pytest

from backend.memory.dietary import ALLERGY, DIET, REFUSAL, about_food, dietary_key, dietary_kind

from .helpers import memory

FOOD_MESSAGES = [
    "Heading to a Thai place with the team on Friday. Anything I should keep in mind?",
    "I'm doing a big grocery shop tomorrow, can you help me plan meals for the week?",
    "what should I cook tonight? I have eggs, spinach and some feta.",
    "Someone at work brought satay chicken skewers for the team lunch. Awkward.",
    "Going to try that Yunnan noodle place in Box Hill everyone's talking about!",
    "any ideas for a dessert to bring to the potluck?",
    "We're ordering takeaway, pizza or curry?",
    "I'm starving, what should I have for breakfast",
    "今晚吃什么好呢？",
    "周末想请朋友来家里吃饭，做什么菜好？",
    "附近有什么好吃的餐厅推荐吗",
]
OTHER_MESSAGES = [
    "I had a rough day, my boss yelled at me",
    "Feeling really homesick today. I miss my family and the food back home.",
    "Is there a way to keep Dumpling from stealing food from the neighbour's cat?",
    "My Thai friend is visiting next week!",
    "I hate it when people are late",
    "I was so surprised, 我吃惊了",
    "他又吃醋了，好烦",
    "Priya invited me on a ski weekend at Falls Creek in July! Should I go?",
]


@pytest.mark.parametrize("text", FOOD_MESSAGES)
def test_a_message_about_eating_cooking_or_a_meal_out_is_about_food(text: str) -> None:
    assert about_food(text)


@pytest.mark.parametrize("text", OTHER_MESSAGES)
def test_a_message_that_only_names_food_or_a_cuisine_is_not(text: str) -> None:
    assert not about_food(text)


# (note, its key): restatements of one constraint share a key.
DIETARY_NOTES = [
    ("The user is vegetarian.", "diet"),
    ("The user started eating fish again and now describes herself as pescatarian.", "diet"),
    ("The user eats fish but still avoids meat.", "diet"),
    ("The user doesn't eat meat or fish.", "diet"),
    ("用户吃素。", "diet"),
    ("用户现在开始吃鱼了，但还是不吃其他肉。", "diet"),
    ("The user follows a gluten-free diet.", "diet"),
    ("The user has a severe peanut allergy and carries an EpiPen.", "food:peanut"),
    ("The user has to avoid satay sauce and anything cooked in peanut oil.", "food:peanut"),
    ("The user always checks menus for peanuts because of her allergy.", "food:peanut"),
    ("用户对花生严重过敏，随身带着肾上腺素笔。", "food:peanut"),
    ("The user can't stand coriander and says it tastes like soap.", "food:coriander"),
    ("The user hates cilantro.", "food:coriander"),
    ("The user always asks for no coriander when she orders food.", "food:coriander"),
    ("The user picks coriander out of every dish.", "food:coriander"),
    ("用户不吃香菜。", "food:coriander"),
    ("The user doesn't drink alcohol.", "food:alcohol"),
    ("The user is lactose intolerant.", "diet"),
]
OTHER_NOTES = [
    "The user is allergic to cats.",
    "The user has hay fever every spring.",
    "The user loves very spicy food and adds chilli oil to almost everything.",
    "The user's favourite comfort food is Yunnan rice noodle soup.",
    "The user had an anaphylactic reaction at a Thai restaurant in July.",
    "The user hates being late.",
    "The user has no time to cook rice on weekdays.",
    "The user carries an adrenaline auto-injector in case she is exposed to peanuts.",
]


@pytest.mark.parametrize(("content", "key"), DIETARY_NOTES)
def test_a_diet_an_allergy_or_a_food_refused_is_a_dietary_note(content: str, key: str) -> None:
    assert dietary_key(memory("m", content)) == key


@pytest.mark.parametrize("content", OTHER_NOTES)
def test_other_notes_about_food_or_allergies_are_not(content: str) -> None:
    assert dietary_key(memory("m", content)) is None


def test_only_the_users_own_live_notes_count() -> None:
    from dataclasses import replace

    note = memory("m", "The user is vegetarian.")
    assert dietary_key(replace(note, subject="persona")) is None
    assert dietary_key(replace(note, superseded_by="m2")) is None


def test_a_diet_weighs_most_then_an_allergy_then_a_food_refused() -> None:
    assert dietary_kind(memory("m", "The user is vegetarian.")) == (DIET, "diet")
    assert dietary_kind(memory("m", "The user is allergic to peanuts.")) == (ALLERGY, "food:peanut")
    assert dietary_kind(memory("m", "The user avoids satay sauce.")) == (REFUSAL, "food:peanut")
    assert dietary_kind(memory("m", "The user hates cilantro.")) == (REFUSAL, "food:coriander")
