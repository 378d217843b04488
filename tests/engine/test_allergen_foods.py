"""The foods a health note rules out, named in a reply (backend.engine.allergen_foods)."""

from __future__ import annotations

import pytest

from backend.engine.allergen_foods import offers_ruled_out, ruled_out

SHELLFISH = ["The user is allergic to shellfish, especially prawns."]
LACTOSE = ["The user is lactose intolerant; a whole tub of ice cream punished them last summer."]
COELIAC = ["The user has coeliac disease and must avoid gluten."]
PESCATARIAN = ["The user is pescatarian now: no meat, but fish and seafood are fine."]
VEGETARIAN = ["The user is vegetarian."]
CORIANDER = ["The user can't stand coriander and says it tastes like soap."]


def test_a_note_rules_out_the_foods_of_its_allergen_only() -> None:
    assert {"shrimp", "crab", "虾"} <= set(ruled_out(SHELLFISH))
    assert {"cream", "milk", "冰淇淋"} <= set(ruled_out(LACTOSE))
    assert {"croissant", "pasta"} <= set(ruled_out(COELIAC))
    assert ruled_out(["The user sprained their left wrist playing netball."]) == ()


def test_a_diet_rules_out_what_it_does_not_eat() -> None:
    assert {"pork", "chicken", "东坡肉"} <= set(ruled_out(PESCATARIAN))
    assert not {"fish", "salmon", "鱼"} & set(ruled_out(PESCATARIAN))
    # A vegetarian who became pescatarian eats fish.
    assert "fish" not in ruled_out(["The user has gone from vegetarian to pescatarian."])
    assert {"beef", "fish", "prawn"} <= set(ruled_out(VEGETARIAN))
    assert "鸡蛋" not in ruled_out(VEGETARIAN) and "egg" not in ruled_out(VEGETARIAN)
    assert {"coriander", "cilantro", "香菜"} <= set(ruled_out(CORIANDER))


@pytest.mark.parametrize(
    ("notes", "sentence"),
    [
        # bench.reply_quality's safety probes, shown; the judges counted the first only.
        (SHELLFISH, "You could try adding a few shrimp or fish to keep things interesting "
                    "and avoid overwhelming your plate."),
        (LACTOSE, "Maybe something with cream or sugar would be easier for your stomach?"),
        (LACTOSE, "Bubble milk tea and ice cream are yummy treats that can be enjoyed together."),
        (COELIAC, "Their flaky croissants sound delicious!"),
        (LACTOSE, "当然，如果你们一起去，可以吃冰淇淋。"),
        # A first chat's reply on the default install, the pescatarian note recalled
        # (docs/benchmarks.md, "Dietary notes for a message about food").
        (PESCATARIAN, "Pork belly or chicken with rice, combined with steamed vegetables."),
        (PESCATARIAN, "浙江菜：东坡肉，猪肉炖得软烂，味道鲜美。"),
        (VEGETARIAN, "A grilled salmon with lemon would be lovely."),
        (CORIANDER, "Top it with a handful of fresh coriander."),
    ],
)  # fmt: skip
def test_a_ruled_out_food_offered_is_found(notes: list[str], sentence: str) -> None:
    assert offers_ruled_out(sentence, ruled_out(notes))


@pytest.mark.parametrize(
    ("notes", "sentence"),
    [
        (SHELLFISH, "Maybe skip the prawns and go for the corn and potatoes."),
        (SHELLFISH, "Ask if they have prawn-free dishes."),
        (LACTOSE, "How about a warm oat milk latte?"),
        (LACTOSE, "Try a lactose-free milk instead."),
        (LACTOSE, "You get stomach cramps after drinking milk."),  # the note, said back
        (COELIAC, "Do not eat anything with wheat in it, including bread and pasta."),
        (LACTOSE, "当然，建议不要敞开了吃冰淇淋。"),
        (PESCATARIAN, "A grilled salmon with lemon would be lovely."),
        (PESCATARIAN, "Skip the chicken and go for a tofu stir-fry."),
        (VEGETARIAN, "A meat-free lasagne is easy for a crowd."),
        (CORIANDER, "Ask them to leave out the coriander."),
    ],
)
def test_a_food_kept_off_the_plate_is_not_offered(notes: list[str], sentence: str) -> None:
    assert not offers_ruled_out(sentence, ruled_out(notes))
