"""Persona cards (``personas/*.json``) → ``Persona`` objects; a registry with a default.

A persona's id is the file's name without ``.json``; it becomes a model name of the
OpenAI-compatible API and a part of memory namespaces, so it is restricted to
``[a-z0-9][a-z0-9_-]{0,63}`` (no path separators, no dots, no upper case).

Failure policy: a bad card is bad configuration and fails at start with
``PersonaError``, whose message names the file and the field. Nothing is read at import
time.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from backend.config import PERSONA_ID_PATTERN, ConfigError, MemorySettings

logger = logging.getLogger(__name__)

# What clients send as ``model`` when they mean "whatever the server's default is" (wire.md).
PLACEHOLDER_MODELS = frozenset({"", "string"})
_ID = re.compile(PERSONA_ID_PATTERN)


class PersonaError(ValueError):
    """A persona card is invalid, or a persona directory cannot be used."""


class UnknownPersona(KeyError):
    """No persona with this id (the web layer answers 404)."""


@dataclass(frozen=True, slots=True)
class Persona:
    id: str
    name: str
    description: str
    system_prompt: str
    greeting: str = ""
    language: str = "auto"  # "auto": answer in the user's language; else a BCP 47 tag
    hippocampus_focus: str | None = None  # what this persona cares to remember
    # Memory settings this persona changes (same keys as config.json's ``memory``).
    memory: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)


class _Card(BaseModel):
    """The JSON shape of a persona card (validated at load)."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    id: str | None = Field(None, pattern=PERSONA_ID_PATTERN)
    name: str = Field(min_length=1, max_length=80)
    description: str = Field("", max_length=500)
    language: str = Field("auto", pattern=r"^(auto|[a-z]{2,3}(-[A-Za-z0-9]{2,8})*)$")
    system_prompt: str = Field(min_length=1, max_length=20_000)
    greeting: str = Field("", max_length=2_000)
    hippocampus_focus: str | None = Field(None, max_length=4_000)
    memory: dict[str, Any] = Field(default_factory=dict)

    @field_validator("hippocampus_focus")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return value or None


def _describe(exc: ValidationError) -> list[str]:
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = error["msg"].replace("Input should be", "must be")
        if error["type"] == "extra_forbidden":
            message = f"unknown field {where!r}"
        elif error["type"] == "missing":
            message = "is required"
        elif error["type"] == "string_pattern_mismatch" and where == "id":
            message = "must match [a-z0-9][a-z0-9_-]{0,63}"
        lines.append(f"{where}: {message}")
    return lines


def load_persona(path: Path, base_memory: MemorySettings | None = None) -> Persona:
    """Read and validate one card. ``base_memory`` checks the card's memory overrides
    (default: the built-in memory settings). Raises ``PersonaError``.
    """
    stem = path.name.removesuffix(".json")
    if not _ID.match(stem):
        raise PersonaError(
            f"{path}: the file name must be a persona id: [a-z0-9][a-z0-9_-]{{0,63}}.json"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PersonaError(f"{path}: cannot read: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PersonaError(f"{path}: not valid UTF-8 JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PersonaError(f"{path}: the top level must be a JSON object")
    try:
        card = _Card.model_validate(data)
    except ValidationError as exc:
        raise PersonaError("\n".join(f"{path}: {line}" for line in _describe(exc))) from None
    if card.id is not None and card.id != stem:
        raise PersonaError(f"{path}: id: {card.id!r} must equal the file name ({stem!r})")
    if card.memory:
        try:
            (base_memory or MemorySettings()).with_overrides(card.memory, source=str(path))
        except ConfigError as exc:
            raise PersonaError(str(exc)) from None
    return Persona(
        id=stem,
        name=card.name,
        description=card.description,
        system_prompt=card.system_prompt,
        greeting=card.greeting,
        language=card.language,
        hippocampus_focus=card.hippocampus_focus,
        memory=MappingProxyType(json.loads(json.dumps(card.memory))),  # a deep, read-only copy
    )


def load_personas(directory: Path, base_memory: MemorySettings | None = None) -> dict[str, Persona]:
    """Every ``*.json`` card in ``directory`` (hidden files skipped), by id, in name order.

    Raises ``PersonaError`` when the directory is missing or any card is invalid (all
    problems are reported together).
    """
    if not directory.is_dir():
        raise PersonaError(f"{directory}: persona directory not found")
    personas: dict[str, Persona] = {}
    problems: list[str] = []
    for path in sorted(directory.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            persona = load_persona(path, base_memory)
        except PersonaError as exc:
            problems.append(str(exc))
            continue
        personas[persona.id] = persona
    if problems:
        raise PersonaError("\n".join(problems))
    logger.info("loaded %d personas from %s", len(personas), directory)
    return personas


class PersonaRegistry:
    """The personas the app serves, with the one used when a client names none."""

    def __init__(self, personas: Mapping[str, Persona], default_id: str) -> None:
        if default_id not in personas:
            known = ", ".join(sorted(personas)) or "none"
            raise PersonaError(f"default persona {default_id!r} not found (known: {known})")
        self._personas = dict(personas)
        self._default = personas[default_id]

    @classmethod
    def load(
        cls, directory: Path, default_id: str, base_memory: MemorySettings | None = None
    ) -> PersonaRegistry:
        return cls(load_personas(directory, base_memory), default_id)

    @property
    def default(self) -> Persona:
        return self._default

    def get(self, persona_id: str) -> Persona | None:
        return self._personas.get(persona_id)

    def resolve(self, model: str | None) -> Persona:
        """The persona a client's ``model`` names; placeholders (``None``, ``""``,
        ``"string"``) mean the default. Raises ``UnknownPersona``.
        """
        name = (model or "").strip()
        if name in PLACEHOLDER_MODELS:
            return self._default
        persona = self._personas.get(name)
        if persona is None:
            raise UnknownPersona(name)
        return persona

    def __iter__(self) -> Iterator[Persona]:
        return iter(self._personas.values())

    def __len__(self) -> int:
        return len(self._personas)

    def __contains__(self, persona_id: object) -> bool:
        return persona_id in self._personas
