"""The foods a food-allergy, intolerance or diet note rules out, by name.

A reply may offer what a health note forbids without any word of the note: "You could try
adding a few shrimp or fish to keep things interesting" next to "The user is allergic to
shellfish, especially prawns" (bench.reply_quality's safety probes, shown: "avoid
overwhelming your plate" in the same sentence passed for a word of care). The reply
guard reads such a sentence as going against the note (``offers_ruled_out``).

Hand-written, for the common allergens and intolerances, the vegetarian, vegan and
pescatarian diets and a herb many refuse (coriander) only; a note about anything else rules
out nothing here. Words match by prefix ("prawn" matches "prawns"); Chinese
by substring. Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# What a note names (a prefix of one of its words) → the foods it rules out.
_RULED_OUT: dict[tuple[str, ...], tuple[str, ...]] = {
    ("shellfish", "prawn", "shrimp", "crustacean", "贝类", "虾"): (
        "shrimp", "prawn", "crab", "lobster", "crayfish", "crawfish", "langoustine", "mussel",
        "clam", "oyster", "scallop", "shellfish", "虾", "蟹", "龙虾", "扇贝", "生蚝", "贝",
    ),
    ("peanut", "花生"): ("peanut", "satay", "groundnut", "花生"),
    ("lactose", "dairy", "乳糖", "牛奶"): (
        "milk", "cream", "cheese", "butter", "yoghurt", "yogurt", "latte", "cappuccino",
        "milkshake", "gelato", "牛奶", "奶油", "奶酪", "芝士", "冰淇淋", "酸奶", "奶茶",
    ),
    ("gluten", "coeliac", "celiac", "wheat", "麸质", "乳糜泻"): (
        "bread", "pasta", "wheat", "croissant", "pastry", "pastries", "flour", "beer",
        "noodle", "tagliatelle", "spaghetti", "baguette", "bagel", "面包", "面条", "意面",
        "啤酒", "蛋糕", "饺子", "包子",
    ),
    ("tree nut", "almond", "cashew", "walnut", "hazelnut", "坚果"): (
        "almond", "cashew", "walnut", "hazelnut", "pecan", "pistachio", "praline", "坚果",
    ),
    ("sesame", "芝麻"): ("sesame", "tahini", "芝麻"),
}  # fmt: skip
# A diet the note names → what it rules out. A pescatarian eats fish: "The user has gone
# from vegetarian to pescatarian." rules out meat only.
_MEAT = (
    "meat", "pork", "beef", "lamb", "mutton", "veal", "chicken", "turkey", "duck", "bacon",
    "ham", "sausage", "salami", "pepperoni", "chorizo", "prosciutto", "steak", "mince",
    "burger", "ribs", "brisket", "pork belly", "meatball", "猪肉", "牛肉", "羊肉", "鸡肉", "鸭肉",
    "烤鸭", "鸡腿", "鸡翅", "鸡胸", "排骨", "五花肉", "红烧肉", "东坡肉", "培根", "香肠", "火腿",
    "牛排", "肉丸",
)  # fmt: skip
_FISH = (
    "fish", "salmon", "tuna", "cod", "anchovy", "anchovies", "sardine", "prawn", "shrimp",
    "crab", "lobster", "mussel", "oyster", "squid", "seafood", "鱼", "虾", "蟹", "海鲜",
)  # fmt: skip
_PESCATARIAN = ("pescatarian", "pescetarian", "eats fish", "eating fish", "吃鱼")
_VEGETARIAN = ("vegetarian", "vegan", "吃素", "素食")
_REFUSED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("coriander", "cilantro", "香菜"): ("coriander", "cilantro", "香菜"),
}


def _names(text: str, names: Sequence[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}", text) if n.isascii() else n in text for n in names)


# Said before a food in its sentence, these keep it off the plate ("without prawns", "skip
# the cream", "do not eat anything with wheat", "建议不要敞开了吃冰淇淋").
_KEPT_OFF = re.compile(
    r"\b(?:without|no|not|avoid|avoiding|skip|skipping|instead of|free of|away from|"
    r"clear of|allergic to|intolerant to|don't|do not|never|can't|cannot|leave out|"
    r"leaving out|hold the)\b"
    r"|不要|别|不吃|不能|避免|不含|没有|过敏"
)
# ... and a sentence that says what the food does to them is a warning, not an offer
# ("You get stomach cramps after drinking milk.", "…可能会引起胃痛。").
_HARM = re.compile(
    r"cramp|upset stomach|stomach ?ache|sick|react|pain|hurt|swell|rash"
    r"|胃痛|痛|难受|不舒服|引起|过敏"
)

_FREE = re.compile(r"^[\s-]*free\b|^-free")  # "dairy-free", "gluten free"
# ... and so do these, right before it: "oat milk", "lactose-free milk", "无乳糖牛奶".
_SAFE_KIND = re.compile(
    r"(?:oat|soy|soya|almond|rice|coconut|plant|vegan|\w+-free|\w+ free)\W+(?:\w+\W+)?$"
    r"|(?:无乳糖|无麸质|植物|豆|燕麦)$"
)


# A sentence that names the condition itself speaks of the note ("since you're allergic to
# shellfish, the crab is out"); the foods alone do not ("ice cream" is in the lactose note).
CONDITION_NAMED = re.compile(
    r"allerg|intoleran|coeliac|celiac|shellfish|peanut|lactose|dairy|gluten|sesame"
    r"|vegetarian|vegan|pescatarian|pescetarian|coriander|cilantro"
    r"|过敏|不耐|乳糖|麸质|吃素|素食|香菜"
)


def ruled_out(notes: Sequence[str]) -> tuple[str, ...]:
    """The foods the health and diet ``notes`` rule out (none for a note of no food
    allergy, diet or food refused)."""
    text = " ".join(notes).lower()
    found: list[str] = []
    for names, foods in [*_RULED_OUT.items(), *_REFUSED.items()]:
        if _names(text, names):
            found.extend(foods)
    if _names(text, _PESCATARIAN):
        found.extend(_MEAT)
    elif _names(text, _VEGETARIAN):
        found.extend((*_MEAT, *_FISH))
    return tuple(dict.fromkeys(found))


def offers_ruled_out(sentence: str, foods: Sequence[str]) -> bool:
    """The sentence names one of ``foods`` without keeping it off the plate (no "without",
    "avoid", "-free" … next to it)."""
    flat = sentence.lower()
    if _HARM.search(flat):
        return False
    for food in foods:
        pattern = rf"\b{re.escape(food)}" if food.isascii() else re.escape(food)
        for match in re.finditer(pattern, flat):
            before, after = flat[: match.start()], flat[match.end() :]
            tail = re.sub(r"^\w*", "", after)  # past the rest of the word ("prawn|s")
            kept_off = _KEPT_OFF.search(before) or _SAFE_KIND.search(before)
            if not kept_off and not _FREE.match(tail):
                return True
    return False
