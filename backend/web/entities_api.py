"""``/api/personas/{persona_id}/entities``: the people and pets of the caller's life with
one persona, read from the memories that name them (``backend.memory.entities``), with
the caller's edits laid over them.

- list: the table, each entity with its key, aliases and facts;
- ``PATCH /{key}``: its name (the old one stays an alias), relation, kind or aliases;
- ``POST /merge``: entities that are one person ("Tom" and "Tommy", "Nainai" and "奶奶")
  become one, the others' names its aliases;
- ``DELETE /{key}``: the entity is hidden (recall no longer reaches anyone through it,
  notes no longer introduce it) and the memories about it alone are forgotten, every
  version of each, so the companion stops remembering them. Memories that also name
  someone else stay. A later memory that names it is kept, but the entity stays hidden.

The table is read from the live memories at each request, so it follows every edit,
deletion and import of the memories; the edits are kept in the session store
(``backend.sessions.entity_edits``) and name each entity by its ``key``, which a rename
keeps. Failure policy as ``memories_api``: unknown persona or entity → 404, invalid
input → 400 before anything is stored, a name another entity goes by → 409 (merge them
instead), the store unreachable → 503.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fastapi import APIRouter

from backend.engine.services import Services
from backend.longterm.memory import LongTermMemory
from backend.memory.entities import (
    Entity,
    EntityEdit,
    edit_entity,
    entity_table,
    find_entity,
    forgotten_with,
    merge_edits,
)
from backend.memory.types import Memory, Namespace
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError
from backend.web.memories_api import namespace, store_errors
from backend.web.schemas import (
    ERROR_RESPONSES,
    EntityDeleted,
    EntityFact,
    EntityKey,
    EntityList,
    EntityMerge,
    EntityOut,
    EntityPatch,
    PersonaId,
)

log = logging.getLogger(__name__)
router = APIRouter(
    prefix="/api/personas/{persona_id}/entities", tags=["memories"], responses=ERROR_RESPONSES
)


def live_memories(long_term: LongTermMemory, ns: Namespace) -> list[Memory]:
    """Every memory of the namespace that is not superseded."""
    store = long_term.store
    total = store.count(ns, include_superseded=False)
    return store.list(ns, offset=0, limit=max(total, 1), include_superseded=False)


def entity_edits(services: Services, ns: Namespace) -> list[EntityEdit]:
    return services.sessions.entity_edits(ns.user_id, ns.persona_id)


def entities_with_facts(
    memories: list[Memory], edits: Sequence[EntityEdit] = ()
) -> list[tuple[Entity, list[Memory]]]:
    """The table with ``edits`` laid over, each entity with its memories (oldest first)."""
    by_id = {m.id: m for m in memories}
    return [
        (entity, sorted((by_id[i] for i in entity.memory_ids), key=lambda m: m.created_at))
        for entity in entity_table(memories, edits)
    ]


def entity_out(entity: Entity, facts: list[Memory]) -> EntityOut:
    return EntityOut(
        key=entity.key,
        name=entity.name,
        aliases=list(entity.aliases),
        relation=entity.relation,
        kind=entity.kind,
        described_as=list(entity.described_as),
        facts=[EntityFact(id=m.id, content=m.content) for m in facts],
    )


def current(services: Services, ns: Namespace) -> tuple[list[Memory], list[Entity]]:
    """The live memories and the edited table (503 when the store is unreachable)."""
    with store_errors():
        memories = live_memories(services.long_term, ns)
    return memories, entity_table(memories, entity_edits(services, ns))


def entity_or_404(table: Sequence[Entity], key: str) -> Entity:
    entity = find_entity(table, key)
    if entity is None:
        raise APIError(404, f"no person or pet {key!r} in these memories", "entity_not_found")
    return entity


def name_conflict(table: Sequence[Entity], entity: Entity, names: Sequence[str]) -> None:
    """409 when another entity goes by one of ``names``: two entities that share a name
    are one person, and merging says so."""
    for other in table:
        if other.key == entity.key:
            continue
        taken = {n.casefold() for n in other.names} | {other.key}
        clash = next((n for n in names if n.casefold() in taken), None)
        if clash is not None:
            raise APIError(
                409,
                f"{clash!r} is already a name of {other.name or other.relation!r}; merge the"
                " two instead",
                "entity_name_taken",
            )


def shown(services: Services, ns: Namespace, key: str) -> EntityOut:
    """The entity of ``key`` as the table now reads it."""
    memories, table = current(services, ns)
    entity = entity_or_404(table, key)
    by_id = {m.id: m for m in memories}
    facts = sorted((by_id[i] for i in entity.memory_ids), key=lambda m: m.created_at)
    return entity_out(entity, facts)


def patch_entity(services: Services, ns: Namespace, key: str, body: EntityPatch) -> EntityOut:
    """Store the user's change of one entity; returns it as the table then reads it."""
    changes = body.model_dump(exclude_unset=True)
    if not changes or all(v is None for v in changes.values()):
        raise APIError(400, "nothing to change: give name, relation, kind or aliases", "empty")
    changes = {k: v for k, v in changes.items() if v is not None}
    _, table = current(services, ns)
    entity = entity_or_404(table, key)
    given = [*changes.get("aliases", []), *([changes["name"]] if "name" in changes else [])]
    name_conflict(table, entity, given)
    if "name" in changes and entity.name and changes["name"] != entity.name:
        # The name it had stays one of its names, so that notes saying it still reach it.
        kept = changes.get("aliases", list(entity.aliases))
        changes["aliases"] = [*kept, *([] if entity.name in kept else [entity.name])]
    services.sessions.change_entity_edits(
        ns.user_id, ns.persona_id, lambda edits: edit_entity(edits, entity.key, **changes)
    )
    log.info("entity %s edited in %s: %s", entity.key, ns.key, sorted(changes))
    return shown(services, ns, entity.key)


