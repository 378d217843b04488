"""Recognise *utility* chat-completion requests that must get a plain, stateless completion.

Front-ends such as Open WebUI and SillyTavern send, besides the user's chat turns, background
requests over the same ``/v1/chat/completions`` endpoint: "generate a title", "suggest follow-ups",
"summarise the story so far"... Those must not be answered in the persona's voice, must not open
or touch a session, and must neither read nor write memory. Nothing in the OpenAI wire format marks
them, so this module recognises them from the shapes the clients are known to send. Pure functions:
no I/O, no web framework.

Known shapes (request shapes only; see tests/web/clients/README.md for the fixtures):

Open WebUI 0.12.4 (wheel ``open_webui-0.12.4``):
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
  * Default templates (config.py): title 2279, tags 2304, image prompt 2324, follow-ups 2347,
    queries (web search and RAG retrieval both) 2380, autocomplete 2411, emoji 2528, MoA 2532.
    Chat history is embedded as ``ROLE: content`` lines (utils/misc.py:221-222) inside
    ``<chat_history>``; a template is recognised only when its opening ``### Task:`` line, its
    task sentence, its JSON output key and its history block are all present, in template order.
    Admin-customised templates are not recognised (use the header).

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

# Markers of each DEFAULT_*_PROMPT_TEMPLATE (open_webui/config.py), in the order they appear in
# the template. The first marker is the template's opening; all must be present, in order.
_HISTORY = ("<chat_history>", "</chat_history>")
_OWUI_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "openwebui:title",  # config.py:2279-2300
        (
            "### Task:",
            "Generate a concise title summarizing the chat history.",
            '{ "title":',
            "### Chat History:",
            *_HISTORY,
        ),
    ),
    (
        "openwebui:tags",  # config.py:2304-2320
        (
            "### Task:",
            "Generate 1-3 broad tags categorizing the main themes of the chat history",
            '{ "tags":',
            "### Chat History:",
            *_HISTORY,
        ),
    ),
    (
        "openwebui:image_prompt",  # config.py:2324-2342
        (
            "### Task:",
            "Generate a detailed prompt for am image generation task",
            '"prompt":',
            "### Chat History:",
            *_HISTORY,
        ),
    ),
    (
        "openwebui:follow_ups",  # config.py:2347-2365
        (
            "### Task:",
            "Predict 3-5 useful messages this user might naturally send next",
            '{ "follow_ups":',
            "### Chat History:",
            *_HISTORY,
        ),
    ),
    (
        "openwebui:queries",  # config.py:2380-2402
        (
            "### Task:",
            "Analyze the chat history to determine the necessity of generating search queries",
            '{ "queries":',
            "### Chat History:",
            *_HISTORY,
        ),
    ),
    (
        "openwebui:autocomplete",  # config.py:2411-2451
        (
            "### Task:",
            "You are an autocompletion system. Continue the text in `<text>`",
            '`{ "text": "<your_completion>" }`',
            "### Context:",
            *_HISTORY,
            "<type>",
            "<text>",
        ),
    ),
    (
        "openwebui:emoji",  # config.py:2528-2530
        (
            "Your task is to reflect the speaker's likely facial expression through a "
            "fitting emoji.",
            "Message: ```",
        ),
    ),
    (
        "openwebui:moa",  # config.py:2532-2536
        (
            "You have been provided with a set of responses from various models to the latest "
            "user query:",
            "Your task is to synthesize these responses into a single, high-quality response.",
            "Responses from models:",
        ),
    ),
)

# The opening marker may sit at most this far into the message (leading whitespace, or text a
# pipeline filter put in front). The rest of the message is embedded chat history.
_OPENING_WINDOW = 200

_ST_QUIET_PREFIX = "ignore previous instructions"
# Impersonate (public/scripts/openai.js:100, the default impersonation_prompt, sent last as
# a system message, 999-1000): the model drafts the USER's next message, which the user
# may then send as their own turn. A draft is not a reply: it is answered statelessly.
_ST_IMPERSONATE_PREFIX = "[write your next reply from the point of view of"

UTILITY_KINDS: frozenset[str] = frozenset(
    {"header", "sillytavern:quiet", "sillytavern:impersonate", *_OWUI_TASK_NAMES.values()}
    | {label for label, _ in _OWUI_TEMPLATES}
)


def utility_kind(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """None for a chat turn; else a short label such as 'openwebui:title', 'openwebui:tags',
    'openwebui:follow_ups', 'openwebui:queries', 'openwebui:autocomplete', 'sillytavern:quiet',
    'header'.

    ``headers`` keys are lower-case. The full label set is :data:`UTILITY_KINDS`. Recognised
    shapes and their sources (Open WebUI 0.12.4, SillyTavern 1.12.6) are listed in the module
    docstring.
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


def _markers_in_order(text: str, markers: Sequence[str]) -> int | None:
    """Position of the first marker if every marker occurs in order, else None."""
    start = text.find(markers[0])
    if start < 0 or start > _OPENING_WINDOW:
        return None
    pos = start + len(markers[0])
    for marker in markers[1:]:
        found = text.find(marker, pos)
        if found < 0:
            return None
        pos = found + len(marker)
    return start


def _openwebui_task(messages: Sequence[Any]) -> str | None:
    last = messages[-1]
    if _role(last) != "user":
        return None
    text = _text(last)
    if not text:
        return None
    best: tuple[int, str] | None = None
    for label, markers in _OWUI_TEMPLATES:
        start = _markers_in_order(text, markers)
        if start is None:
            continue
        # The task sentence that comes first is the outer template; a later one is quoted history.
        anchor = text.find(markers[1], start) if len(markers) > 1 else start
        if best is None or anchor < best[0]:
            best = (anchor, label)
    return best[1] if best else None


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
