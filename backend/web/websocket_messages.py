"""The WebSocket's client messages: what a ``user_message`` may hold, and how it is read
into the turn to run (``parse_user_message``) or refused (``BadMessage``).
``backend.web.websocket`` is the connection that receives them and answers.

Client → server, one JSON text frame per message (the UI's: components/Chat/Chat.tsx
:994-1005 in NVIDIA/NeMo-Agent-Toolkit-UI)::

    {"type": "user_message", "schema_type": "chat_stream", "id": "m1",
     "conversation_id": "c1", "model": "companion",            # model: optional persona
     "content": {"messages": [{"role": "user",
                               "content": [{"type": "text", "text": "hi"}]}]}}

``content`` may also be a plain string, or ``{"text": ...}``; a message's ``content`` may be
a string or a list of text parts. As in the HTTP API the last user message is the turn;
earlier user/assistant messages (the UI's "chat history" setting) are lined up with the
conversation's transcript (``backend.engine.session_placement``: the same message again
redoes its reply, an edit starts a branch, a new conversation is seeded with them); system
messages are appended to the persona's prompt.

A message that cannot run (wrong type or schema, no text, a text too long or not
storable, a bad ``model`` or ``conversation_id``) raises ``BadMessage`` with the code and
message the client is sent; nothing is stored. A frame too large or not a JSON object is
refused by the connection before it gets here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.sessions.store import MAX_SESSION_ID
from backend.storable_text import unstorable_reason

STREAMING_SCHEMAS = frozenset({"chat_stream", "generate_stream"})
BATCH_SCHEMAS = frozenset({"chat", "generate"})


class BadMessage(Exception):
    """A client message the server cannot run; answered with an ``error`` message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A ``user_message`` read: the turn to run, and how to answer it."""

    id: str | None
    conversation_id: str
    text: str
    persona: str | None
    streaming: bool
    system: str | None = None
    history: tuple[tuple[str, str], ...] = ()


def _part_text(content: Any) -> str | None:
    """The text of one message's content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text")
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        ]
        return "".join(t for t in texts if isinstance(t, str))
    return None


def client_conversation_id(data: dict[str, Any]) -> str | None:
    """The client's conversation id; ``None`` when it sent none (a new one is made)."""
    value = data.get("conversation_id")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or len(value.strip()) > MAX_SESSION_ID:
        raise BadMessage(
            "invalid_conversation_id",
            f"conversation_id must be a string of at most {MAX_SESSION_ID} characters",
        )
    return value.strip()


def parse_user_message(
    data: dict[str, Any], conversation_id: str, default_persona: str | None, limit: int
) -> UserMessage:
    """A ``user_message`` as a turn to run. Raises ``BadMessage``."""
    kind = data.get("type")
    if kind != "user_message":
        raise BadMessage("unsupported_type", f"unsupported message type {kind!r}")
    schema = data.get("schema_type") or "chat_stream"
    if schema not in STREAMING_SCHEMAS | BATCH_SCHEMAS:
        raise BadMessage("unsupported_schema_type", f"unsupported schema_type {schema!r}")
    content = data.get("content")
    system: list[str] = []
    history: list[tuple[str, str]] = []
    text: str | None = None
    if isinstance(content, str):
        text = content
    elif isinstance(content, dict) and isinstance(content.get("messages"), list):
        messages = [m for m in content["messages"] if isinstance(m, dict)]
        if messages and messages[-1].get("role", "user") == "user":
            text = _part_text(messages[-1].get("content"))
        for m in messages[:-1]:
            body = _part_text(m.get("content")) or ""
            if m.get("role") in ("system", "developer"):
                system.append(body)
            elif m.get("role") in ("user", "assistant"):
                history.append((m["role"], body))
    elif isinstance(content, dict) and isinstance(content.get("text"), str):
        text = content["text"]
    if text is None or not text.strip():
        raise BadMessage("invalid_messages", "the message must end with a non-empty user message")
    if len(text) > limit:
        raise BadMessage("message_too_large", f"the message is longer than {limit} characters")
    reason = unstorable_reason(text)
    if reason is not None:
        raise BadMessage("invalid_messages", f"the message {reason}")
    persona = data.get("model")
    if persona is not None and not isinstance(persona, str):
        raise BadMessage("invalid_model", "model must be a persona id")
    message_id = data.get("id")
    return UserMessage(
        id=str(message_id) if isinstance(message_id, str | int) else None,
        conversation_id=conversation_id,
        text=text,
        persona=persona or default_persona,
        streaming=schema in STREAMING_SCHEMAS,
        system="\n\n".join(s for s in system if s) or None,
        history=tuple(history),
    )
