"""Memories as JSON Lines: the export/import format (one memory per line, every field).

A line round-trips everything a ``Memory`` holds: id, content, category, importance,
confidence, emotion, keywords, subject, timestamps (ISO-8601 with microseconds and
offset), access count, version links, pin, source session and the embedding with the
name of the model that made it (so an import into a store with another embedder can
re-embed instead of mixing vector spaces).

After the memories, an export may hold one more line, ``{"entity_edits": [...]}``: the
user's edits of the people and pets of their life (``backend.memory.entities.EntityEdit``),
which the memories alone do not carry (``encode_entity_edits``/``decode_entity_edits``).

Failure policy: ``decode_line`` raises ``InvalidMemoryLine`` with a readable reason for
anything it cannot accept; importers count such lines as invalid and go on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from backend.memory.entities import EntityEdit
from backend.memory.types import About, Emotion, Memory, normalise_category, normalise_subject


class InvalidMemoryLine(ValueError):
    """A JSON Lines record that cannot be imported (the message says why)."""


class _EmotionRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")
    label: str = Field(min_length=1, max_length=64)
    intensity: float = Field(ge=0.0, le=1.0)


class _AboutRecord(BaseModel):
    """Someone a memory is about: a name (or none) and its relation to the user."""

    name: str | None = Field(default=None, max_length=120)
    relation: str = Field(min_length=1, max_length=60)


class MemoryRecord(BaseModel):
    """The boundary schema of one exported memory."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=128)
    content: str = Field(min_length=1, max_length=4000)
    category: str = "general"
    importance: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    emotion: _EmotionRecord | None = None
    keywords: list[str] = Field(default_factory=list, max_length=32)
    subject: str = "user"
    created_at: datetime
    last_accessed: datetime
    access_count: int = Field(default=0, ge=0)
    supersedes: str | None = None
    superseded_by: str | None = None
    pinned: bool = False
    source_session: str | None = None
    about: list[_AboutRecord] = Field(default_factory=list, max_length=32)
    embedding: list[float] | None = None
    embedding_model: str | None = None

    @field_validator("created_at", "last_accessed")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        # A naive timestamp in an export is read as UTC (what we always write).
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def encode_line(memory: Memory, embedding_model: str | None) -> str:
    """One memory as one JSON line (no trailing newline)."""
    record: dict[str, Any] = {
        "id": memory.id,
        "content": memory.content,
        "category": memory.category,
        "importance": memory.importance,
        "confidence": memory.confidence,
        "emotion": (
            {"label": memory.emotion.label, "intensity": memory.emotion.intensity}
            if memory.emotion
            else None
        ),
        "keywords": list(memory.keywords),
        "subject": memory.subject,
        "created_at": memory.created_at.isoformat(),
        "last_accessed": memory.last_accessed.isoformat(),
        "access_count": memory.access_count,
        "supersedes": memory.supersedes,
        "superseded_by": memory.superseded_by,
        "pinned": memory.pinned,
        "source_session": memory.source_session,
        "about": [{"name": a.name, "relation": a.relation} for a in memory.about],
        "embedding": None if memory.embedding is None else memory.embedding.tolist(),
        "embedding_model": None if memory.embedding is None else embedding_model,
    }
    return json.dumps(record, ensure_ascii=False)


def decode_line(line: str) -> tuple[Memory, str | None]:
    """A memory and the name of the model its embedding came from (``None`` if none)."""
    try:
        record = MemoryRecord.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "line"
        raise InvalidMemoryLine(f"{where}: {first['msg']}") from None
    vector = None
    if record.embedding:
        array = np.asarray(record.embedding, dtype=np.float32)
        if np.all(np.isfinite(array)) and float(np.dot(array, array)) > 0.0:
            vector = array
    memory = Memory(
        id=record.id,
        content=record.content,
        category=normalise_category(record.category),
        importance=record.importance,
        confidence=record.confidence,
        emotion=Emotion(record.emotion.label, record.emotion.intensity) if record.emotion else None,
        keywords=tuple(record.keywords),
        subject=normalise_subject(record.subject),
        created_at=record.created_at,
        last_accessed=record.last_accessed,
        access_count=record.access_count,
        supersedes=record.supersedes,
        superseded_by=record.superseded_by,
        pinned=record.pinned,
        source_session=record.source_session,
        about=tuple(About(a.name or None, a.relation) for a in record.about),
        embedding=vector,
    )
    return memory, record.embedding_model if vector is not None else None


ENTITY_EDITS_KEY = "entity_edits"


class _EntityEditRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")
    key: str = Field(min_length=1, max_length=200)
    name: str | None = Field(default=None, max_length=200)
    relation: str | None = Field(default=None, max_length=200)
    kind: str | None = Field(default=None, pattern="^(person|pet)$")
    aliases: list[str] = Field(default_factory=list, max_length=64)
    merged: list[str] = Field(default_factory=list, max_length=256)
    deleted: bool = False


class _EntityEditsLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entity_edits: list[_EntityEditRecord] = Field(max_length=10_000)


def encode_entity_edits(edits: Sequence[EntityEdit]) -> str:
    """The user's entity edits as one JSON line (no trailing newline)."""
    return json.dumps({ENTITY_EDITS_KEY: [e.to_dict() for e in edits]}, ensure_ascii=False)


def decode_entity_edits(line: str) -> list[EntityEdit] | None:
    """The edits if ``line`` is an entity-edits line, ``None`` if it is not one (a
    memory's line). Raises ``InvalidMemoryLine`` for one that cannot be read."""
    if f'"{ENTITY_EDITS_KEY}"' not in line:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None  # not JSON at all: the memory decoder says why
    if not isinstance(data, dict) or ENTITY_EDITS_KEY not in data or "id" in data:
        return None
    try:
        record = _EntityEditsLine.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "line"
        raise InvalidMemoryLine(f"{where}: {first['msg']}") from None
    return [EntityEdit.from_dict(item.model_dump()) for item in record.entity_edits]
