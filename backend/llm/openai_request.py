"""What a chat request carries besides the messages: sampling fields, a JSON schema's name
and, when a server takes no schema, the instruction that puts it in the system prompt.

Pure helpers of ``OpenAICompatChatModel`` (``backend.llm.openai_compat``). A call's
``Sampling`` is sent as it is, only the fields that are set (docs/api.md): ``stop``,
``seed``, ``top_p``, ``frequency_penalty``, ``presence_penalty`` and ``logit_bias`` as the
OpenAI parameters of those names, ``top_k`` and ``min_p`` (not OpenAI's) through the
SDK's ``extra_body``, top-level in the JSON body.
"""

from __future__ import annotations

from typing import Any

from backend.llm.port import JsonSchema, Sampling

# Sampling fields that are OpenAI parameters (sent as SDK arguments), and those that are
# not (sent in extra_body, so they land top-level in the JSON body).
_OPENAI_SAMPLING = ("seed", "top_p", "frequency_penalty", "presence_penalty")
_EXTRA_SAMPLING = ("top_k", "min_p")


def sampling_params(sampling: Sampling | None) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments for ``sampling``: the fields that are set
    only (nothing at all for ``None`` or an empty ``Sampling``)."""
    if sampling is None:
        return {}
    params: dict[str, Any] = {}
    if sampling.stop:
        params["stop"] = list(sampling.stop)
    for name in _OPENAI_SAMPLING:
        value = getattr(sampling, name)
        if value is not None:
            params[name] = value
    if sampling.logit_bias:
        params["logit_bias"] = dict(sampling.logit_bias)
    extra = {
        name: getattr(sampling, name)
        for name in _EXTRA_SAMPLING
        if getattr(sampling, name) is not None
    }
    if extra:
        params["extra_body"] = extra
    return params


def with_instruction(messages: list[dict[str, Any]], instruction: str) -> list[dict[str, Any]]:
    """Append ``instruction`` to the leading system message (or add one)."""
    if (
        messages
        and messages[0].get("role") == "system"
        and isinstance(messages[0].get("content"), str)
    ):
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def schema_name(json_schema: JsonSchema) -> str:
    """OpenAI wants ``[a-zA-Z0-9_-]{1,64}``: the schema's title made to fit, else "reply"."""
    title = str(json_schema.get("title") or "reply")
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in title if c.isascii())[:64]
    return name or "reply"


def sampling_fields(params: dict[str, Any]) -> frozenset[str]:
    """The names of the optional sampling fields in ``sampling_params``'s answer (``stop``
    is not optional: a client's stop strings end its replies)."""
    names = {name for name in params if name not in ("stop", "extra_body")}
    return frozenset(names | set(params.get("extra_body", {})))


def without_fields(params: dict[str, Any], names: frozenset[str] | set[str]) -> dict[str, Any]:
    """``sampling_params``'s answer without the fields ``names`` (top level or extra)."""
    kept = {name: value for name, value in params.items() if name not in names}
    extra = {k: v for k, v in params.get("extra_body", {}).items() if k not in names}
    if extra:
        kept["extra_body"] = extra
    else:
        kept.pop("extra_body", None)
    return kept


# JSON-schema keywords that only bound sizes. llama-cpp-python's server turns a schema
# into a grammar where each bound repeats a rule, and a schema with a few long strings
# makes a grammar it cannot parse ("exceeds sane defaults"; its process then dies on
# the request). The adapter's caller validates sizes on the answer anyway.
_SIZE_BOUNDS = frozenset(
    {"maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties"}
)


def without_size_bounds(schema: Any) -> Any:
    """``schema`` without its size bounds, at every depth (a copy)."""
    if isinstance(schema, dict):
        return {k: without_size_bounds(v) for k, v in schema.items() if k not in _SIZE_BOUNDS}
    if isinstance(schema, list):
        return [without_size_bounds(item) for item in schema]
    return schema
