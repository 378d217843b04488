"""The memories page (``/memories``): browse, search, filter, sort, edit, pin, delete,
version chains, export and import — the caller's memories with one persona — and the
People & pets above them, whose entries can be edited, merged and deleted
(``/ui/people/...``, through the same functions as the REST API: ``entities_api``).

Sorting by ``score`` uses the decay pass's strength (``backend.memory.decay``): how
alive a memory is now, from its importance, category, use and age. ``importance``,
``recency`` (last recalled) and ``created`` sort by those fields. Like the REST API,
sorting reads every memory that matches the filters: fine for one person's memories.

Failure policy: an unknown persona or memory → 404 fragment; the store unreachable →
503 fragment; an unreadable import file → 400 fragment. Nothing is half-applied: an
edit is one upsert.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from pydantic import ValidationError

from backend.engine import memory_transfer
from backend.engine.services import Services
from backend.memory.decay import memory_strength
from backend.memory.entities import forgotten_with
from backend.memory.types import CATEGORIES, Memory, Namespace
from backend.sessions.store import MemorySource
from backend.stores.vector_port import EmbeddingDimensionError, VectorStoreUnavailable
from backend.web.entities_api import (
    delete_entity,
    entities_with_facts,
    entity_edits,
    live_memories,
    merge_entities,
    patch_entity,
)
from backend.web.errors import APIError
from backend.web.schemas import MAX_ALIASES, MAX_ENTITY_NAME, MAX_RELATION, EntityMerge, EntityPatch
from backend.web.ui_support import UiError, UiReader, UiWriter, render, services_of

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
MAX_QUERY = 200
MAX_CONTENT = 2000  # characters of an edited memory (the hippocampus writes ~300)
Sort = Literal["score", "importance", "recency", "created"]
SORTS: dict[str, str] = {
    "score": "Score (strength now)",
    "importance": "Importance",
    "recency": "Recently recalled",
    "created": "Newest",
}


@contextmanager
def _store_errors() -> Iterator[None]:
    try:
        yield
    except VectorStoreUnavailable as exc:
        raise UiError(503, f"The long-term store is unavailable: {exc}") from None
    except EmbeddingDimensionError as exc:
        raise UiError(409, str(exc)) from None


def _namespace(services: Services, user: str, persona_id: str | None) -> Namespace:
    if not persona_id:
        return Namespace(user, services.personas.default.id)
    persona = services.personas.get(persona_id)
    if persona is None:
        raise UiError(404, "There is no such persona.")
    return Namespace(user, persona.id)


def memory_view(
    memory: Memory, services: Services, sources: Sequence[MemorySource] | None = None
) -> dict[str, Any]:
    """A card's view; ``sources``: where the memory came from (``with_sources``)."""
    return {
        "m": memory,
        "strength": memory_strength(memory, services.clock.now()),
        "sources": list(sources or ()),
    }


def with_sources(
    services: Services, ns: Namespace, memories: Sequence[Memory]
) -> list[dict[str, Any]]:
    """The cards of ``memories`` with the messages each was formed from (issue 30); a
    memory with no recorded source (from before provenance, a tool, an import) has none.
    The session store failing costs the "from:" lines, never the page."""
    try:
        found = services.sessions.memory_sources(
            ns.user_id, ns.persona_id, [m.id for m in memories]
        )
    except Exception:
        log.warning("could not read where the memories of %s came from", ns.key, exc_info=True)
        found = {}
    return [memory_view(m, services, found.get(m.id)) for m in memories]


def _sorted(memories: list[Memory], sort: str, services: Services) -> list[Memory]:
    now = services.clock.now()
    if sort == "score":
        return sorted(memories, key=lambda m: (-memory_strength(m, now), -m.importance, m.id))
    if sort == "importance":
        return sorted(memories, key=lambda m: (-m.importance, -m.created_at.timestamp(), m.id))
    if sort == "recency":
        return sorted(memories, key=lambda m: (-m.last_accessed.timestamp(), m.id))
    return sorted(memories, key=lambda m: (-m.created_at.timestamp(), m.id))


