"""The chat page's memory panel: the session's background, short-term items, feeling and
the last turn's memory report (with an edit's revision: what it forgot, and why).

Failure policy: the panel never fails a page: a report saved by an older version is
shaped to have every key the template reads; a missing report shows as "no turn yet".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from backend.engine.services import Services


async def panel_context(
    services: Services, session_id: str, report: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The memory panel: background, short-term items and the last turn's report."""
    state = await asyncio.to_thread(services.sessions.load_state, session_id)
    reports = [
        r.report for r in await asyncio.to_thread(services.sessions.turn_reports, session_id)
    ]
    if report is None:
        report = reports[-1] if reports else None
    report = with_revision(report, reports)
    return {
        "session_id": session_id,
        "background": state.background,
        "short_term": [
            {
                "role": str(item.get("role", "")),
                "text": str(item.get("text", "")),
                "compressed": bool(item.get("compressed")),
            }
            for item in state.short_term
            if isinstance(item, dict)
        ],
        "emotion": _emotion(state.user_emotion),
        "report": None if report is None else _report(report),
    }


_REPORT_LISTS = (
    "activated", "written", "reinforced", "superseded", "rejected", "queued", "removed", "kept",
)  # fmt: skip


def with_revision(
    report: dict[str, Any] | None, reports: Sequence[dict[str, Any]]
) -> dict[str, Any] | None:
    """A turn's report with the revision saved just before it (an edit's: what the old
    text formed that was removed, ``backend.engine.revisions``)."""
    if report is None or report.get("revision"):
        return report
    ids = [r.get("turn_id") for r in reports]
    at = ids.index(report.get("turn_id")) if report.get("turn_id") in ids else len(reports)
    before = reports[at - 1] if at > 0 else None
    if before is None or before.get("revision") != "edit" or report.get("removed"):
        return report
    return {**report, "removed": before.get("removed", []), "kept": before.get("kept", [])}


def _report(report: dict[str, Any]) -> dict[str, Any]:
    """The stored report with every key the panel reads (older reports may lack some)."""
    shaped = dict(report)
    for key in _REPORT_LISTS:
        value = shaped.get(key)
        shaped[key] = value if isinstance(value, list) else []
    hippocampus = shaped.get("hippocampus")
    shaped["hippocampus"] = {
        "status": None,
        "ms": None,
        "error": None,
        **(hippocampus if isinstance(hippocampus, dict) else {}),
    }
    reply = shaped.get("reply")
    shaped["reply"] = {"status": None, "error": None, **(reply if isinstance(reply, dict) else {})}
    return shaped


def _emotion(emotion: Any) -> dict[str, Any] | None:
    if not isinstance(emotion, dict) or not isinstance(emotion.get("label"), str):
        return None
    intensity = emotion.get("intensity")
    number = isinstance(intensity, int | float) and not isinstance(intensity, bool)
    return {"label": emotion["label"], "intensity": float(intensity) if number else None}
