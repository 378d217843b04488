"""12 facts x 5 near-paraphrases: the redundancy benchmark's corpus (written for this project).

Each topic has an importance; its paraphrases sit within a few hundredths of it, as a
real extractor's restatements of one fact do. That is what makes plain top-k spend its
slots on one or two facts.
"""

from __future__ import annotations

TOPICS: list[tuple[str, float, list[str]]] = [
    (
        "sister",
        0.95,
        [
            "The user's sister Mei lives in Osaka.",
            "Mei, the user's older sister, is based in Osaka.",
            "The user has a sister called Mei who lives in Osaka, Japan.",
            "The user's sister Mei moved to Osaka a few years ago and lives there.",
            "Osaka is where the user's sister Mei lives.",
        ],
    ),
    (
        "allergy",
        0.93,
        [
            "The user is allergic to peanuts.",
            "The user has a peanut allergy.",
            "Peanuts give the user an allergic reaction.",
            "The user must avoid peanuts because of an allergy.",
            "The user mentioned being allergic to peanuts.",
        ],
    ),
    (
        "job",
        0.85,
        [
            "The user works as a nurse at a children's hospital.",
            "The user is a paediatric nurse at a hospital.",
            "The user's job is nursing in a children's hospital.",
            "The user works night shifts as a nurse caring for children.",
            "The user is employed as a nurse on a children's ward.",
        ],
    ),
    (
        "cat",
        0.8,
        [
            "The user has a grey cat named Dumpling.",
            "Dumpling is the user's grey cat.",
            "The user owns a cat called Dumpling with grey fur.",
            "The user's pet is a grey cat named Dumpling.",
            "The user lives with a grey cat, Dumpling.",
        ],
    ),
    (
        "marathon",
        0.75,
        [
            "The user is training for the Melbourne marathon in October.",
            "The user plans to run the Melbourne marathon this October.",
            "The user has been training to run a marathon in Melbourne in October.",
            "The Melbourne marathon in October is the user's running goal.",
            "The user signed up for October's Melbourne marathon and is training for it.",
        ],
    ),
    (
        "coffee",
        0.7,
        [
            "The user drinks a flat white every morning.",
            "Every morning the user has a flat white.",
            "The user's morning coffee is always a flat white.",
            "The user starts each day with a flat white.",
            "A flat white is the user's daily morning drink.",
        ],
    ),
    (
        "japanese",
        0.65,
        [
            "The user is studying Japanese for the JLPT N3 exam.",
            "The user is preparing for the JLPT N3 Japanese test.",
            "The user studies Japanese and aims to pass JLPT N3.",
            "The user is learning Japanese to sit the N3 exam.",
            "The user's goal is to pass the Japanese N3 proficiency test.",
        ],
    ),
    (
        "grandfather",
        0.6,
        [
            "The user's grandfather passed away last spring.",
            "The user lost her grandfather last spring.",
            "Last spring the user's grandfather died.",
            "The user is grieving her grandfather, who died in the spring.",
            "The user's grandpa passed away in spring last year.",
        ],
    ),
    (
        "piano",
        0.55,
        [
            "The user plays the piano to relax.",
            "Playing piano helps the user unwind.",
            "The user relaxes by playing the piano.",
            "The user likes to play piano when stressed.",
            "The piano is how the user calms down.",
        ],
    ),
    (
        "hometown",
        0.5,
        [
            "The user grew up in Kunming.",
            "Kunming is the user's hometown.",
            "The user was raised in Kunming, Yunnan.",
            "The user spent her childhood in Kunming.",
            "The user comes from Kunming originally.",
        ],
    ),
    (
        "spicy",
        0.45,
        [
            "The user loves very spicy food.",
            "The user enjoys extremely spicy dishes.",
            "Spicy food is the user's favourite.",
            "The user likes food with a lot of chilli.",
            "The user prefers her meals very spicy.",
        ],
    ),
    (
        "podcast",
        0.4,
        [
            "The user listens to a true-crime podcast on her commute.",
            "On the way to work the user listens to true-crime podcasts.",
            "The user enjoys true-crime podcasts while commuting.",
            "True-crime podcasts keep the user company on her commute.",
            "The user's commute soundtrack is a true-crime podcast.",
        ],
    ),
]
