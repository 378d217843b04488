"""Pydantic models of the REST API (``/api/...``): request bodies and responses.

Request bodies forbid unknown fields (a typo is a 400, never silently ignored); responses
are built from the engine's frozen dataclasses with the ``from_*`` constructors here, so
the routers stay thin.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from backend.config import PERSONA_ID_PATTERN
from backend.longterm.memory import ImportReport
from backend.memory.types import Memory
from backend.personas import Persona
from backend.sessions.store import Message, Session, TurnReport
from backend.storable_text import unstorable_reason

# The categories of ``backend.memory.types.CATEGORIES`` (a test keeps the two equal).
Category = Literal[
    "personal_fact",
    "preference",
    "relationship",
    "experience",
    "emotion",
    "interest",
    "work",
    "health",
    "general",
]
MAX_CONTENT = 4000  # the export format's limit (memory_jsonl.MemoryRecord), so edits re-import
MAX_ID = 128  # memory ids in exports, session ids the chat API accepts
MAX_TITLE = 200
# Ids come from clients (Conversation-Id, user, imports): anything printable except path
# separators. Control characters are refused too.
ID_PATTERN = r"^[^/\\\x00-\x1f\x7f]+$"

PersonaId = Annotated[str, Path(pattern=PERSONA_ID_PATTERN, description="A persona id.")]
MemoryId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID, pattern=ID_PATTERN, description="A memory id.")
]
SessionId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID, pattern=ID_PATTERN, description="A session id.")
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _content(value: str | None) -> str | None:
    if value is None:
        return None
    value = storable_or_error(value).strip()
    if not value:
        raise ValueError("content must not be empty")
    return value


def storable_or_error(value: str) -> str:
    """``value``, or a ``ValueError`` (a 400) when no store could hold it as sent."""
    reason = unstorable_reason(value)
    if reason is not None:
        raise ValueError(f"the text {reason}")
    return value


# --- errors ------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    message: str
    type: str
    code: str | None = None


class ErrorOut(BaseModel):
    """The OpenAI error shape every failing call answers with."""

    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text}
    for status, text in (
        (400, "Invalid request (bad parameter, unknown field, empty content)"),
        (401, "Missing or invalid API key"),
        (404, "No such persona, memory or session for this user"),
        (503, "The long-term store cannot be reached"),
    )
}


# --- personas ----------------------------------------------------------------------------


class PersonaOut(BaseModel):
    id: str
    name: str
    description: str
    language: str
    greeting: str
    default: bool

    @classmethod
    def from_persona(cls, persona: Persona, default_id: str) -> PersonaOut:
        return cls(
            id=persona.id,
            name=persona.name,
            description=persona.description,
            language=persona.language,
            greeting=persona.greeting,
            default=persona.id == default_id,
        )


class PersonaDetail(PersonaOut):
    system_prompt: str
    hippocampus_focus: str | None
    memory: dict[str, Any] = Field(description="Memory settings this persona overrides.")

    @classmethod
    def from_persona(cls, persona: Persona, default_id: str) -> PersonaDetail:
        base = PersonaOut.from_persona(persona, default_id).model_dump()
        return cls(
            **base,
            system_prompt=persona.system_prompt,
            hippocampus_focus=persona.hippocampus_focus,
            memory=dict(persona.memory),
        )


class PersonaList(BaseModel):
    items: list[PersonaOut]


# --- memories ----------------------------------------------------------------------------


class EmotionOut(BaseModel):
    label: str
    intensity: float


class AboutOut(BaseModel):
    name: str | None = Field(description="Their name; null: known by relation only.")
    relation: str = Field(description='Their relation to the user ("sister", "dog").')


class MemoryOut(BaseModel):
    id: str
    content: str
    category: str
    importance: float
    confidence: float
    subject: str
    keywords: list[str]
    emotion: EmotionOut | None
    created_at: datetime
    last_accessed: datetime
    access_count: int
    supersedes: str | None
    superseded_by: str | None
    pinned: bool
    source_session: str | None
    about: list[AboutOut] = Field(
        default_factory=list,
        description="Whom the fact is about, decided when it was written; empty: the user "
        "(or a memory written before this was recorded).",
    )
    has_vector: bool

    @classmethod
    def from_memory(cls, memory: Memory) -> MemoryOut:
        emotion = memory.emotion
        return cls(
            id=memory.id,
            content=memory.content,
            category=memory.category,
            importance=memory.importance,
            confidence=memory.confidence,
            subject=memory.subject,
            keywords=list(memory.keywords),
            emotion=None if emotion is None else EmotionOut(**_emotion(emotion)),
            created_at=memory.created_at,
            last_accessed=memory.last_accessed,
            access_count=memory.access_count,
            supersedes=memory.supersedes,
            superseded_by=memory.superseded_by,
            pinned=memory.pinned,
            source_session=memory.source_session,
            about=[AboutOut(name=a.name, relation=a.relation) for a in memory.about],
            has_vector=memory.embedding is not None,
        )


def _emotion(emotion: Any) -> dict[str, Any]:
    return {"label": emotion.label, "intensity": emotion.intensity}


class MemoryDetail(MemoryOut):
    versions: list[MemoryOut] = Field(
        description="Every version of this fact, oldest first (this memory included)."
    )

    @classmethod
    def with_versions(cls, memory: Memory, chain: list[Memory]) -> MemoryDetail:
        return cls(
            **MemoryOut.from_memory(memory).model_dump(),
            versions=[MemoryOut.from_memory(m) for m in chain or [memory]],
        )


class MemoryPage(BaseModel):
    items: list[MemoryOut]
    total: int = Field(description="How many memories match the filters.")
    offset: int
    limit: int
    has_more: bool


class EntityFact(BaseModel):
    id: str
    content: str


class EntityOut(BaseModel):
    """Someone (or a pet) of the user's life, read from the memories that name them, with
    the user's edits laid over."""

    key: str = Field(
        description="What the edit endpoints take: the name as first read, casefolded, or"
        " ~relation for one known only by relation (~physio). It stays when renamed."
    )
    name: str | None = Field(description='None: known only by relation ("the physio").')
    aliases: list[str] = Field(description="Its other names: merged ones, the user's.")
    relation: str = Field(description="Canonical relation to the user: sister, dog, physio…")
    kind: Literal["person", "pet"]
    described_as: list[str] = Field(description="The words the memories used: pug, 妹妹…")
    facts: list[EntityFact]


