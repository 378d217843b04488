"""Shared pieces of the turn benchmarks (``turn_latency``, ``prompt_size``).

- ``TextMaker``: varied, reproducible English text from word lists and a seed: memories
  (standalone third-person facts), user messages (some of which state a fact worth
  remembering) and companion replies of realistic length;
- ``load_personas``: the repository's persona files with the default settings;
- ``percentile``, ``machine_line``, ``command_line``: reporting helpers.

Nothing here times anything; the benches do.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import platform
import random
import shlex
import sys
from dataclasses import dataclass
from multiprocessing.managers import BaseManager
from pathlib import Path

import numpy as np

from backend.config import MemorySettings, ServerSettings
from backend.personas import PersonaRegistry

REPO = Path(__file__).resolve().parent.parent

NAMES = (
    "Mei", "Tom", "Aisha", "Lukas", "Priya", "Sam", "Yuki", "Diego", "Nora", "Omar",
    "Lena", "Kofi", "Hana", "Ivan", "Rosa", "Ben", "Zara", "Leo", "Maya", "Chen",
)  # fmt: skip
RELATIONS = (
    "sister", "brother", "mother", "father", "best friend", "colleague", "manager",
    "neighbour", "partner", "cousin", "grandmother", "son", "daughter", "flatmate",
)  # fmt: skip
PLACES = (
    "Osaka", "Berlin", "Lisbon", "Toronto", "Nairobi", "Lyon", "Seoul", "Austin",
    "Kraków", "Porto", "Melbourne", "Edinburgh", "Taipei", "Quito", "Oslo",
)  # fmt: skip
LIKES = (
    "oolong tea", "long bike rides", "jazz records", "rainy mornings", "board games",
    "spicy ramen", "watercolour painting", "trail running", "old detective novels",
    "baking sourdough", "chess puzzles", "night swimming", "growing tomatoes",
    "learning Japanese", "vinyl collecting", "bouldering", "film photography",
)  # fmt: skip
DISLIKES = (
    "crowded trains", "early meetings", "loud restaurants", "cold coffee",
    "long phone calls", "horror films", "flying", "spreadsheets", "small talk",
)  # fmt: skip
JOBS = (
    "nurse", "software engineer", "teacher", "architect", "baker", "data analyst",
    "librarian", "physiotherapist", "translator", "electrician", "journalist",
)  # fmt: skip
EVENTS = (
    "a job interview", "a driving test", "a dentist appointment", "a piano recital",
    "a half marathon", "a wedding", "a thesis defence", "a house move", "a surgery",
    "a first date", "a performance review", "a family reunion", "a visa appointment",
)  # fmt: skip
WHEN = (
    "next Monday", "on Friday", "in two weeks", "at the end of the month", "tomorrow",
    "this weekend", "in March", "after the holidays", "next spring", "on the 14th",
)  # fmt: skip
FEELINGS = (
    "anxious", "excited", "tired", "calm", "sad", "hopeful", "frustrated", "proud",
    "lonely", "relieved", "nervous", "content",
)  # fmt: skip
TOPICS = (
    "work", "sleep", "the weekend", "cooking", "money", "a book", "the weather",
    "an old friend", "exercise", "a trip", "the garden", "a new hobby", "family",
)  # fmt: skip
FILLERS = (
    "Honestly I am not sure what to make of it.",
    "It has been on my mind all day.",
    "Anyway, that is where things stand.",
    "I keep going back and forth about it.",
    "Maybe I am overthinking it again.",
    "It was a long day, so bear with me.",
    "I did not expect it to go like that.",
    "Part of me is glad, part of me is worried.",
    "I wanted to tell someone about it.",
    "It is a small thing, but it matters to me.",
)  # fmt: skip
REPLY_OPENERS = (
    "That sounds like a lot to carry at the end of a day.",
    "I am glad you told me about this.",
    "It makes sense that this is on your mind.",
    "That is a real milestone, and it is fine to feel a bit of everything about it.",
    "Thank you for trusting me with that.",
    "It sounds like you have been thinking about this carefully.",
    "Some days are just heavier than others, and this sounds like one of them.",
)  # fmt: skip
REPLY_MIDDLES = (
    "From what you describe, the hardest part seems to be not knowing how it will turn out.",
    "You have handled harder things before, even if it does not feel that way tonight.",
    "It might help to break it into one small step you could take tomorrow.",
    "There is no rush to decide anything right now; you can let it settle overnight.",
    "It is okay to want two things at once, even when they pull in different directions.",
    "Whatever happens, it does not change how much effort you have already put in.",
    "Sometimes saying it out loud is already half of the work.",
    "If it helps, we can go through what you know so far and what is still open.",
)  # fmt: skip
REPLY_QUESTIONS = (
    "What would make tomorrow a little easier?",
    "How are you feeling about it right now?",
    "Is there someone you could talk to about it this week?",
    "What part of it worries you the most?",
    "Do you want to tell me more about how it started?",
    "What would a good outcome look like for you?",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class UserLine:
    """A user message; ``fact`` is the standalone memory it states, if any."""

    text: str
    fact: str | None = None
    category: str = "general"
    keywords: tuple[str, ...] = ()


class TextMaker:
    """Reproducible varied text: the same ``seed`` always gives the same sequence."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def _pick(self, words: tuple[str, ...]) -> str:
        return self.rng.choice(words)

    def memory(self) -> tuple[str, str]:
        """A standalone third-person fact and its category."""
        r = self.rng.randrange(7)
        name, rel, place = self._pick(NAMES), self._pick(RELATIONS), self._pick(PLACES)
        if r == 0:
            return f"The user's {rel} {name} lives in {place}.", "relationship"
        if r == 1:
            return f"The user loves {self._pick(LIKES)}, especially {self._pick(WHEN)}.", (
                "preference"
            )
        if r == 2:
            return f"The user dislikes {self._pick(DISLIKES)}.", "preference"
        if r == 3:
            return f"The user works as a {self._pick(JOBS)} in {place}.", "work"
        if r == 4:
            return f"The user has {self._pick(EVENTS)} {self._pick(WHEN)}.", "experience"
        if r == 5:
            return (
                f"The user often feels {self._pick(FEELINGS)} when talking about "
                f"{self._pick(TOPICS)}.",
                "emotion",
            )
        return f"The user has been getting into {self._pick(LIKES)} with {name}.", "interest"

    def user_line(self) -> UserLine:
        """One user message, one to four sentences; about one in five states a fact."""
        r = self.rng.random()
        name, rel, place = self._pick(NAMES), self._pick(RELATIONS), self._pick(PLACES)
        fillers = " ".join(self.rng.sample(FILLERS, self.rng.randrange(0, 3)))
        if r < 0.07:
            like = self._pick(LIKES)
            text = f"I have to say, I really love {like}. {fillers}"
            fact = f"The user loves {like}."
            return UserLine(text.strip(), fact, "preference", tuple(like.split()[-2:]))
        if r < 0.14:
            text = f"My {rel} {name} just moved to {place}, so I will see them less. {fillers}"
            fact = f"The user's {rel} {name} moved to {place}."
            return UserLine(text.strip(), fact, "relationship", (rel.split()[-1], name.lower()))
        if r < 0.2:
            event, when = self._pick(EVENTS), self._pick(WHEN)
            text = f"I have {event} {when} and I feel {self._pick(FEELINGS)} about it. {fillers}"
            fact = f"The user has {event} {when}."
            return UserLine(text.strip(), fact, "experience", tuple(event.split()[-1:]))
        if r < 0.6:
            text = (
                f"Today was about {self._pick(TOPICS)} again. I felt {self._pick(FEELINGS)} "
                f"most of the afternoon. {fillers}"
            )
            return UserLine(text.strip())
        if r < 0.9:
            text = (
                f"Do you remember what I told you about {self._pick(TOPICS)}? "
                f"I talked to {name} about it. {fillers}"
            )
            return UserLine(text.strip())
        # A longer message, now and then.
        parts = self.rng.sample(FILLERS, self.rng.randrange(4, 9))
        text = f"Long day. {' '.join(parts)} And {name} says hi from {place}."
        return UserLine(text)

    def reply(self) -> str:
        """A companion reply: two to five sentences, like the persona's style asks."""
        middles = self.rng.sample(REPLY_MIDDLES, self.rng.randrange(1, 4))
        question = [self._pick(REPLY_QUESTIONS)] if self.rng.random() < 0.7 else []
        return " ".join([self._pick(REPLY_OPENERS), *middles, *question])


