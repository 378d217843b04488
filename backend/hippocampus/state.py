"""Session memory state and the hippocampus result (docs/architecture.md, "One turn").

Frozen dataclasses: the merge never mutates a state, it returns a new one. The session
store keeps the state as JSON, so ``SessionMemoryState`` converts to and from plain
dicts. ``from_dict`` is tolerant, because ``short_term`` is a derived view: the
transcript holds every raw message, and a damaged row must not break a session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from backend.memory.types import Candidate, Emotion

Role = Literal["user", "assistant", "note"]
ROLES: tuple[Role, ...] = ("user", "assistant", "note")


@dataclass(frozen=True, slots=True)
class ShortTermItem:
    """One short-term item: a verbatim message, or a compressed one (or a note)."""

    role: Role
    text: str
    compressed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "text": self.text, "compressed": self.compressed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShortTermItem:
        """Strict: raises ``ValueError`` on an unknown role or a non-string text."""
        role = data.get("role")
        text = data.get("text")
        if role not in ROLES:
            raise ValueError(f"unknown short-term role {role!r}")
        if not isinstance(text, str):
            raise ValueError("short-term text must be a string")
        return cls(role=cast(Role, role), text=text, compressed=bool(data.get("compressed")))


def emotion_to_dict(emotion: Emotion | None) -> dict[str, Any] | None:
    return None if emotion is None else {"label": emotion.label, "intensity": emotion.intensity}


def emotion_from_dict(data: Any) -> Emotion | None:
    """``None`` for anything that is not ``{label: non-empty str, intensity: number}``."""
    if not isinstance(data, Mapping):
        return None
    label = data.get("label")
    intensity = data.get("intensity", 0.5)
    if not isinstance(label, str) or not label.strip():
        return None
    if isinstance(intensity, bool) or not isinstance(intensity, int | float):
        intensity = 0.5
    return Emotion(label=label, intensity=float(intensity))


@dataclass(frozen=True, slots=True)
class SessionMemoryState:
    """What the app keeps per session besides the transcript.

    ``short_term`` is ordered old → new; ``user_emotion`` is the user's last known
    feeling (the next turn's target emotion), ``None`` when unknown. ``missed``: items
    the budget trimmed from short-term while the hippocampus was failing, so no run has
    folded them into the background yet; the next run that works sees them (old → new,
    bounded, see ``merge``).
    """

    background: str = ""
    short_term: tuple[ShortTermItem, ...] = ()
    user_emotion: Emotion | None = None
    missed: tuple[ShortTermItem, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (only str, bool, float, list, dict, None)."""
        return {
            "background": self.background,
            "short_term": [item.to_dict() for item in self.short_term],
            "user_emotion": emotion_to_dict(self.user_emotion),
            "missed": [item.to_dict() for item in self.missed],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SessionMemoryState:
        """Tolerant: missing keys take defaults, malformed short-term items are skipped.

        ``None`` (a session without saved state) gives the empty state.
        """
        if not isinstance(data, Mapping):
            return cls()
        background = data.get("background")
        return cls(
            background=background if isinstance(background, str) else "",
            short_term=_items(data.get("short_term")),
            user_emotion=emotion_from_dict(data.get("user_emotion")),
            missed=_items(data.get("missed")),
        )


def _items(raw_items: Any) -> tuple[ShortTermItem, ...]:
    """The well-formed items of a stored list (a malformed one is skipped)."""
    items: list[ShortTermItem] = []
    if isinstance(raw_items, list | tuple):
        for raw in raw_items:
            if isinstance(raw, Mapping):
                try:
                    items.append(ShortTermItem.from_dict(raw))
                except ValueError:
                    continue
    return tuple(items)


@dataclass(frozen=True, slots=True)
class HippocampusResult:
    """The validated output of one hippocampus run.

    ``short_term`` holds the model's rewrite of the previous short-term items (the merge
    decides which are compressed). ``dropped`` lists, for the memory report, every item
    or field that validation dropped or replaced, each with its reason.
    """

    background: str
    short_term: tuple[ShortTermItem, ...] = ()
    long_term: tuple[Candidate, ...] = ()
    user_emotion: Emotion | None = None
    dropped: tuple[str, ...] = ()
