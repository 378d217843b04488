"""``/api/personas``: the personas the app serves (list and one card).

Failure policy: an unknown persona id is a 404 in the OpenAI error shape; a malformed
one (not ``[a-z0-9][a-z0-9_-]{0,63}``) a 400.
"""

from __future__ import annotations

from fastapi import APIRouter

from backend.engine.services import Services
from backend.personas import Persona
from backend.web.deps import ServicesDep, UserDep
from backend.web.errors import APIError
from backend.web.schemas import ERROR_RESPONSES, PersonaDetail, PersonaId, PersonaList, PersonaOut

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
