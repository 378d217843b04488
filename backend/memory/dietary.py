"""What the user does not eat: kept in mind whenever a message is about food.

"Heading to a Thai place with the team on Friday. Anything I should keep in mind?" shares
no word with "The user is pescatarian now: no meat, but fish and seafood are fine.", and
MiniLM puts "I'm having friends over for dinner, what should I cook?" and "The user can't
stand coriander" at cosine 0.2, below a dozen notes about the friends and the flat
(docs/benchmarks.md, "Dietary notes for a message about food"). A friend who knows you
are vegetarian does not suggest a steak, whatever words you used: so a message about
eating, cooking, a meal or a place to eat keeps the user's diet, food allergies and foods
they refuse (``retrieve``'s ``keep``), the best note of each.

Two hand-written vocabularies, English and Chinese: what makes a message about food
(``about_food``), and what makes a note a dietary constraint (``dietary_key``: a diet
word, or an allergy or a refusal together with a food). Pure; no I/O.
"""

from __future__ import annotations

import re

from backend.memory.types import Memory

# Words that make a message about food: eating, cooking, meals, places to eat, dishes.
_MEAL_TEXT = """eat eats eating ate cook cooks cooking cooked dinner dinners
    lunch lunches breakfast brunch supper meal meals snack snacks recipe recipes restaurant
    restaurants cafe café bistro takeaway takeout menu dish dishes grocery groceries bake
    baking dessert desserts cuisine barbecue bbq picnic potluck buffet feast hungry dine
    dining diner sushi ramen pizza pasta curry curries noodle noodles dumplings burger
    burgers tacos salad soup sandwich steak satay skewers hotpot cake cookies pho bakery"""
_MEAL = frozenset(_MEAL_TEXT.split())
# "吃" but not 吃惊 (surprised), 吃亏 (lose out), 吃力 (strained), 吃醋 (jealous).
_MEAL_ZH = re.compile(
    r"吃(?![惊亏力醋香])|做饭|做菜|烧菜|下厨|厨房|饭店|餐厅|餐馆|馆子|外卖|火锅|米线|面条|饺子|"
    r"零食|甜点|烧烤|早餐|午餐|晚餐|早饭|午饭|晚饭|夜宵|宵夜|食谱|菜谱|聚餐|请客|美食"
)

# "a Thai place", "Italian food": a cuisine names a meal out.
_CUISINE = re.compile(
    r"\b(?:thai|italian|indian|mexican|chinese|japanese|korean|vietnamese|french|greek|"
    r"lebanese|turkish|spanish|ethiopian|malaysian|indonesian|sichuan|cantonese|yunnan)"
    r" (?:place|restaurant|food|takeaway|takeout|night|joint|spot|cooking|dinner|lunch)\b"
)

# A way of eating: the note is a dietary constraint on its own.
_DIET = re.compile(
    r"\b(?:vegetarian|vegan|pescatarian|pescetarian|halal|kosher|keto|paleo|gluten|"
    r"coeliac|celiac|lactose|dairy-free|plant-based|teetotal|teetotaller)\b"
    r"|\b(?:eat|eats|eating|ate)\b[^.]{0,20}\b(?:meat|fish|pork|beef|seafood) again\b"
    r"|吃素|素食|清真|不吃肉|戒肉"
)
# An allergy, or a refusal: a constraint when it names a food.
_ALLERGY = re.compile(r"\ballerg(?:y|ic|ies)\b|\banaphyla|过敏")
_REFUSES = re.compile(
    r"\b(?:can't|cannot|can not|won't|doesn't|does not|don't|never|refuses? to|no longer)"
    r"(?: stand| eat| eats| eating| touch| have| drink| drinks| like)\b"
    r"|\b(?:hates?|dislikes?|avoids?|avoiding|detests?|loathes?|stopped|gave up|quit|cut out)\b"
    r"|\bpicks? [^.]{0,30}\bout\b|\bintoleran|不吃|不能吃|不碰|不喝|讨厌|受不了|戒了|忌口"
)
# Foods a constraint names (singular; a plural or a longer word that starts with one
# matches: "peanuts", "mushrooms").
_FOOD_TEXT = """meat fish pork beef lamb chicken seafood shellfish shrimp prawn crab lobster
    oyster egg milk cheese dairy cream butter wheat gluten bread nut peanut cashew almond
    walnut hazelnut pistachio satay soy tofu sesame coriander cilantro mushroom onion garlic
    olive tomato celery mustard mayo mayonnaise chilli chili spicy pepper alcohol beer wine
    coffee caffeine sugar offal liver shellfish anchovy tuna salmon avocado banana strawberry
    kiwi mango pineapple coconut corn rice pasta noodle chocolate"""