def _listing(
    services: Services,
    ns: Namespace,
    *,
    q: str,
    category: str,
    sort: str,
    page: int,
    superseded: bool,
) -> tuple[dict[str, Any], list[Memory] | None]:
    """The page's listing, and every live memory when the filters ask for all of them
    (the People & pets view reads those, so the store is read once)."""
    store = services.long_term.store
    filters: dict[str, Any] = {
        "category": category or None,
        "text": q.strip() or None,
        "include_superseded": superseded,
    }
    with _store_errors():
        total = store.count(ns, **filters)
        rows = store.list(ns, offset=0, limit=max(total, 1), **filters)
    unfiltered = not (category or q.strip() or superseded)
    rows = _sorted(rows, sort, services)
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(max(1, page), pages)
    shown = rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    listing = {
        "memories": with_sources(services, ns, shown),
        "total": total,
        "page": page,
        "pages": pages,
        "filters": {
            "q": q,
            "category": category,
            "sort": sort,
            "superseded": superseded,
            "persona": ns.persona_id,
        },
    }
    return listing, rows if unfiltered else None


def _people(services: Services, ns: Namespace, live: list[Memory] | None) -> list[dict[str, Any]]:
    """The People & pets view: each entity the memories name, with its facts (``live``:
    every live memory, when the listing has read them already)."""
    if live is None:
        with _store_errors():
            live = live_memories(services.long_term, ns)
    pairs = entities_with_facts(live, entity_edits(services, ns))
    table = [entity for entity, _ in pairs]
    return [
        {
            "entity": entity,
            "facts": facts,
            "search": entity.name or entity.described_as[0],
            # What deleting it forgets (said in its confirmation).
            "alone": len(forgotten_with(entity, table)),
        }
        for entity, facts in pairs
    ]


def people_context(
    people: list[dict[str, Any]], persona_id: str, *, status: str = "", opened: str = ""
) -> dict[str, Any]:
    """What ``_people.html`` reads (``status``: said to screen readers; ``opened``: the
    key of the entry left open after its edit)."""
    return {
        "people": people,
        "people_status": status,
        "opened": opened,
        "persona_id": persona_id,
        "max_name": MAX_ENTITY_NAME,
        "max_relation": MAX_RELATION,
        "max_aliases_text": MAX_ALIASES * (MAX_ENTITY_NAME + 2),
    }


QueryText = Annotated[str, Query(max_length=MAX_QUERY)]


@router.get("/memories", response_class=HTMLResponse)
async def memories_page(
    request: Request,
    auth: UiReader,
    persona: str = "",
    q: QueryText = "",
    category: str = "",
    sort: Sort = "score",
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    superseded: bool = False,
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona)
    if category and category not in CATEGORIES:
        category = ""
    listing, live = await asyncio.to_thread(
        _listing,
        services,
        ns,
        q=q,
        category=category,
        sort=sort,
        page=page,
        superseded=superseded,
    )
    partial = request.headers.get("hx-target") == "memory-list"  # the list alone
    people = [] if partial else await asyncio.to_thread(_people, services, ns, live)
    context = {
        **people_context(people, ns.persona_id),
        "listing": listing,
        "personas": list(services.personas),
        "persona_id": ns.persona_id,
        "categories": CATEGORIES,
        "sorts": SORTS,
    }
    return render(request, "_memory_list.html" if partial else "memories.html", context)


# --- People & pets: edit, merge, delete ------------------------------------------------


def _aliases(text: str) -> list[str]:
    """ "Tommy, Tom-Tom，汤姆、小汤": names split at commas of either script."""
    for comma in ("，", "、", ";"):
        text = text.replace(comma, ",")
    return [name.strip() for name in text.split(",") if name.strip()]


