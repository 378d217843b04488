"""The memory steps a turn's reply is framed with, for clients that show them (the NeMo
Agent Toolkit UI over HTTP and WebSocket): the activation before the reply, and the
memory report, waited for a bounded time, before the reply's end."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

from backend.engine.report import activation_part
from backend.engine.turn import Turn

log = logging.getLogger(__name__)

# How long a reply's end waits for the turn's memory report before the stream (HTTP) or
# the turn (WebSocket ``complete``) ends. The NeMo UI keeps its "Stop Generating" state,
# input locked, until then, and drops what comes later (Chat.tsx:753-762 over WebSocket),
# so the wait is bounded: the hippocampus runs alongside the reply from the turn's start,
# and on the default local preset the merge ends about 4.8 s after the last token
# (docs/benchmarks.md, "Chat latency"); 10 s covers that on a loaded 2-core machine. A
# merge still running then is reported as pending (the report lands in
# ``GET /api/sessions/{id}``); the reply itself is stored long before.
MEMORY_REPORT_WAIT_S = 10.0


async def memory_report(turn: Turn, timeout: float | None = None) -> dict[str, Any] | None:
    """The turn's memory report once merged, waiting at most ``timeout`` seconds (default
    ``MEMORY_REPORT_WAIT_S``); on timeout a stub saying so; None when the merge failed."""
    assert turn.merged is not None
    wait = MEMORY_REPORT_WAIT_S if timeout is None else timeout
    try:
        # Shielded: giving up waiting must not cancel the memory worker's future.
        return await asyncio.wait_for(asyncio.shield(turn.merged), wait)
    except TimeoutError:
        return {
            "pending": True,
            "detail": f"the memory merge was still running after {wait:g} s; its report "
            f"will be in GET /api/sessions/{turn.session.id}",
        }
    except Exception:
        log.exception("merge failed in session %s", turn.session.id)
        return None


def activation_payload(turn: Turn) -> dict[str, Any]:
    return {"activated": activation_part(turn.activation)["activated"]}


def step_line(name: str, payload: Any, turn: Turn) -> bytes:
    """One NeMo-UI ``intermediate_data:`` line (not an SSE field: the UI's proxy reads it
    raw, with the fields of response-processors.js:25-36); ``id`` must be set or the UI
    drops the step (utils/app/helper.ts:153)."""
    step = {
        "id": uuid.uuid4().hex,
        "name": name,
        "payload": json.dumps(payload, ensure_ascii=False),
        "status": "complete",
        "parent_id": turn.turn_id,
        "time_stamp": time.time(),
    }
    return f"intermediate_data: {json.dumps(step, ensure_ascii=False)}\n\n".encode()
