"""``/api/personas``: the personas the app serves (list and one card), importing a
SillyTavern character card as a persona, and resetting the caller's memories with one.

Failure policy: an unknown persona id is a 404 in the OpenAI error shape; a malformed
one (not ``[a-z0-9][a-z0-9_-]{0,63}``) a 400. An unusable card is a 400
(``invalid_card``) naming what is wrong; an import over an existing id without
``overwrite=true`` a 409 (``persona_exists``); the store unreachable during a reset a 503.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from backend.engine.services import Services
from backend.memory.types import Namespace
from backend.persona_import import CardImportError, PersonaExists, import_card
from backend.personas import Persona
from backend.stores.vector_port import VectorStoreUnavailable
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError
from backend.web.schemas import ERROR_RESPONSES, PersonaDetail, PersonaId, PersonaList, PersonaOut

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/personas", tags=["personas"], responses=ERROR_RESPONSES)


def persona_or_404(services: Services, persona_id: str) -> Persona:
    """The persona, or a 404 ``APIError`` (shared by the memory routes)."""
    persona = services.personas.get(persona_id)
    if persona is None:
        raise APIError(404, f"unknown persona {persona_id!r}", "persona_not_found")
    return persona


@router.get("")
def list_personas(_user: UserDep, services: ServicesDep) -> PersonaList:
    """Every persona, in card-name order; ``default`` marks the one used when a client
    names none."""
    default = services.personas.default.id
    return PersonaList(items=[PersonaOut.from_persona(p, default) for p in services.personas])


@router.get("/{persona_id}")
def get_persona(persona_id: PersonaId, _user: UserDep, services: ServicesDep) -> PersonaDetail:
    """One persona's card, with its system prompt and memory overrides."""
    persona = persona_or_404(services, persona_id)
    return PersonaDetail.from_persona(persona, services.personas.default.id)


class ResetResult(BaseModel):
    persona_id: str
    forgotten: int  # memories removed (every version)


def forget_persona(services: Services, user: str, persona_id: str) -> int:
    """Drop the (user, persona) namespace: every memory and its lexical index entries, and
    the user's entity edits. Returns how many memories there were. Raises
    ``VectorStoreUnavailable``."""
    ns = Namespace(user, persona_id)
    count = services.long_term.forget_namespace(ns)
    # The edits of the people and pets those memories named go with them.
    services.sessions.clear_entity_edits(user, persona_id)
    log.info("reset: forgot %d memories of %s", count, ns.key)
    return count


def install_persona(services: Services, data: bytes, filename: str, *, overwrite: bool) -> Persona:
    """Import a character card into the configured persona directory and serve it now.
    Raises ``CardImportError`` / ``PersonaExists``."""
    settings = services.settings
    persona = import_card(
        data,
        Path(settings.server.personas_dir),
        filename or "card",
        overwrite=overwrite,
        base_memory=settings.memory,
    )
    services.personas.add(persona)  # the engine's own registry: served from now on
    log.info("imported persona %s from %s", persona.id, filename or "an upload")
    return persona


_CARD_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            }
        },
        "application/json": {"schema": {"type": "object"}},
        "image/png": {"schema": {"type": "string", "format": "binary"}},
    },
}


async def _card_upload(request: Request) -> tuple[bytes, str]:
    content_type = request.headers.get("content-type", "").lower()
    if not content_type.startswith("multipart/form-data"):
        return await request.body(), "upload"
    async with request.form(max_files=1, max_fields=8) as form:
        upload = form.get("file")
        if upload is None:
            raise APIError(400, "the multipart body has no field 'file'", "missing_file")
        if isinstance(upload, str):
            return upload.encode(), "upload"
        name = Path(upload.filename or "upload").name[:100]
        return await upload.read(), name


@router.post("/import", status_code=201, openapi_extra={"requestBody": _CARD_BODY})
async def import_persona(
    request: Request,
    _user: UserDep,
    services: ServicesDep,
    overwrite: Annotated[bool, Query(description="Replace a persona with the same id.")] = False,
) -> PersonaDetail:
    """Import a SillyTavern character card (``chara_card_v2``/v3 JSON, or a PNG card with
    a ``chara`` text chunk) as a persona: written to the persona directory and served at
    once. The id is derived from the character's name."""
    data, filename = await _card_upload(request)
    try:
        persona = await asyncio.to_thread(
            install_persona, services, data, filename, overwrite=overwrite
        )
    except PersonaExists as exc:
        raise APIError(409, str(exc), "persona_exists") from None
    except CardImportError as exc:
        raise APIError(400, str(exc), "invalid_card") from None
    except OSError as exc:
        log.error("persona import: cannot write the card: %s", exc)
        raise APIError(
            500, "the persona directory cannot be written", "persona_dir_unwritable"
        ) from None
    return PersonaDetail.from_persona(persona, services.personas.default.id)


@router.delete("/{persona_id}/memories")
async def reset_persona(persona_id: PersonaId, user: UserDep, services: ServicesDep) -> ResetResult:
    """Forget everything this persona remembers about the caller (the caller's
    namespace with it only; other users' memories are untouched). Cannot be undone."""
    persona = persona_or_404(services, persona_id)
    try:
        count = await asyncio.to_thread(forget_persona, services, user, persona.id)
    except VectorStoreUnavailable as exc:
        raise APIError(
            503, f"the long-term store is unavailable: {exc}", "store_unavailable"
        ) from None
    return ResetResult(persona_id=persona.id, forgotten=count)