async def _people_changed(
    request: Request,
    services: Services,
    ns: Namespace,
    *,
    status: str,
    opened: str | None = None,
    memories_changed: bool = False,
) -> Response:
    """The People & pets section as it now reads (``status``: said to screen readers)."""
    people = await asyncio.to_thread(_people, services, ns, None)
    context = people_context(people, ns.persona_id, status=status, opened=opened or "")
    headers = {"HX-Trigger": "memories-changed"} if memories_changed else None
    return render(request, "_people.html", context, headers=headers)


@contextmanager
def _entity_errors() -> Iterator[None]:
    """The REST functions' errors and refused input, as inline messages."""
    try:
        with _store_errors():
            yield
    except APIError as exc:
        raise UiError(exc.status, exc.message[:1].upper() + exc.message[1:] + ".") from None
    except ValidationError as exc:
        reason = "; ".join(str(e.get("msg", "invalid")) for e in exc.errors()[:3])
        raise UiError(400, f"Not saved: {reason}.") from None


@router.post("/ui/people/{persona_id}/{key}", response_class=HTMLResponse)
async def edit_entity(
    request: Request,
    persona_id: str,
    key: str,
    auth: UiWriter,
    relation: Annotated[str, Form(max_length=MAX_RELATION)],
    kind: Annotated[Literal["person", "pet"], Form()],
    name: Annotated[str, Form(max_length=MAX_ENTITY_NAME)] = "",
    aliases: Annotated[str, Form(max_length=MAX_ALIASES * (MAX_ENTITY_NAME + 2))] = "",
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    with _entity_errors():
        fields: dict[str, Any] = {"relation": relation, "kind": kind, "aliases": _aliases(aliases)}
        if name.strip():  # an empty name keeps the one it has (or none)
            fields["name"] = name
        body = EntityPatch(**fields)
        entity = await asyncio.to_thread(patch_entity, services, ns, key, body)
    log.info("ui: entity %s edited in %s", entity.key, ns.key)
    return await _people_changed(
        request, services, ns, status=f"Saved {entity.name or entity.relation}.", opened=entity.key
    )


@router.post("/ui/people/{persona_id}/{key}/merge", response_class=HTMLResponse)
async def merge_entity(
    request: Request,
    persona_id: str,
    key: str,
    auth: UiWriter,
    other: Annotated[str, Form(max_length=100)] = "",
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    if not other:
        raise UiError(400, "Choose the entry that is the same one.")
    with _entity_errors():
        body = EntityMerge(into=key, entities=[other])
        entity = await asyncio.to_thread(merge_entities, services, ns, body)
    label = entity.name or entity.relation
    return await _people_changed(
        request, services, ns, status=f"Merged into {label}.", opened=entity.key
    )


@router.post("/ui/people/{persona_id}/{key}/delete", response_class=HTMLResponse)
async def delete_entity_ui(request: Request, persona_id: str, key: str, auth: UiWriter) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    with _entity_errors():
        deleted = await asyncio.to_thread(delete_entity, services, ns, key)
    noun = "memory" if deleted.forgotten == 1 else "memories"
    return await _people_changed(
        request,
        services,
        ns,
        status=f"Deleted; {deleted.forgotten} {noun} forgotten.",
        memories_changed=True,
    )


# export and import come before the /{memory_id} routes, which would match their paths.


@router.get("/ui/memories/{persona_id}/export")
async def export_memories(request: Request, persona_id: str, auth: UiReader) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    with _store_errors():
        lines = await asyncio.to_thread(lambda: list(memory_transfer.export_lines(services, ns)))

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(lines), 256):
            yield "".join(lines[start : start + 256]).encode()

    return StreamingResponse(
        chunks(),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="memories-{ns.persona_id}.jsonl"',
            "Cache-Control": "no-store",
        },
    )


