"""Readable configuration errors: pydantic's ``ValidationError`` → one line per problem.

"config.json: chat.temperature: must be between 0 and 2 (got 5)". Secrets are never
echoed; unknown keys get a "did you mean" hint.
"""

from __future__ import annotations

import difflib
import json
from typing import Annotated, Any, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

PROVIDERS = ("embedded", "openai")


class ConfigError(ValueError):
    """Invalid configuration; ``problems`` holds one readable line per problem."""

    def __init__(self, problems: list[str] | tuple[str, ...]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) is Annotated:
        return _models_in(get_args(annotation)[0])
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def _walk(loc: tuple[Any, ...], root: type[BaseModel]) -> tuple[Any, FieldInfo | None]:
    """The model at ``loc`` (or None) and the field ``loc`` names (or None)."""
    model: type[BaseModel] | None = root
    field: FieldInfo | None = None
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        if model is None:
            return None, None
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return None, None
        # An engine section (``backend.config.memory``) names the model it validates with.
        models = _models_in(field.annotation) + [
            item.settings_model for item in field.metadata if hasattr(item, "settings_model")
        ]
        if len(models) > 1 and parts and parts[0] in PROVIDERS:
            tag = parts.pop(0)
            model = next(m for m in models if m.model_fields["provider"].default == tag)
        else:
            model = models[0] if len(models) == 1 else None
    return model, field


def _number(x: Any) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


_BOUNDS = (
    (annotated_types.Ge, "ge", "at least"),
    (annotated_types.Gt, "gt", "greater than"),
    (annotated_types.Le, "le", "at most"),
    (annotated_types.Lt, "lt", "less than"),
)


def _range(field: FieldInfo | None) -> str | None:
    """ "must be between 0 and 2" from the field's bounds, or None when it has none."""
    words: list[str] = []
    for item in field.metadata if field else ():
        for kind, attr, word in _BOUNDS:
            if isinstance(item, kind):
                words.append(f"{word} {_number(getattr(item, attr))}")
    if len(words) == 2 and words[0].startswith("at least") and words[1].startswith("at most"):
        return f"must be between {words[0][9:]} and {words[1][8:]}"
    return "must be " + " and ".join(words) if words else None


def _got(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problems(
    exc: ValidationError, source: Any, root: type[BaseModel], prefix: tuple[str, ...] = ()
) -> list[str]:
    """One readable line per validation error: where it came from, the key path, what is
    wrong. ``source(loc)`` names the origin of a value (the file or an environment variable);
    ``root`` is the model validated, ``prefix`` its path in the whole config."""
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        kind, value = error["type"], error.get("input")
        shown = [p for i, p in enumerate(prefix + loc) if not (i == 1 and p in PROVIDERS)]
        where = source(tuple(shown))
        secret = any(name in shown for name in ("api_keys", "api_key", "database_url"))
        if shown[:2] == ["server", "api_keys"] and len(shown) > 2:
            shown[2] = "<key>"
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            shown.append("provider")
            got = value.get("provider") if isinstance(value, dict) else value
            message = f"must be one of {', '.join(map(repr, PROVIDERS))} (got {_got(got)})"
        elif kind == "extra_forbidden":
            model, _ = _walk(loc[:-1], root)
            allowed = [f.alias or n for n, f in model.model_fields.items()] if model else []
            message = f"unknown key {loc[-1]!r}" + _hint(str(loc[-1]), allowed, loc)
        elif kind == "missing":
            message = "is required"
        else:
            ranged = _range(_walk(loc, root)[1]) if kind in _RANGE_ERRORS else None
            text = ranged or error["msg"].removeprefix("Value error, ")
            message = text.replace("Input should be", "must be")
            if not secret and not isinstance(value, dict | list):
                message += f" (got {_got(value)})"
            if kind == "literal_error" and len(loc) == 3 and loc[1] == "embedded":
                # A local model's name list: the name given may be a server's model.
                message += '; for a model on a server add "provider": "openai"'
        lines.append(f"{where}: {'.'.join(map(str, shown)) or '(top level)'}: {message}")
    return lines


_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}
_REMOTE_ONLY = {"base_url", "api_key", "api_key_env", "model", "timeout", "max_retries", "tools"}


def _hint(key: str, allowed: list[str], loc: tuple[Any, ...]) -> str:
    if len(loc) == 3 and loc[1] == "embedded" and key in _REMOTE_ONLY:
        return ' for provider "embedded" (add "provider": "openai" to use a server)'
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (allowed: {', '.join(sorted(allowed))})" if allowed else ""
