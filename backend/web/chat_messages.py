"""What an OpenAI-format ``messages`` list asks for, read the way real clients write it
(docs/api.md, "What a request's messages mean").

- The leading ``system``/``developer`` messages are the client's system prompt; from the
  first one with a ``name`` (SillyTavern's example dialogue: ``example_user``,
  ``example_assistant``) the rest of the leading block is kept as sent, names and all.
- The ``user``/``assistant`` messages are the conversation. A ``name`` is kept as a
  ``"Name: "`` prefix of the text, so a group chat's speakers stay told apart in the
  transcript and in memory.
- ``system`` messages after the last of them are an instruction for this reply
  (SillyTavern's post-history instructions, its group nudge, its continue nudge).
- The conversation's last message says what is asked: a user message is a new turn (or,
  when the server already answered it, a regeneration); an assistant message is to be
  continued, or, after a group nudge, followed by the next speaker's reply.
- Messages of other roles (``tool``, ``function``) and system messages inside the
  conversation are not part of it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.engine.conversation_match import Final

CONVERSATION_ROLES = ("user", "assistant")
SYSTEM_ROLES = ("system", "developer")
IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
# SillyTavern's group nudge (public/scripts/openai.js:111, default "[Write the next reply
# only as {{char}}.]"): after an assistant message it asks for the next speaker's reply,
# not for the continuation of that message.
GROUP_NUDGE = "[Write the next reply only as"


@dataclass(frozen=True, slots=True)
class ChatInput:
    text: str  # the new user message ("" for a continue or a reply)
    final: Final
    history: tuple[tuple[str, str], ...]  # the conversation before ``text``, or all of it
    client_system: str | None = None
    examples: tuple[dict[str, Any], ...] = ()
    instruction: str | None = None
    image_parts: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    # The new user message's own image parts (what a turn shows a model that takes images).
    final_image_parts: tuple[dict[str, Any], ...] = field(default_factory=tuple)


def part_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            kind = _get(part, "type") or "text"
            text = _get(part, "text")
            if kind in ("text", "input_text") and isinstance(text, str):
                texts.append(text)
        return "".join(texts)
    return ""


def image_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str) or not isinstance(content, Sequence):
        return []
    return [
        dict(part) if isinstance(part, Mapping) else _dump(part)
        for part in content
        if _get(part, "type") in IMAGE_PART_TYPES
    ]


def with_name(text: str, name: str | None) -> str:
    name = (name or "").strip()
    if not name or text.lstrip().startswith(f"{name}:"):
        return text
    return f"{name}: {text}"


def read_messages(messages: Sequence[Mapping[str, Any]]) -> ChatInput | None:
    """The request's meaning; None when it has no user or assistant message at all."""
    roles = [str(m.get("role") or "") for m in messages]
    spoken = [i for i, role in enumerate(roles) if role in CONVERSATION_ROLES]
    if not spoken:
        return None
    first, last = spoken[0], spoken[-1]
    system, examples = _leading(messages[:first])
    instruction = "\n\n".join(
        text
        for m in messages[last + 1 :]
        if m.get("role") in SYSTEM_ROLES and (text := part_text(m.get("content")).strip())
    )
    conversation = [
        (
            str(messages[i]["role"]),
            with_name(part_text(messages[i].get("content")), _name(messages[i])),
        )
        for i in spoken
    ]
    final_role, final_text = conversation[-1]
    if final_role == "user":
        final: Final = "turn"
        text, history = final_text, conversation[:-1]
    else:
        final = "reply" if GROUP_NUDGE in instruction else "continue"
        text, history = "", conversation
    images = [part for i in spoken for part in image_parts(messages[i].get("content"))]
    return ChatInput(
        text=text,
        final=final,
        history=tuple(history),
        client_system=system or None,
        examples=tuple(examples),
        instruction=instruction or None,
        image_parts=tuple(images),
        final_image_parts=tuple(image_parts(messages[last].get("content")))
        if final == "turn"
        else (),
    )


def _leading(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The client's system prompt, and the rest of the leading block as sent."""
    system: list[str] = []
    kept: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role not in SYSTEM_ROLES:
            continue
        text = part_text(message.get("content"))
        if not kept and not _name(message):
            if text.strip():
                system.append(text.strip())
            continue
        entry: dict[str, Any] = {"role": "system", "content": text}
        if _name(message):
            entry["name"] = _name(message)
        kept.append(entry)
    return "\n\n".join(system), kept


def _name(message: Mapping[str, Any]) -> str | None:
    name = message.get("name")
    return name.strip() or None if isinstance(name, str) else None


def _get(part: Any, key: str) -> Any:
    return part.get(key) if isinstance(part, Mapping) else getattr(part, key, None)


def _dump(part: Any) -> dict[str, Any]:
    dump = getattr(part, "model_dump", None)
    return dict(dump(exclude_none=True)) if callable(dump) else {}