@router.post("/ui/memories/{persona_id}/import", response_class=HTMLResponse)
async def import_memories(
    request: Request,
    persona_id: str,
    auth: UiWriter,
    file: Annotated[UploadFile, File()],
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    data = await file.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UiError(400, "The file is not UTF-8 text (expected a JSON Lines export).") from None
    with _store_errors():
        report = await asyncio.to_thread(
            memory_transfer.import_lines, services, ns, text.split("\n")
        )
    log.info("ui: import into %s: %d written", ns.key, report.written)
    return render(
        request,
        "_import_result.html",
        {"report": report, "filename": file.filename or "the file"},
        headers={"HX-Trigger": "memories-changed"},
    )


async def _get(services: Services, ns: Namespace, memory_id: str) -> Memory:
    with _store_errors():
        memory = await asyncio.to_thread(services.long_term.get, ns, memory_id)
    if memory is None:
        raise UiError(404, "This memory no longer exists.")
    return memory


def _card(request: Request, services: Services, ns: Namespace, memory: Memory) -> Response:
    context = {"item": with_sources(services, ns, [memory])[0], "persona_id": ns.persona_id}
    return render(request, "_memory_card.html", context)


@router.get("/ui/memories/{persona_id}/{memory_id}", response_class=HTMLResponse)
async def memory_card(
    request: Request, persona_id: str, memory_id: str, auth: UiReader, edit: bool = False
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    memory = await _get(services, ns, memory_id)
    if edit:
        context = {
            "item": memory_view(memory, services),
            "persona_id": ns.persona_id,
            "categories": CATEGORIES,
            "max_content": MAX_CONTENT,
        }
        return render(request, "_memory_edit.html", context)
    return _card(request, services, ns, memory)


@router.post("/ui/memories/{persona_id}/{memory_id}", response_class=HTMLResponse)
async def edit_memory(
    request: Request,
    persona_id: str,
    memory_id: str,
    auth: UiWriter,
    content: Annotated[str, Form(max_length=MAX_CONTENT)],
    importance: Annotated[float, Form(ge=0, le=1)],
    category: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    if not content.strip():
        raise UiError(400, "A memory cannot be empty.")
    try:
        with _store_errors():
            memory = await asyncio.to_thread(
                services.long_term.update,
                ns,
                memory_id,
                content=content,
                importance=importance,
                category=category or None,
            )
    except KeyError:
        raise UiError(404, "This memory no longer exists.") from None
    log.info("ui: memory %s edited in %s", memory_id, ns.key)
    return _card(request, services, ns, memory)


@router.post("/ui/memories/{persona_id}/{memory_id}/pin", response_class=HTMLResponse)
async def pin_memory(
    request: Request,
    persona_id: str,
    memory_id: str,
    auth: UiWriter,
    pinned: Annotated[bool, Form()],
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    try:
        with _store_errors():
            memory = await asyncio.to_thread(
                services.long_term.update, ns, memory_id, pinned=pinned
            )
    except KeyError:
        raise UiError(404, "This memory no longer exists.") from None
    return _card(request, services, ns, memory)


@router.post("/ui/memories/{persona_id}/{memory_id}/delete")
async def delete_memory(
    request: Request, persona_id: str, memory_id: str, auth: UiWriter
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    with _store_errors():
        await asyncio.to_thread(services.long_term.delete_memories, ns, [memory_id])
    await asyncio.to_thread(
        services.sessions.forget_sources, ns.user_id, ns.persona_id, [memory_id]
    )
    log.info("ui: memory %s deleted in %s", memory_id, ns.key)
    return Response("", headers={"HX-Trigger": "memories-changed"})


@router.get("/ui/memories/{persona_id}/{memory_id}/versions", response_class=HTMLResponse)
async def memory_versions(
    request: Request, persona_id: str, memory_id: str, auth: UiReader
) -> Response:
    services = services_of(request)
    ns = _namespace(services, auth.user, persona_id)
    with _store_errors():
        chain = await asyncio.to_thread(services.long_term.version_chain, ns, memory_id)
    if not chain:
        raise UiError(404, "This memory no longer exists.")
    return render(request, "_versions.html", {"chain": chain, "current": memory_id})
