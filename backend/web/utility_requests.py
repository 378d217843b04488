"""Recognise *utility* chat-completion requests that must get a plain, stateless completion.

Front-ends such as Open WebUI and SillyTavern send, besides the user's chat turns, background
requests over the same ``/v1/chat/completions`` endpoint: "generate a title", "suggest follow-ups",
"summarise the story so far"... Those must not be answered in the persona's voice, must not open
or touch a session, and must neither read nor write memory. Nothing in the OpenAI wire format marks
them, so this module recognises them from the shapes the clients are known to send. Pure functions:
no I/O, no web framework.

Known shapes (request shapes only; see tests/web/clients/README.md for the fixtures):

Open WebUI 0.12.4 (wheel ``open_webui-0.12.4``; the task prompts read back to 0.4.8):
  * Each background task sends ``messages=[{"role": "user", "content": <rendered template>}]``,
    ``stream: false`` (routers/tasks.py:188-199 title, 255-266 follow-ups, 320-331 tags,
    379-390 image prompt, 456-467 queries, 532-543 autocomplete, 587-598 emoji, 642-651 MoA).
    A Workspace model's system prompt may be prepended as a ``system`` message
    (routers/openai.py:1449-1456), so only the LAST message is inspected.
  * ``metadata.task`` marks the task inside Open WebUI but is popped before the upstream call
    (routers/openai.py:1432) and never reaches us. ``X-OpenWebUI-Chat-Id`` /
    ``X-OpenWebUI-User-*`` (utils/headers.py:196-199, env.py:1009-1017, only with
    ``ENABLE_FORWARD_USER_INFO_HEADERS=true``) are sent for chat turns *and* tasks alike.
    A connection's custom headers may use ``{{TASK}}`` (utils/headers.py:147), which expands to
    the task name (constants.py:141-149) for tasks and to ``""`` for chat turns — so an admin can
    set the connection header ``X-Limbic-Stateless: {{TASK}}``; that value is understood here.
  * The default templates' sentences change between releases (the title alone: "Create a
    concise, 3-5 word title with an emoji as a title for the chat history" in 0.4, "Generate a
    concise, 3-5 word title with an emoji summarizing the chat history." from 0.5, "Generate a
    concise title summarizing the chat history." in 0.12), so a task is recognised by its
    frame: a ``### Task:`` heading opening the message, a further ``###`` section, and a
    ``<chat_history>`` block of ``ROLE: content`` lines (utils/misc.py:221-222) after the
    instructions; or (0.4's title) plain instructions closed by that block. The first JSON key
    the instructions ask for (``title``, ``tags``, ``follow_ups``, ``queries``, ``text``,
    ``prompt``) names the task, else a word of the first sentence, else ``openwebui:task``.
    The emoji task is an instruction about an emoji then ``Message:`` and a fenced message
    (``` since 0.5, triple double quotes in 0.4); MoA keeps its 0.4 sentences.
    The RAG template is a ``### Task:`` frame too, put before the user's own message when
    files are attached (utils/middleware.py:669-680), but it has ``<context>`` and no history
    block: that stays a chat turn. Admin-customised templates without the frame are not
    recognised (use the header).

SillyTavern 1.12.6 (commit ba6f7b7a, Chat Completion source "Custom (OpenAI-compatible)"):
  * The generation ``type`` (``'quiet'``, ``'impersonate'``...) is never sent upstream: the server
    builds the upstream body from a fixed field list (src/endpoints/backends/chat-completions.js:
    952-968) and the browser does not even send ``type`` (public/scripts/openai.js:1849-1863).
  * A quiet prompt (``generateQuietPrompt``, public/script.js:2590) is the full chat prompt plus a
    final ``system`` message holding the instruction (public/scripts/openai.js:1002-1010, 1138,
    1110-1111). ``generateRaw`` sends ``[system: instruction, user: text]``
    (public/script.js:3236-3240). The built-in quiet instructions all begin with
    "Ignore previous instructions": Summarize (extensions/memory/index.js:105, 687),
    auto-background (backgrounds.js:316), image prompts (extensions/stable-diffusion/index.js:
    132-164), expression classifier (extensions/expressions/index.js:23, 1175). That prefix in a
    ``system`` message at either of those two positions is the marker. Ordinary ST turns end in a
    user message, an assistant prefill, or system nudges/post-history text that do not start
    with it. Custom quiet prompts (``/gen`` with free text) cannot be told apart (use the
    header on a dedicated connection profile: ``custom_include_headers``,
    chat-completions.js:887).

Any client: header ``X-Limbic-Stateless: true`` (also ``1``/``yes``/``on``) → ``'header'``;
``false``/``0``/``no``/``off`` forces "chat turn" and skips content sniffing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["STATELESS_HEADER", "UTILITY_KINDS", "utility_kind"]

STATELESS_HEADER = "x-limbic-stateless"

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})

# Open WebUI TASKS values (open_webui/constants.py:141-149) -> our label.
_OWUI_TASK_NAMES: dict[str, str] = {
    "title_generation": "openwebui:title",
    "tags_generation": "openwebui:tags",
    "follow_up_generation": "openwebui:follow_ups",
    "query_generation": "openwebui:queries",
    "autocomplete_generation": "openwebui:autocomplete",
    "image_prompt_generation": "openwebui:image_prompt",
    "emoji_generation": "openwebui:emoji",
    "moa_response_generation": "openwebui:moa",
    "function_calling": "openwebui:function_calling",
}

# Open WebUI's task prompts, recognised by their frame rather than by their sentences, which
# change from release to release (tests/web/clients/README.md lists the releases read).
_TASK_HEADING = "### Task:"
_HISTORY_OPEN = "<chat_history>"
_HISTORY_CLOSE = "</chat_history>"
# A section heading after "### Task:": "### Guidelines:", "### **Instructions**:", ...
_SECTION_HEADING = re.compile(r"^#{3,4} \S", re.MULTILINE)
# The history block holds "ROLE: content" lines (role.upper(), utils/misc.py).
_ROLE_LINE = re.compile(r"(?:SYSTEM|USER|ASSISTANT|TOOL|DEVELOPER): ")
# The first JSON key the instructions ask for names the task.
_OUTPUT_KEY = re.compile(r'\{\s*"(\w+)"\s*:')
_OUTPUT_KEYS: dict[str, str] = {
    "title": "openwebui:title",
    "tags": "openwebui:tags",
    "follow_ups": "openwebui:follow_ups",
    "queries": "openwebui:queries",
    "text": "openwebui:autocomplete",
    "prompt": "openwebui:image_prompt",
}
# Without an output key (0.4's title template asks for plain text), a word of the first
# sentence names it; a frame that names nothing known is still a task.
_TASK_WORDS: tuple[tuple[str, str], ...] = (
    ("title", "openwebui:title"),
    ("tags", "openwebui:tags"),
    ("follow-up", "openwebui:follow_ups"),
    ("search quer", "openwebui:queries"),
    ("autocomplet", "openwebui:autocomplete"),
    ("image", "openwebui:image_prompt"),
)
_GENERIC_TASK = "openwebui:task"
# The emoji task: a sentence about an emoji, then the message to read in a fence (``` since
# 0.5, \"\"\" in 0.4) that closes the prompt.
_EMOJI_MESSAGE = re.compile(r"^\s*Message: (```|\"\"\")(.*)\1\s*\Z", re.MULTILINE | re.DOTALL)
# Mixture of agents: unchanged since 0.4 (main.py:2195-2199 there, config.py:2532-2536 in 0.12.4).
_MOA_MARKERS = (
    "You have been provided with a set of responses from various models to the latest user query:",
    "Responses from models:",
)

# "### Task:" may sit at most this far into the message (leading whitespace, or text a pipeline
# filter put in front); further in, the frame is quoted in a user's message.
_OPENING_WINDOW = 200
# Instructions before a history block that closes the message, in the frame without a
# "### Task:" heading (0.4's title: about 500 characters). Much longer text is a user's
# message that quotes a template.
_PLAIN_INSTRUCTIONS_MAX = 2000

_ST_QUIET_PREFIX = "ignore previous instructions"
# Impersonate (public/scripts/openai.js:100, the default impersonation_prompt, sent last as
# a system message, 999-1000): the model drafts the USER's next message, which the user
# may then send as their own turn. A draft is not a reply: it is answered statelessly.
_ST_IMPERSONATE_PREFIX = "[write your next reply from the point of view of"

UTILITY_KINDS: frozenset[str] = frozenset(
    {"header", "sillytavern:quiet", "sillytavern:impersonate", *_OWUI_TASK_NAMES.values()}
    | {*_OUTPUT_KEYS.values(), _GENERIC_TASK, "openwebui:emoji", "openwebui:moa"}
)


def utility_kind(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """None for a chat turn; else a short label such as 'openwebui:title', 'openwebui:tags',
    'openwebui:follow_ups', 'openwebui:queries', 'openwebui:autocomplete', 'sillytavern:quiet',
    'header'.

    ``headers`` keys are lower-case. The full label set is :data:`UTILITY_KINDS`. Recognised
    shapes and their sources (Open WebUI 0.4.8 to 0.12.4, SillyTavern 1.12.6) are listed in
    the module docstring.
    """
    verdict = _header_kind(headers)
    if verdict is not None:
        return verdict or None
    messages = body.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes) or not messages:
        return None
    return _openwebui_task(messages) or _sillytavern_quiet(messages)


def _header_kind(headers: Mapping[str, str]) -> str | None:
    """'' for an explicit "not stateless", a label for "stateless", None when undecided."""
    raw = headers.get(STATELESS_HEADER)
    if not isinstance(raw, str):
        return None
    value = raw.strip().lower()
    if value in _TRUE:
        return "header"
    if value in _FALSE:
        return ""
    # Open WebUI connection header "X-Limbic-Stateless: {{TASK}}" (utils/headers.py:147).
    return _OWUI_TASK_NAMES.get(value)


def _text(message: Any) -> str | None:
    if not isinstance(message, Mapping):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        parts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts)
    return None


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, Mapping) else None


def _task_frame_kind(text: str) -> str | None:
    """The task a ``### Task:`` frame or an instructions-then-history prompt names, else None.

    Both hold a ``<chat_history>`` block of ``ROLE: content`` lines after the instructions. The
    ``### Task:`` frame opens the message and has a further section heading before the block;
    the older frame (0.4's title) has plain instructions and the block closes the message.
    Open WebUI's RAG template is also a ``### Task:`` frame, but its documents come in
    ``<context>`` with no history block: a chat turn with files attached stays a chat turn.
    """
    opening = text.find(_HISTORY_OPEN)
    if opening < 0:
        return None
    closing = text.find(_HISTORY_CLOSE, opening)
    if closing < 0:
        return None
    block = text[opening + len(_HISTORY_OPEN) : closing].strip()
    if block and not _ROLE_LINE.match(block):
        return None
    # Only the instructions, before the first block, name the task: a template quoted in the
    # history is a message of the chat.
    instructions = text[:opening]
    heading = instructions.find(_TASK_HEADING)
    if heading >= 0:
        body = instructions[heading + len(_TASK_HEADING) :]
        if heading > _OPENING_WINDOW or not _SECTION_HEADING.search(body):
            return None
    elif text[closing + len(_HISTORY_CLOSE) :].strip() or not (
        0 < len(instructions.strip()) <= _PLAIN_INSTRUCTIONS_MAX
    ):
        return None
    else:
        body = instructions
    for match in _OUTPUT_KEY.finditer(body):
        if match.group(1) in _OUTPUT_KEYS:
            return _OUTPUT_KEYS[match.group(1)]
    first_sentence = body.strip().split("\n", 1)[0].lower()
    for word, label in _TASK_WORDS:
        if word in first_sentence:
            return label
    return _GENERIC_TASK


def _emoji_kind(text: str) -> str | None:
    match = _EMOJI_MESSAGE.search(text)
    if match is None:
        return None
    instructions = text[: match.start()]
    if "emoji" in instructions.lower() and len(instructions) <= _OPENING_WINDOW * 3:
        return "openwebui:emoji"
    return None


def _moa_kind(text: str) -> str | None:
    start = text.find(_MOA_MARKERS[0])
    if 0 <= start <= _OPENING_WINDOW and text.find(_MOA_MARKERS[1], start) > start:
        return "openwebui:moa"
    return None


def _openwebui_task(messages: Sequence[Any]) -> str | None:
    last = messages[-1]
    if _role(last) != "user":
        return None
    text = _text(last)
    if not text:
        return None
    return _task_frame_kind(text) or _emoji_kind(text) or _moa_kind(text)


def _is_st_quiet_instruction(message: Any) -> bool:
    if _role(message) != "system":
        return False
    text = _text(message)
    return bool(text) and text.lstrip().lower().startswith(_ST_QUIET_PREFIX)


def _sillytavern_quiet(messages: Sequence[Any]) -> str | None:
    # generateQuietPrompt: the instruction is the final system message.
    if _is_st_quiet_instruction(messages[-1]):
        return "sillytavern:quiet"
    last = messages[-1]
    if _role(last) == "system" and (_text(last) or "").lstrip().lower().startswith(
        _ST_IMPERSONATE_PREFIX
    ):
        return "sillytavern:impersonate"
    # generateRaw: [system: instruction, user: text].
    if (
        len(messages) == 2
        and _is_st_quiet_instruction(messages[0])
        and _role(messages[1]) == "user"
    ):
        return "sillytavern:quiet"
    return None
