"""A user's memories with a persona out and back in: the long-term store's JSON lines
(``backend.longterm.transfer``) and, after them, the user's edits of the people and pets
of their life, which the session store keeps (``backend.sessions.entity_edits``).

Import: memory lines go to the long-term store as they are; the edits line's edits are
laid over the namespace's own, an imported edit replacing the one with the same entity
key and the others kept (a restore onto a store with no edits gives the export's). An
unreadable edits line is counted invalid like any other line and loses nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence

from backend.engine.services import Services
from backend.longterm.jsonl_format import (
    InvalidMemoryLine,
    decode_entity_edits,
    encode_entity_edits,
)
from backend.longterm.transfer import ImportReport
from backend.memory.entities import EntityEdit
from backend.memory.types import Namespace


def export_lines(services: Services, ns: Namespace) -> Iterator[str]:
    """Every memory as a JSON line (oldest first), then the entity edits' line if any."""
    yield from services.long_term.export_jsonl(ns)
    edits = services.sessions.entity_edits(ns.user_id, ns.persona_id)
    if edits:
        yield encode_entity_edits(edits) + "\n"


def laid_over(own: Sequence[EntityEdit], imported: Sequence[EntityEdit]) -> list[EntityEdit]:
    """``own`` with each of ``imported`` replacing the edit of its key (or added)."""
    by_key = {edit.key: edit for edit in imported}
    kept = [edit for edit in own if edit.key not in by_key]
    return kept + list(by_key.values())


def import_lines(services: Services, ns: Namespace, lines: Iterable[str]) -> ImportReport:
    """Import an export (module docstring); blocking: call it off the event loop."""
    memory_lines: list[str] = []
    imported: list[EntityEdit] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        try:
            edits = decode_entity_edits(line)
        except InvalidMemoryLine as exc:
            problems.append(f"line {number}: {exc}")
            memory_lines.append("")  # keeps the memory lines' numbers
            continue
        if edits is None:
            memory_lines.append(line)
        else:
            imported += edits
            memory_lines.append("")
    report = services.long_term.import_jsonl(ns, memory_lines)
    if imported:
        services.sessions.change_entity_edits(
            ns.user_id, ns.persona_id, lambda own: laid_over(own, imported)
        )
    return dataclasses.replace(
        report,
        invalid=report.invalid + len(problems),
        errors=(*report.errors, *problems)[:20],
        entity_edits=len(imported),
    )
