"""``/api/personas/{persona_id}/entities``: the people and pets of the caller's life with
one persona, read from the memories that name them (``backend.memory.entities``).

The table is read from the live memories at each request: it follows every edit,
deletion and import of the memories, and needs no migration. Failure policy as
``memories_api``: unknown persona → 404, the store unreachable → 503.
"""

from __future__ import annotations

from fastapi import APIRouter

from backend.longterm.memory import LongTermMemory
from backend.memory.entities import Entity, entity_table
from backend.memory.types import Memory, Namespace
from backend.web.deps import ServicesDep, UserDep
from backend.web.memories_api import namespace, store_errors
from backend.web.schemas import ERROR_RESPONSES, EntityFact, EntityList, EntityOut, PersonaId

router = APIRouter(
    prefix="/api/personas/{persona_id}/entities", tags=["memories"], responses=ERROR_RESPONSES
)


def live_memories(long_term: LongTermMemory, ns: Namespace) -> list[Memory]:
    """Every memory of the namespace that is not superseded."""
    store = long_term.store
    total = store.count(ns, include_superseded=False)
    return store.list(ns, offset=0, limit=max(total, 1), include_superseded=False)


def entities_with_facts(memories: list[Memory]) -> list[tuple[Entity, list[Memory]]]:
    """The table, each entity with its memories (oldest first)."""
    by_id = {m.id: m for m in memories}
    return [
        (entity, sorted((by_id[i] for i in entity.memory_ids), key=lambda m: m.created_at))
        for entity in entity_table(memories)
    ]


@router.get("")
def list_entities(persona_id: PersonaId, user: UserDep, services: ServicesDep) -> EntityList:
    """The people and pets the caller's memories with this persona name, most mentioned
    first, each with the memories that name them."""
    ns = namespace(services, user, persona_id)
    with store_errors():
        memories = live_memories(services.long_term, ns)
    return EntityList(
        items=[
            EntityOut(
                name=entity.name,
                relation=entity.relation,
                kind=entity.kind,
                described_as=list(entity.described_as),
                facts=[EntityFact(id=m.id, content=m.content) for m in facts],
            )
            for entity, facts in entities_with_facts(memories)
        ]
    )
