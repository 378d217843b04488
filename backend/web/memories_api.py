"""``/api/personas/{persona_id}/memories``: the caller's long-term memories with one persona.

The namespace is always (authenticated user, persona): an id from another namespace reads
as unknown (404), so a user never learns whether someone else's memory exists.

- list: paged, filtered (``category``, ``q`` = case-insensitive substring of the content,
  Chinese included), sorted by ``created`` (newest first, paged by the store),
  ``recency`` (last recalled first) or ``importance``. The two last read every memory that
  matches the filters and sort them here: O(matching memories) per page, fine for one
  person's memories (thousands), not meant for millions.
- get (with its version chain), create (stored as written: no save gate, embedded now),
  patch (a content edit re-embeds), delete (a version chain is spliced, so deleting the
  newest version makes the previous one live again).
- sources: the user messages a memory was formed from (issue 30; none for memories
  formed before they were recorded).
- export: JSON Lines download; import: a multipart upload (field ``file``) or a raw
  JSON Lines body, counted as written / duplicates / invalid.

Failure policy: bad input → 400 before anything is stored; unknown persona or memory →
404; the store unreachable → 503; a vector of another dimension than the namespace holds
(the embedder was changed) → 409. Blocking store calls run in the threadpool (plain
``def`` endpoints) or through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from backend.engine import memory_transfer
from backend.engine.services import Services
from backend.longterm.memory import LongTermMemory
from backend.memory.types import Memory, Namespace
from backend.stores.vector_port import EmbeddingDimensionError, VectorStoreUnavailable
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError
from backend.web.personas_api import persona_or_404
from backend.web.schemas import (
    ERROR_RESPONSES,
    Category,
    ImportResult,
    MemoryCreate,
    MemoryDetail,
    MemoryId,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    PersonaId,
)

log = logging.getLogger(__name__)
router = APIRouter(
    prefix="/api/personas/{persona_id}/memories", tags=["memories"], responses=ERROR_RESPONSES
)

MAX_PAGE = 200  # memories per page
MAX_OFFSET = 10_000_000  # far beyond one person's memories; keeps paging arguments sane
MAX_QUERY = 200  # characters of a search text
EXPORT_CHUNK = 64 * 1024  # bytes per streamed export chunk
NDJSON = "application/x-ndjson"


@contextmanager
def store_errors() -> Iterator[None]:
    """Runtime trouble of the long-term store, as API errors (503, 409)."""
    try:
        yield
    except VectorStoreUnavailable as exc:
        raise APIError(
            503, f"the long-term store is unavailable: {exc}", "store_unavailable"
        ) from None
    except EmbeddingDimensionError as exc:
        raise APIError(409, str(exc), "embedding_dimension_mismatch") from None


def namespace(services: Services, user: str, persona_id: str) -> Namespace:
    """The caller's namespace with this persona; 404 for an unknown persona."""
    return Namespace(user, persona_or_404(services, persona_id).id)


def _page(
    long_term: LongTermMemory,
    ns: Namespace,
    *,
    offset: int,
    limit: int,
    sort: str,
    filters: dict[str, Any],
) -> tuple[list[Memory], int]:
    store = long_term.store
    total = store.count(ns, **filters)
    if sort == "created":  # newest first: the store's (created_at, id) order, read backwards
        end = max(0, total - offset)
        start = max(0, end - limit)
        rows = store.list(ns, offset=start, limit=end - start, **filters) if end else []
        return rows[::-1], total
    rows = store.list(ns, offset=0, limit=total, **filters)
    if sort == "recency":
        rows.sort(key=lambda m: (-m.last_accessed.timestamp(), -m.created_at.timestamp(), m.id))
    else:
        rows.sort(key=lambda m: (-m.importance, -m.created_at.timestamp(), m.id))
    return rows[offset : offset + limit], total


@router.get("")
def list_memories(
    persona_id: PersonaId,
    user: UserDep,
    services: ServicesDep,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    category: Category | None = None,
    q: Annotated[
        str | None, Query(max_length=MAX_QUERY, description="Substring of the content.")
    ] = None,
    include_superseded: bool = False,
    sort: Literal["created", "recency", "importance"] = "created",
) -> MemoryPage:
    """A page of the caller's memories with this persona.

    ``created``: newest first. ``recency``: most recently recalled first. ``importance``:
    most important first. Superseded versions are left out unless ``include_superseded``.
    """
    ns = namespace(services, user, persona_id)
    filters = {
        "category": category,
        "text": (q.strip() or None) if q else None,
        "include_superseded": include_superseded,
    }
    with store_errors():
        rows, total = _page(
            services.long_term, ns, offset=offset, limit=limit, sort=sort, filters=filters
        )
    return MemoryPage(
        items=[MemoryOut.from_memory(m) for m in rows],
        total=total,
        offset=offset,
        limit=limit,
        has_more=offset + len(rows) < total,
    )


@router.post("", status_code=201)
def create_memory(
    persona_id: PersonaId, body: MemoryCreate, user: UserDep, services: ServicesDep
) -> MemoryOut:
    """Store a memory exactly as written (no save gate) and embed it."""
    ns = namespace(services, user, persona_id)
    long_term = services.long_term
    memory = long_term.new_memory(
        body.content, category=body.category, importance=body.importance, pinned=body.pinned
    )
    with store_errors():
        memory = long_term.create(ns, memory)
    log.info("memory %s created in %s", memory.id, ns.key)
    return MemoryOut.from_memory(memory)


