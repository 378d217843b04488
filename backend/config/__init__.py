"""The settings: ``config.json`` + environment overrides → typed, validated ``Settings``.

This package's API is what callers import from ``backend.config``; its modules:

- ``settings``: ``Settings`` (``storage``, ``server`` and the whole), ``load_settings``;
- ``roles``: the model roles ``chat``, ``hippocampus``, ``embedding``; the ``Section`` base;
- ``memory``: the ``memory`` section, validated into the engine's own types;
- ``sources``: where values come from (the file, ``LM__`` and named variables);
- ``errors``: ``ConfigError`` and its one line per problem.

Imports run one way, ``settings`` → ``memory`` → ``roles`` → ``sources`` → ``errors``; no
module imports this package's ``__init__`` (tests/test_layers.py checks for circles).
"""

from backend.config.errors import ConfigError
from backend.config.memory import MemorySettings, SalientSettings
from backend.config.roles import (
    ROLES,
    ChatRole,
    EmbeddedChat,
    EmbeddedEmbedding,
    EmbeddedHippocampus,
    EmbeddingRole,
    HippocampusMode,
    HippocampusRole,
    OpenAIChat,
    OpenAIEmbedding,
    OpenAIHippocampus,
)
from backend.config.settings import (
    PERSONA_ID_PATTERN,
    ServerSettings,
    Settings,
    StorageSettings,
    load_settings,
    redact_database_url,
)

__all__ = [
    "PERSONA_ID_PATTERN",
    "ROLES",
    "ChatRole",
    "ConfigError",
    "EmbeddedChat",
    "EmbeddedEmbedding",
    "EmbeddedHippocampus",
    "EmbeddingRole",
    "HippocampusMode",
    "HippocampusRole",
    "MemorySettings",
    "OpenAIChat",
    "OpenAIEmbedding",
    "OpenAIHippocampus",
    "SalientSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "load_settings",
    "redact_database_url",
]