_FOODS = tuple(sorted(set(_FOOD_TEXT.split()), key=len, reverse=True))
_FOOD_EN = re.compile(r"\b(" + "|".join(_FOODS) + r")(?:s|es)?\b")
# Refusing one of these is a diet ("The user eats fish but still avoids meat.").
_MEATS = frozenset(
    {"meat", "fish", "pork", "beef", "lamb", "chicken", "seafood", "肉", "鱼", "猪肉", "牛肉"}
)
_FOOD_ZH = re.compile(
    r"(香菜|花生|坚果|海鲜|鸡蛋|牛奶|乳制品|猪肉|牛肉|羊肉|鸡肉|鱼|虾|蟹|贝|辣|葱|蒜|姜|芹菜|"
    r"蘑菇|香菇|豆腐|芝麻|麸质|小麦|酒|咖啡|肉)"
)


# The words a store is searched by for such notes (the message's own words may find none).
SEARCH_WORDS = (
    "vegetarian", "vegan", "pescatarian", "allergy", "allergic", "gluten", "lactose", "halal",
    "kosher", "avoids", "过敏", "吃素", "素食", "不吃",
)  # fmt: skip


# One food under its other names: an allergy and the dish it rules out are one constraint.
_SAME_FOOD = {
    "satay": "peanut", "花生": "peanut", "cilantro": "coriander", "香菜": "coriander",
    "海鲜": "seafood", "shellfish": "seafood", "牛奶": "milk", "dairy": "milk",
    "鸡蛋": "egg", "辣": "spicy", "chilli": "spicy", "chili": "spicy", "酒": "alcohol",
}  # fmt: skip


def about_food(text: str) -> bool:
    """Whether ``text`` is about eating, cooking, a meal or a place to eat."""
    flat = text.lower().replace("\u2019", "'")
    if any(word in _MEAL for word in re.findall(r"[a-zé]+", flat)) or _CUISINE.search(flat):
        return True
    return _MEAL_ZH.search(text) is not None


def _food(text: str) -> str | None:
    found = _FOOD_EN.search(text) or _FOOD_ZH.search(text)
    return None if found is None else found.group(1)


# How much a kind of constraint weighs, most first: a diet rules out most dishes, an
# allergy is dangerous, a food refused is a taste.
DIET, ALLERGY, REFUSAL = 0, 1, 2


def dietary_kind(memory: Memory) -> tuple[int, str] | None:
    """What dietary constraint of the user ``memory`` states: how much it weighs
    (``DIET``, ``ALLERGY``, ``REFUSAL``) and a key its restatements share ("diet",
    "food:peanut": "allergic to peanuts" and "avoids satay sauce" are one constraint);
    ``None`` when it states none, or is not about the user."""
    if memory.subject != "user" or memory.is_superseded:
        return None
    text = memory.content.lower().replace("\u2019", "'")
    if _DIET.search(text):
        return DIET, "diet"
    food = _food(text)
    if food is None:
        return None
    refused = _REFUSES.search(text) or re.search(rf"\bno (?:more )?{re.escape(food)}", text)
    if refused and food in _MEATS:
        return DIET, "diet"
    key = f"food:{_SAME_FOOD.get(food, food)}"
    if _ALLERGY.search(text):
        return ALLERGY, key
    return (REFUSAL, key) if refused else None


def dietary_key(memory: Memory) -> str | None:
    """The key of ``dietary_kind`` alone ("diet", "food:coriander"), or ``None``."""
    kind = dietary_kind(memory)
    return None if kind is None else kind[1]
