"""The user's edits of the people and pets of their life, one row per (user, persona).

The entity table itself is derived from the memories each time (``backend.memory.entities``);
what is stored here is only what the user changed over it (merges, names, relations,
kinds, deletions), as a JSON list of ``EntityEdit``. One row per namespace, rewritten
whole in one transaction: a merge changes several edits at once, and two edits of the
same namespace never interleave (the row is locked while it is read and rewritten).

Mixed into ``SessionStore`` (``backend.sessions.store``), whose database and clock it
uses; its failure policy is the store's. A row that cannot be read (hand-edited) reads
as no edits, logged, rather than breaking every turn of that namespace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from sqlalchemy import text

from backend.clock import Clock
from backend.memory.entities import EntityEdit
from backend.sessions.db import SessionDatabase
from backend.sessions.records import stamp
from backend.storable_text import storable

log = logging.getLogger(__name__)


def _parse(raw: str, where: str) -> list[EntityEdit]:
    try:
        return [EntityEdit.from_dict(item) for item in json.loads(raw)]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("unreadable entity edits of %s, read as none: %s", where, exc)
        return []


class SessionEntityEdits:
    """The ``entity_edits`` table."""

    db: SessionDatabase
    _clock: Clock

    def entity_edits(self, user_id: str, persona_id: str) -> list[EntityEdit]:
        """The user's entity edits with this persona (none: the derived table as it is)."""
        rows = self.db.read(
            "SELECT edits FROM entity_edits WHERE user_id = :user AND persona_id = :persona",
            {"user": user_id, "persona": persona_id},
        )
        return _parse(rows[0][0], f"{user_id}::{persona_id}") if rows else []

    def change_entity_edits(
        self,
        user_id: str,
        persona_id: str,
        change: Callable[[list[EntityEdit]], Sequence[EntityEdit]],
    ) -> list[EntityEdit]:
        """Replace the edits with ``change(edits)``, read and written in one transaction;
        returns what was stored. An exception in ``change`` stores nothing."""
        params = {"user": user_id, "persona": persona_id}
        with self.db.write() as db:
            # The row exists before it is locked, so two first edits cannot both miss it.
            db.execute(
                text(
                    "INSERT INTO entity_edits (user_id, persona_id, edits, updated_at)"
                    " VALUES (:user, :persona, '[]', :now) ON CONFLICT DO NOTHING"
                ),
                {**params, "now": stamp(self._clock.now())},
            )
            lock = " FOR UPDATE" if self.db.postgres else ""
            raw = db.execute(
                text(
                    "SELECT edits FROM entity_edits WHERE user_id = :user"
                    f" AND persona_id = :persona{lock}"
                ),
                params,
            ).scalar_one()
            edits = list(change(_parse(raw, f"{user_id}::{persona_id}")))
            body = json.dumps([e.to_dict() for e in edits], ensure_ascii=False)
            db.execute(
                text(
                    "UPDATE entity_edits SET edits = :edits, updated_at = :now"
                    " WHERE user_id = :user AND persona_id = :persona"
                ),
                {**params, "edits": storable(body), "now": stamp(self._clock.now())},
            )
        return edits

    def clear_entity_edits(self, user_id: str, persona_id: str) -> None:
        """Drop the user's entity edits with this persona (its memories were reset)."""
        with self.db.write() as db:
            db.execute(
                text("DELETE FROM entity_edits WHERE user_id = :user AND persona_id = :persona"),
                {"user": user_id, "persona": persona_id},
            )
