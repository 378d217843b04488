"""Where the configuration comes from: pydantic-settings sources, highest priority first.

1. ``NamedEnvSource``: ``LM_HOST``, ``LM_PORT``, ``LM_DATA_DIR``, ``LM_CHROMA_URL``,
   ``LM_DATABASE_URL`` and ``LM_API_KEYS="key1:alice,key2:bob"`` (merged into
   ``server.api_keys``);
2. ``GenericEnvSource``: ``LM__SECTION__KEY=value`` for any key (pydantic-settings'
   nested environment variables, delimiter ``__``); a value starting with ``{`` or ``[``
   is read as JSON, anything else as text;
3. ``ConfigFileSource``: the JSON file (``config.json``, ``$LM_CONFIG`` or ``--config``);
4. the defaults of the models.

pydantic-settings merges them, objects key by key. One load (``ConfigLoad``) is active at a
time per context: it holds the file, the environment (``os.environ`` or a test's mapping)
and, as the sources read it, the variable each key path came from, for error messages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
)

from backend.config.errors import ConfigError

logger = logging.getLogger(__name__)

ENV_PREFIX = "LM__"
NAMED_ENV: dict[str, tuple[str, str]] = {
    "LM_HOST": ("server", "host"),
    "LM_PORT": ("server", "port"),
    "LM_DATA_DIR": ("storage", "data_dir"),
    "LM_CHROMA_URL": ("storage", "chroma_url"),
    "LM_DATABASE_URL": ("storage", "database_url"),
}


@dataclass
class ConfigLoad:
    """One reading of the configuration: the file, the environment, where values came from."""

    path: Path
    env: Mapping[str, str]
    origins: dict[tuple[str, ...], str] = field(default_factory=dict)  # key path → variable
    # Key paths a variable gives a JSON value for: it replaces the file's value there
    # (the rest of the sources merge, object by object).
    replaced: set[tuple[str, ...]] = field(default_factory=set)
    where: str = "defaults"  # the file's name once it is found

    @classmethod
    def open(cls, path: Path | None, env: Mapping[str, str]) -> ConfigLoad:
        """``path``, else ``$LM_CONFIG``, else ``./config.json``; absent: the defaults."""
        load = cls(Path(path or env.get("LM_CONFIG") or "config.json").expanduser(), env)
        if load.path.is_file():
            load.where = load.path.name
        elif load.path.exists():
            raise ConfigError([f"{load.path}: not a file"])
        else:
            logger.info("no config file at %s: using defaults", load.path)
        return load

    def source(self, loc: tuple[Any, ...]) -> str:
        """Where the value at ``loc`` came from: ``environment LM_PORT``, the file's name, or
        ``defaults``."""
        for end in range(len(loc), 0, -1):
            if loc[:end] in self.origins:
                return f"environment {self.origins[loc[:end]]}"
        return self.where


_ACTIVE: ContextVar[ConfigLoad | None] = ContextVar("config_load", default=None)


@contextmanager
def active(load: ConfigLoad) -> Iterator[ConfigLoad]:
    token = _ACTIVE.set(load)
    try:
        yield load
    finally:
        _ACTIVE.reset(token)


def base_dir() -> Path | None:
    """The directory relative paths are resolved against while a file is loaded."""
    load = _ACTIVE.get()
    return None if load is None else load.path.resolve().parent


def sources(settings_cls: type[BaseSettings]) -> tuple[PydanticBaseSettingsSource, ...]:
    """The sources of the active load; none outside one, so that ``Settings(...)`` and
    ``Settings.model_validate(data)`` validate what they are given and nothing else."""
    load = _ACTIVE.get()
    if load is None:
        return ()
    return (
        NamedEnvSource(settings_cls, load),
        GenericEnvSource(settings_cls, load),
        ConfigFileSource(settings_cls, load),
    )


class ConfigFileSource(JsonConfigSettingsSource):
    """The JSON file, with readable errors (a bad file stops the start), less the values
    an environment variable replaces with JSON of its own (``ConfigLoad.replaced``)."""

    def __init__(self, settings_cls: type[BaseSettings], load: ConfigLoad) -> None:
        self._load = load
        super().__init__(settings_cls, load.path)

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        for loc in self._load.replaced:
            node = data
            for part in loc[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(loc[-1], None)
        return data

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        path = Path(file_path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
        except UnicodeDecodeError:
            raise ConfigError([f"{path}: not UTF-8 text"]) from None
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno} column {exc.colno}"
            raise ConfigError([f"{path.name}: invalid JSON at {where}: {exc.msg}"]) from None
        if not isinstance(data, dict):
            raise ConfigError([f"{path.name}: the top level must be a JSON object"])
        return data


class GenericEnvSource(EnvSettingsSource):
    """``LM__SECTION__KEY`` variables of the load's environment.

    The prefix is matched as written, the rest in any case; empty variables are ignored.
    A variable naming no section is kept, so that validation reports it as an unknown key.
    """

    def __init__(self, settings_cls: type[BaseSettings], load: ConfigLoad) -> None:
        self._load = load
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        found: dict[str, str | None] = {}
        for name, value in sorted(self._load.env.items()):
            loc = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
            if not name.startswith(ENV_PREFIX) or value == "" or not all(loc):
                continue
            if value.lstrip()[:1] in ("{", "["):
                try:
                    json.loads(value)
                except json.JSONDecodeError:
                    raise ConfigError([f"environment {name}: invalid JSON"]) from None
                self._load.replaced.add(loc)
            found[ENV_PREFIX + "__".join(loc)] = value
            self._load.origins[loc] = name
        return found

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        """JSON only for a value that looks like it; other text is left to validation."""
        if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
            return super().decode_complex_value(field_name, field, value)
        return value

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        known = set(self.settings_cls.model_fields)
        for loc, name in list(self._load.origins.items()):
            if loc[0] not in known:
                data.setdefault(loc[0], {})  # reported as an unknown key
                self._load.origins.setdefault(loc[:1], name)
        return data


class NamedEnvSource(PydanticBaseSettingsSource):
    """The named variables (``NAMED_ENV``, ``LM_API_KEYS``); they win over ``LM__...``."""

    def __init__(self, settings_cls: type[BaseSettings], load: ConfigLoad) -> None:
        self._load = load
        super().__init__(settings_cls)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the variables itself

    def __call__(self) -> dict[str, Any]:
        env, data = self._load.env, {}
        for name, (section, key) in NAMED_ENV.items():
            if env.get(name):
                data.setdefault(section, {})[key] = env[name]
                self._load.origins[(section, key)] = name
        if env.get("LM_API_KEYS"):
            keys: dict[str, str] = {}
            for item in env["LM_API_KEYS"].split(","):
                key, sep, user = item.strip().rpartition(":")
                if not sep or not key or not user:
                    raise ConfigError(["environment LM_API_KEYS: expected 'key1:alice,key2:bob'"])
                keys[key] = user
            data.setdefault("server", {})["api_keys"] = keys  # merged into the file's
            self._load.origins[("server", "api_keys")] = "LM_API_KEYS"
        return data
