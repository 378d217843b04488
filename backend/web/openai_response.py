"""The answer to an OpenAI chat request: one ``chat.completion`` JSON, or an SSE stream of
``chat.completion.chunk`` events ended by ``[DONE]`` (``respond``), for a turn or a
utility request's plain completion. ``backend.web.openai_api`` (the route) calls it with
the turn it began; ending the turn where the response ends is done here.

Failure policy (the route's): an upstream failure before the first token → 502; after
it → the failure as reply text, a final SSE event with the error object, then ``[DONE]``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from backend.engine.plain_completion import PlainCompletion
from backend.engine.turn import Turn
from backend.hippocampus import estimate_tokens
from backend.llm.port import LLMError
from backend.web.errors import error_body
from backend.web.openai_schemas import ChatRequest
from backend.web.turn_steps import activation_payload, memory_report, step_line


def _chunk(
    cid: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def _usage(turn: Turn | PlainCompletion) -> dict[str, int]:
    if turn.usage is not None:
        prompt, completion = turn.usage.prompt_tokens, turn.usage.completion_tokens
    else:  # the provider reported none: our estimate, so clients always get the field
        prompt = sum(estimate_tokens(str(m.get("content") or "")) for m in turn.messages)
        completion = estimate_tokens(turn.reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


async def respond(
    body: ChatRequest,
    source: Turn | PlainCompletion,
    turn: Turn | None,
    cid: str,
    model: str,
    headers: dict[str, str],
    end: Callable[[], Awaitable[Any]] | None = None,
) -> Any:
    """The response to a turn or a plain completion: one JSON, or an SSE stream (with
    ``turn``: framed by the memory steps). ``end`` ends the source (a turn's context),
    once, where the response ends: here for a JSON answer, else when the SSE stream
    closes (or, if it never runs, after the response)."""
    created = int(time.time())
    stream = source.stream()
    close = end or stream.aclose
    # Pull the first chunk before answering, so an upstream that is down gets a real 502.
    try:
        first = await anext(stream, None)
    except LLMError as exc:
        await close()
        return JSONResponse(
            error_body(502, f"the chat model failed: {exc}", "upstream_error"),
            status_code=502,
            headers=headers,
        )
    if not body.stream:
        parts = [first or ""]
        try:
            parts += [text async for text in stream]
        except LLMError as exc:
            return JSONResponse(
                error_body(502, f"the chat model failed: {exc}", "upstream_error"),
                status_code=502,
                headers=headers,
            )
        finally:
            await close()
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": source.finish_reason or "stop",
                        "message": {"role": "assistant", "content": "".join(parts)},
                    }
                ],
                "usage": _usage(source),
            },
            headers=headers,
        )

    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    steps = turn is not None

    async def events() -> AsyncIterator[ServerSentEvent | bytes]:
        try:
            if steps and turn is not None:
                yield step_line("Memory activation", activation_payload(turn), turn)
            yield ServerSentEvent(json.dumps(_chunk(cid, created, model, {"role": "assistant"})))
            if first:
                yield ServerSentEvent(json.dumps(_chunk(cid, created, model, {"content": first})))
            async for text in stream:
                yield ServerSentEvent(json.dumps(_chunk(cid, created, model, {"content": text})))
            yield ServerSentEvent(
                json.dumps(_chunk(cid, created, model, {}, source.finish_reason or "stop"))
            )
            if include_usage:
                usage_chunk = _chunk(cid, created, model, {}, None, _usage(source))
                usage_chunk["choices"] = []
                yield ServerSentEvent(json.dumps(usage_chunk))
            if steps and turn is not None and turn.merged is not None:
                report = await memory_report(turn)  # bounded: the UI waits for the end
                if report is not None:
                    yield step_line("Memory report", report, turn)
        except LLMError as exc:
            message = f"the chat model failed: {exc}"
            # As reply text too: a client that shows only content (the NeMo UI's proxy
            # drops an event without it) still tells the user why the reply stopped.
            notice = {"content": f"\n\n[{message}]"}
            yield ServerSentEvent(json.dumps(_chunk(cid, created, model, notice)))
            yield ServerSentEvent(json.dumps(error_body(502, message, "upstream_error")))
        finally:
            await close()
        yield ServerSentEvent("[DONE]")

    return EventSourceResponse(events(), headers=headers, ping=15, background=BackgroundTask(close))