def split_chunks(text: str, n: int) -> list[str]:
    """``text`` cut into ``n`` (at least 1) consecutive non-empty pieces, word-aligned."""
    words = text.split(" ")
    n = max(1, min(n, len(words)))
    bounds = [round(i * len(words) / n) for i in range(n + 1)]
    pieces = [" ".join(words[a:b]) for a, b in itertools.pairwise(bounds)]
    return [p if i == 0 else " " + p for i, p in enumerate(pieces)]


def load_personas() -> PersonaRegistry:
    """The repository's personas, default persona and memory settings as the app's."""
    server = ServerSettings()
    return PersonaRegistry.load(
        REPO / "personas", server.default_persona, base_memory=MemorySettings()
    )


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def machine_line() -> str:
    one, five, fifteen = os.getloadavg()
    return (
        f"machine: {platform.machine()}, nproc {os.cpu_count()}, load average "
        f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min), Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )


def command_line(module: str, argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return "command: " + shlex.join(["python", "-m", module, *args])


class _RemoteScripted:
    """A ``ScriptedOpenAIServer`` living in the manager's process (see ``UpstreamProcess``)."""

    def __init__(self) -> None:
        from tests.llm.scripted_server import ScriptedOpenAIServer

        self._server = ScriptedOpenAIServer()
        self._server.__enter__()

    def base_url(self) -> str:
        return self._server.base_url

    def set_default(self, reply: object) -> None:
        self._server.default = reply  # type: ignore[assignment]

    def enqueue(self, reply: object, times: int = 1) -> None:
        self._server.enqueue(reply, times=times)  # type: ignore[arg-type]

    def close(self) -> None:
        self._server.__exit__(None, None, None)


class _UpstreamManager(BaseManager):
    pass


_UpstreamManager.register("Scripted", _RemoteScripted)


class UpstreamProcess:
    """A scripted OpenAI-compatible server in a process of its own.

    A real upstream runs elsewhere; in the benchmark's own process its threads would
    compete with the app for the interpreter lock and inflate the app's overhead.
    Same use as ``ScriptedOpenAIServer``: ``base_url``, ``default = Reply(...)``,
    ``enqueue``.
    """

    def __enter__(self) -> UpstreamProcess:
        self._manager = _UpstreamManager(ctx=multiprocessing.get_context("spawn"))
        self._manager.start()
        self._remote = self._manager.Scripted()  # type: ignore[attr-defined]
        self.base_url: str = self._remote.base_url()
        return self

    @property
    def default(self) -> object:
        raise AttributeError("write-only: the reply lives in the server's process")

    @default.setter
    def default(self, reply: object) -> None:
        self._remote.set_default(reply)

    def enqueue(self, reply: object, *, times: int = 1) -> None:
        self._remote.enqueue(reply, times)

    def __exit__(self, *exc: object) -> None:
        self._remote.close()
        self._manager.shutdown()
