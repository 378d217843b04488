"""What the user has at hand right now: the food in their kitchen, not a fact about them.

"what should I cook tonight? I have eggs, spinach and some feta" gave "The user has eggs,
spinach and some feta." (importance 0.7), which every later answer to "what do you know
about me?" then recited beside the user's name and job (docs/benchmarks.md, "A first chat
on the default install"). Nothing in such a fact marks it as passing: the marker
("tonight") is in another sentence of the message. What marks it is its shape: the user
(or their fridge) has a list of groceries and nothing else. The save gate rejects it
(``backend.memory.screening``, rule 1); a fact that says more ("The user has a peanut
allergy", "The user keeps chickens", "The user has a garden with tomatoes") is kept.

Hand-written lists of common groceries, English and Chinese; an item matches by its last
word (plural or not). Pure; no I/O.
"""

from __future__ import annotations

import re

# Groceries a kitchen holds. Not "fish" or "chickens": kept as pets too.
_FOODS_TEXT = """egg spinach feta cheese cheddar mozzarella parmesan halloumi milk bread
    butter rice pasta spaghetti noodle flour sugar chicken beef pork mince bacon ham sausage chorizo
    salmon tuna prawn shrimp tofu bean lentil chickpea tomato potato onion garlic pepper
    carrot broccoli courgette zucchini mushroom lettuce cucumber avocado apple banana lemon
    lime orange berry berries strawberry yoghurt yogurt cream leftover leftovers vegetable
    veg veggies fruit herb basil coriander cilantro parsley kale cabbage corn pea oat oats
    cereal pesto stock tortilla wrap pita quinoa couscous bagel jam honey coffee tea juice
    ingredient ingredients grocery groceries"""
_FOODS = frozenset(_FOODS_TEXT.split())
_FOODS_ZH = (
    "鸡蛋", "蛋", "西红柿", "番茄", "米饭", "剩饭", "剩菜", "面条", "挂面", "菠菜", "青菜", "白菜",
    "土豆", "牛奶", "面包", "豆腐", "黄瓜", "胡萝卜", "洋葱", "鸡肉", "猪肉", "牛肉", "五花肉",
    "虾", "大米", "奶酪", "酸奶", "水果", "苹果", "香蕉", "蔬菜", "青椒", "茄子", "香菇", "蘑菇",
    "葱", "姜", "蒜", "饺子", "速冻", "火腿", "培根", "食材",
)  # fmt: skip
_KITCHEN = r"(?:fridge|freezer|pantry|cupboards?|kitchen)"
# "The user has eggs, spinach and some feta (in the fridge)." / "The user's fridge has…"
_HAS = re.compile(
    rf"^(?:the )?user(?:'s {_KITCHEN} (?:has|holds|contains)| (?:only |still |just )?"
    rf"(?:has|had|has got|got)(?: got)?)\s+(?P<items>.+?)"
    rf"(?:\s+(?:in|at) (?:the |their |his |her )?(?:{_KITCHEN}|home|house)(?: at home)?)?"
    rf"(?:\s+(?:right now|now|today|tonight|at the moment))?$"
)
_HAS_ZH = re.compile(
    r"^用户(?:家里|家|冰箱里|冰箱|厨房里|手头|手边)?(?:现在|目前)?(?:只|还|就)?(?:剩)?有(?P<items>.+)$"
)
_SPLIT = re.compile(r",|\band\b|\bor\b|&|\bplus\b")
_SPLIT_ZH = re.compile(r"和|、|，|,|以及|还有|跟")
_QUANTITY_ZH = re.compile(r"^(?:一些|一点|一盒|一袋|一把|几个|几根|两个|三个|半个|一个|些|点)")
ITEM_WORDS = 4  # an item of more words says more than a grocery ("a garden with tomatoes")


def _grocery(item: str) -> bool:
    words = re.findall(r"[a-z]+", item)
    if not words or len(words) > ITEM_WORDS:
        return False
    if any(w in ("with", "that", "who", "which", "for", "from", "to") for w in words):
        return False
    head = words[-1]
    if head == "chickens":  # kept, not cooked
        return False
    return head in _FOODS or head.rstrip("s") in _FOODS or head.removesuffix("es") in _FOODS


def _grocery_zh(item: str) -> bool:
    item = _QUANTITY_ZH.sub("", item.strip(" 。.！!"))
    return bool(item) and len(item) <= 6 and any(item.endswith(food) for food in _FOODS_ZH)


def at_hand(content: str) -> bool:
    """The fact only lists the groceries the user has (module docstring)."""
    text = " ".join(content.split()).strip().rstrip(".!。！")
    zh = _HAS_ZH.match(text)
    if zh is not None:
        items = [i for i in _SPLIT_ZH.split(zh.group("items")) if i.strip()]
        return bool(items) and all(_grocery_zh(i) for i in items)
    match = _HAS.match(text.lower())
    if match is None:
        return False
    items = [i for i in _SPLIT.split(match.group("items")) if i.strip()]
    return bool(items) and all(_grocery(i) for i in items)