def _export_chunks(first: str | None, rest: Iterator[str]) -> Iterator[bytes]:
    buffer: list[str] = [] if first is None else [first]
    size = 0 if first is None else len(first)
    for line in rest:
        buffer.append(line)
        size += len(line)
        if size >= EXPORT_CHUNK:
            yield "".join(buffer).encode()
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer).encode()


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={200: {"content": {NDJSON: {"schema": {"type": "string"}}}}},
)
def export_memories(persona_id: PersonaId, user: UserDep, services: ServicesDep) -> Any:
    """Every memory of the namespace (superseded versions and vectors included) as a JSON
    Lines download, oldest first, then the user's edits of the people and pets of their
    life as one ``{"entity_edits": [...]}`` line if there are any; the format ``import``
    reads."""
    ns = namespace(services, user, persona_id)
    lines = memory_transfer.export_lines(services, ns)
    with store_errors():
        # Reading the first line reads the namespace: an outage is a 503, not a cut stream.
        first = next(lines, None)
    return StreamingResponse(
        _export_chunks(first, lines),
        media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="memories-{ns.persona_id}.jsonl"'},
    )


_IMPORT_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            }
        },
        NDJSON: {"schema": {"type": "string"}},
    },
}


async def _upload_bytes(request: Request) -> bytes:
    content_type = request.headers.get("content-type", "").lower()
    if not content_type.startswith("multipart/form-data"):
        return await request.body()
    async with request.form(max_files=1, max_fields=8) as form:
        upload = form.get("file")
        if isinstance(upload, str):  # a plain text field (curl -F 'file=<memories.jsonl')
            return upload.encode()
        if upload is None:
            raise APIError(400, "the multipart body has no field 'file'", "missing_file")
        return await upload.read()


def _lines(data: bytes) -> Sequence[str]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise APIError(400, f"the file is not UTF-8 text: {exc}", "invalid_encoding") from None
    # JSON Lines are separated by "\n" only (str.splitlines would also cut at U+2028,
    # which JSON strings may hold unescaped).
    return text.split("\n")


@router.post("/import", openapi_extra={"requestBody": _IMPORT_BODY})
async def import_memories(
    persona_id: PersonaId, request: Request, user: UserDep, services: ServicesDep
) -> ImportResult:
    """Restore memories from JSON Lines (an ``export``), as they are (no save gate), and
    the export's entity edits, laid over the namespace's own (an imported edit replaces
    the one of the same entity).

    Ids the namespace already holds are skipped as duplicates; unreadable lines are
    counted as invalid (the first 20 reasons are listed). Bodies over the server's
    ``max_body_bytes`` are refused with 413.
    """
    ns = namespace(services, user, persona_id)
    lines = _lines(await _upload_bytes(request))
    with store_errors():
        report = await asyncio.to_thread(memory_transfer.import_lines, services, ns, lines)
    log.info(
        "import into %s: %d written, %d duplicates, %d invalid",
        ns.key,
        report.written,
        report.duplicates,
        report.invalid,
    )
    return ImportResult.from_report(report)


@router.get("/{memory_id}")
def get_memory(
    persona_id: PersonaId, memory_id: MemoryId, user: UserDep, services: ServicesDep
) -> MemoryDetail:
    """One memory with ``versions``: every version of its fact, oldest first."""
    ns = namespace(services, user, persona_id)
    with store_errors():
        memory = services.long_term.get(ns, memory_id)
        if memory is None:
            raise _not_found()
        chain = services.long_term.version_chain(ns, memory_id)
    return MemoryDetail.with_versions(memory, chain)


@router.patch("/{memory_id}")
def update_memory(
    persona_id: PersonaId,
    memory_id: MemoryId,
    body: MemoryPatch,
    user: UserDep,
    services: ServicesDep,
) -> MemoryOut:
    """Change content (re-embedded), category, importance or pin; other fields stay."""
    ns = namespace(services, user, persona_id)
    try:
        with store_errors():
            memory = services.long_term.update(
                ns,
                memory_id,
                content=body.content,
                importance=body.importance,
                category=body.category,
                pinned=body.pinned,
            )
    except KeyError:
        raise _not_found() from None
    return MemoryOut.from_memory(memory)


@router.delete("/{memory_id}", status_code=204, response_class=Response)
def delete_memory(
    persona_id: PersonaId, memory_id: MemoryId, user: UserDep, services: ServicesDep
) -> Response:
    """Delete one memory (its version chain is spliced around it)."""
    ns = namespace(services, user, persona_id)
    with store_errors():
        deleted = services.long_term.delete_memories(ns, [memory_id])
    if not deleted:
        raise _not_found()
    services.sessions.forget_sources(ns.user_id, ns.persona_id, [memory_id])
    return Response(status_code=204)


class SourceOut(BaseModel):
    """A message a memory was formed from (issue 30); ``message_id`` null: a source that
    is no message any more (its conversation was deleted) or from before sources were
    kept."""

    message_id: int | None
    session_id: str | None
    session_title: str | None
    seq: int | None = Field(description="The message's seq in its session's transcript.")
    content: str | None
    created_at: datetime | None


@router.get("/{memory_id}/sources")
def memory_sources(
    persona_id: PersonaId, memory_id: MemoryId, user: UserDep, services: ServicesDep
) -> list[SourceOut]:
    """The user messages this memory was formed from, oldest first: empty for a memory
    formed before they were recorded (or by a memory tool, an import, by hand)."""
    ns = namespace(services, user, persona_id)
    with store_errors():
        if services.long_term.get(ns, memory_id) is None:
            raise _not_found()
    found = services.sessions.memory_sources(ns.user_id, ns.persona_id, [memory_id])
    return [SourceOut(**dataclasses.asdict(s)) for s in found.get(memory_id, [])]


def _not_found() -> APIError:
    return APIError(404, "memory not found", "memory_not_found")