def merge_entities(services: Services, ns: Namespace, body: EntityMerge) -> EntityOut:
    """Fold ``body.entities`` into ``body.into``; returns the one that is left."""
    _, table = current(services, ns)
    into = entity_or_404(table, body.into)
    others = [entity_or_404(table, key) for key in body.entities]
    folded = [e.key for e in others if e.key != into.key]
    if not folded:
        raise APIError(400, "nothing to merge: give other entities than 'into'", "empty")
    services.sessions.change_entity_edits(
        ns.user_id, ns.persona_id, lambda edits: merge_edits(edits, table, into.key, folded)
    )
    log.info("entities %s merged into %s in %s", folded, into.key, ns.key)
    return shown(services, ns, into.key)


def delete_entity(services: Services, ns: Namespace, key: str) -> EntityDeleted:
    """Forget the memories about the entity alone (every version), then hide it."""
    _, table = current(services, ns)
    entity = entity_or_404(table, key)
    long_term = services.long_term
    with store_errors():
        chains = {
            version.id
            for memory_id in forgotten_with(entity, table)
            for version in long_term.version_chain(ns, memory_id)
        }
        forgotten = long_term.delete_memories(ns, sorted(chains)) if chains else 0
    services.sessions.change_entity_edits(
        ns.user_id, ns.persona_id, lambda edits: edit_entity(edits, entity.key, deleted=True)
    )
    log.info("entity %s deleted in %s: %d memories forgotten", entity.key, ns.key, forgotten)
    return EntityDeleted(key=entity.key, forgotten=forgotten)


@router.get("")
def list_entities(persona_id: PersonaId, user: UserDep, services: ServicesDep) -> EntityList:
    """The people and pets the caller's memories with this persona name, most mentioned
    first, each with the memories that name them, the caller's edits laid over."""
    ns = namespace(services, user, persona_id)
    with store_errors():
        memories = live_memories(services.long_term, ns)
    pairs = entities_with_facts(memories, entity_edits(services, ns))
    return EntityList(items=[entity_out(entity, facts) for entity, facts in pairs])


@router.post("/merge")
def merge(
    persona_id: PersonaId, body: EntityMerge, user: UserDep, services: ServicesDep
) -> EntityOut:
    """Entities that are one person or pet become one: the others' memories are its
    memories and their names its aliases."""
    return merge_entities(services, namespace(services, user, persona_id), body)


@router.patch("/{key}")
def patch(
    persona_id: PersonaId, key: EntityKey, body: EntityPatch, user: UserDep, services: ServicesDep
) -> EntityOut:
    """Change an entity's name, relation, kind or aliases; fields left out stay."""
    return patch_entity(services, namespace(services, user, persona_id), key, body)


@router.delete("/{key}")
def delete(
    persona_id: PersonaId, key: EntityKey, user: UserDep, services: ServicesDep
) -> EntityDeleted:
    """Hide the entity and forget the memories about it alone (module docstring)."""
    return delete_entity(services, namespace(services, user, persona_id), key)
