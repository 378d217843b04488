"""Persona cards (``personas/*.json``) → ``Persona`` objects; a registry with a default.

The card format is documented in ``docs/personas.md``.

A persona's id is the file's name without ``.json``; it becomes a model name of the
OpenAI-compatible API and a part of memory namespaces, so it is restricted to
``[a-z0-9][a-z0-9_-]{0,63}`` (no path separators, no dots, no upper case).

Failure policy: a bad card is bad configuration and fails at start with
``PersonaError``, whose message names the file and the field. Nothing is read at import
time.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from backend.config import PERSONA_ID_PATTERN, ConfigError, MemorySettings
from backend.memory.types import GatePolicy, RetrievalPolicy

logger = logging.getLogger(__name__)

# What clients send as ``model`` when they mean "whatever the server's default is" (docs/api.md):
# "string" is the OpenAPI docs' example value; the NVIDIA NeMo Agent Toolkit UI hard-codes
# "placeholder" in its /chat and /chat/stream bodies (proxy/request-transformers.js:81 and
# :120 since NVIDIA/NeMo-Agent-Toolkit-UI@dd0766a, 2026-04-01) and sent "nvidia/nemotron"
# there before (from 8b91a7e, 2025-10-22).
PLACEHOLDER_MODELS = frozenset({"", "string", "placeholder", "nvidia/nemotron"})
_ID = re.compile(PERSONA_ID_PATTERN)
# The memory settings a persona may change (config.json's ``memory`` keys); the rest
# (mode, pools, budgets, decay) belong to the whole installation.
MEMORY_OVERRIDE_KEYS = ("weights", "hybrid", "lambda", "k", "gate")
_RETRIEVAL_KEYS = frozenset({"weights", "hybrid", "lambda", "k"})
# An avatar is an emoji (a few characters, no path) or an image under personas/avatars/.
AVATAR_PATH = re.compile(r"^avatars/[A-Za-z0-9_][A-Za-z0-9_-]{0,99}\.(png|jpe?g|webp|gif)$")


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
    # Memory settings this persona changes (a subset of config.json's ``memory`` keys:
    # ``MEMORY_OVERRIDE_KEYS``).
    memory: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    avatar: str | None = None  # an emoji, or "avatars/<file>" under the persona directory
    # The policies the overrides give (merged into the configured memory settings at
    # load); None: the installation's own.
    retrieval_policy: RetrievalPolicy | None = field(default=None, compare=False, repr=False)
    gate_policy: GatePolicy | None = field(default=None, compare=False, repr=False)


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
    avatar: str | None = Field(None, max_length=120)

    @field_validator("hippocampus_focus", "avatar")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("avatar")
    @classmethod
    def _avatar(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if any(ch in value for ch in "/\\.:") or any(ch.isspace() for ch in value):
            if not AVATAR_PATH.match(value):
                raise ValueError(
                    "must be an emoji or a relative path avatars/<name>.png|jpg|jpeg|webp|gif"
                )
        elif len(value) > 8 or not value.isprintable():
            raise ValueError("an emoji avatar is at most 8 printable characters")
        return value

    @field_validator("memory")
    @classmethod
    def _override_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if key not in MEMORY_OVERRIDE_KEYS:
                hint = difflib.get_close_matches(key, MEMORY_OVERRIDE_KEYS, n=1)
                allowed = ", ".join(MEMORY_OVERRIDE_KEYS)
                message = f"{key!r} cannot be overridden by a persona (allowed: {allowed})"
                if hint:
                    message += f"; did you mean {hint[0]!r}?"
                raise ValueError(message)
        return value


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
        elif error["type"] == "value_error":
            message = message.removeprefix("Value error, ")
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
    return _persona(stem, card, str(path), base_memory)


def validate_card(
    data: Any, *, source: str, base_memory: MemorySettings | None = None
) -> dict[str, Any]:
    """Check a card given as data (``source`` names it in errors); returns the card as
    it would be written (JSON-able, defaults filled in). Raises ``PersonaError``."""
    if not isinstance(data, dict):
        raise PersonaError(f"{source}: the top level must be a JSON object")
    try:
        card = _Card.model_validate(data)
    except ValidationError as exc:
        raise PersonaError("\n".join(f"{source}: {line}" for line in _describe(exc))) from None
    _persona(card.id or "card", card, source, base_memory)
    return card.model_dump(exclude_none=True)


def _persona(
    persona_id: str, card: _Card, source: str, base_memory: MemorySettings | None
) -> Persona:
    retrieval = gate = None
    if card.memory:
        try:
            merged = (base_memory or MemorySettings()).with_overrides(card.memory, source=source)
        except ConfigError as exc:
            raise PersonaError(str(exc)) from None
        if _RETRIEVAL_KEYS & card.memory.keys():
            retrieval = merged.retrieval_policy()
        if "gate" in card.memory:
            gate = merged.gate_policy()
    return Persona(
        id=persona_id,
        name=card.name,
        description=card.description,
        system_prompt=card.system_prompt,
        greeting=card.greeting,
        language=card.language,
        hippocampus_focus=card.hippocampus_focus,
        memory=MappingProxyType(json.loads(json.dumps(card.memory))),  # a deep, read-only copy
        avatar=card.avatar,
        retrieval_policy=retrieval,
        gate_policy=gate,
    )


def write_card(directory: Path, persona_id: str, card: Mapping[str, Any]) -> Path:
    """Write ``<directory>/<persona_id>.json`` atomically (a temporary file renamed)."""
    if not _ID.match(persona_id):
        raise PersonaError(f"{persona_id!r}: not a persona id ([a-z0-9][a-z0-9_-]{{0,63}})")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{persona_id}.json"
    body = {"id": persona_id, **{k: v for k, v in card.items() if k != "id"}}
    text = json.dumps(body, ensure_ascii=False, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".card-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


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
        self._guard = threading.Lock()

    @classmethod
    def load(
        cls, directory: Path, default_id: str, base_memory: MemorySettings | None = None
    ) -> PersonaRegistry:
        return cls(load_personas(directory, base_memory), default_id)

    def add(self, persona: Persona) -> None:
        """Add a persona, or replace the one with its id (an import); readers see the
        old mapping or the new one, never a half-changed one."""
        with self._guard:
            personas = dict(self._personas)
            personas[persona.id] = persona
            self._personas = dict(sorted(personas.items()))
            if persona.id == self._default.id:
                self._default = persona

    @property
    def default(self) -> Persona:
        return self._default

    def get(self, persona_id: str) -> Persona | None:
        return self._personas.get(persona_id)

    def resolve(self, model: str | None) -> Persona:
        """The persona a client's ``model`` names; placeholders (``None`` and
        ``PLACEHOLDER_MODELS``) mean the default. Raises ``UnknownPersona``.
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