class EntityList(BaseModel):
    items: list[EntityOut]


MAX_ENTITY_KEY = 100
MAX_ENTITY_NAME = 60  # backend.memory.entities.MAX_NAME
MAX_RELATION = 40
MAX_ALIASES = 20
EntityKey = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ENTITY_KEY,
        pattern=ID_PATTERN,
        description="An entity's key (or one of its names, any case).",
    ),
]


def _entity_name(value: str) -> str:
    value = " ".join(storable_or_error(value).split())
    if not value:
        raise ValueError("a name must not be empty")
    if len(value) > MAX_ENTITY_NAME:
        raise ValueError(f"a name must be at most {MAX_ENTITY_NAME} characters")
    return value


class EntityPatch(_Body):
    """What the user changes of an entity; fields left out stay."""

    name: str | None = Field(None, description="The name shown; the old one stays an alias.")
    relation: str | None = Field(
        None, description="Relation to the user: a word of either language (grandma, 奶奶)."
    )
    kind: Literal["person", "pet"] | None = None
    aliases: list[str] | None = Field(
        None, max_length=MAX_ALIASES, description="Its other names (replaces the list)."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else _entity_name(value)

    @field_validator("relation")
    @classmethod
    def _relation(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = " ".join(storable_or_error(value).split()).lower()
        if not value or len(value) > MAX_RELATION:
            raise ValueError(f"a relation must be 1-{MAX_RELATION} characters")
        return value

    @field_validator("aliases")
    @classmethod
    def _aliases(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        names: list[str] = []
        for name in map(_entity_name, value):
            if name.casefold() not in {n.casefold() for n in names}:
                names.append(name)
        return names


class EntityMerge(_Body):
    """Entities that are one: ``entities`` are folded into ``into``."""

    into: str = Field(min_length=1, max_length=MAX_ENTITY_KEY, description="The one kept.")
    entities: list[Annotated[str, Field(min_length=1, max_length=MAX_ENTITY_KEY)]] = Field(
        min_length=1, max_length=MAX_ALIASES, description="Keys (or names) folded into it."
    )


class EntityDeleted(BaseModel):
    key: str
    forgotten: int = Field(description="Memories forgotten: those about it alone.")


class MemoryCreate(_Body):
    """A memory the user writes deliberately: stored as is (no save gate)."""

    content: str = Field(min_length=1, max_length=MAX_CONTENT)
    category: Category = "general"
    importance: float = Field(0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    pinned: bool = False

    _strip = field_validator("content")(_content)


class MemoryPatch(_Body):
    """Fields to change; those left out (or null) stay as they are."""

    content: str | None = Field(None, min_length=1, max_length=MAX_CONTENT)
    category: Category | None = None
    importance: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    pinned: bool | None = None

    _strip = field_validator("content")(_content)


class ImportResult(BaseModel):
    written: int
    duplicates: int = Field(description="Lines whose id the namespace (or the file) already had.")
    invalid: int
    errors: list[str] = Field(description="The first problems found, with line numbers.")
    entity_edits: int = Field(
        0, description="The user's edits of people and pets the file carried, now applied."
    )

    @classmethod
    def from_report(cls, report: ImportReport) -> ImportResult:
        return cls(
            written=report.written,
            duplicates=report.duplicates,
            invalid=report.invalid,
            errors=list(report.errors),
            entity_edits=report.entity_edits,
        )


# --- sessions ----------------------------------------------------------------------------


class SessionOut(BaseModel):
    id: str
    persona_id: str
    title: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_session(cls, session: Session) -> SessionOut:
        return cls(
            id=session.id,
            persona_id=session.persona_id,
            title=session.title,
            created_at=session.created_at,
            updated_at=session.updated_at,
        )


class SessionPage(BaseModel):
    items: list[SessionOut]
    offset: int
    limit: int
    has_more: bool


class MessageOut(BaseModel):
    seq: int
    role: str
    content: str
    status: str
    error: str | None
    created_at: datetime
    turn_id: str | None

    @classmethod
    def from_message(cls, message: Message) -> MessageOut:
        return cls(
            seq=message.seq,
            role=message.role,
            content=message.content,
            status=message.status,
            error=message.error,
            created_at=message.created_at,
            turn_id=message.turn_id,
        )


class TurnReportOut(BaseModel):
    turn_id: str
    created_at: datetime
    report: dict[str, Any] = Field(
        description="Activated memories with scores, what was written/reinforced/superseded/"
        "rejected, the hippocampus status and the user's emotion."
    )

    @classmethod
    def from_report(cls, report: TurnReport) -> TurnReportOut:
        return cls(turn_id=report.turn_id, created_at=report.created_at, report=report.report)


class SessionDetail(SessionOut):
    transcript: list[MessageOut]
    background: str
    short_term: list[dict[str, Any]]
    user_emotion: dict[str, Any] | None
    reports: list[TurnReportOut]
    merged_through: int = Field(
        description="The last message seq the derived state (background, short_term) folds in."
    )
    unmerged: list[MessageOut] = Field(
        description=(
            "The messages after merged_through: turns the memory has not merged yet (a reply "
            "is prompted with them verbatim). Empty once the memory has caught up."
        )
    )


class SessionPatch(_Body):
    title: str | None = Field(
        None, max_length=MAX_TITLE, description="The new title; empty or null clears it."
    )

    @field_validator("title")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return storable_or_error(value or "").strip() or None


class SessionDeleted(BaseModel):
    id: str
    deleted: bool
    memories_deleted: int = Field(
        description="Memories this session created that were deleted with it "
        "(0 unless forget_memories=true)."
    )
