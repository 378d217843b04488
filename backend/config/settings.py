"""``config.json`` + environment overrides → typed, validated ``Settings``.

Nothing is read at import time: ``load_settings()`` is called once at start and the result
is handed down. ``Settings`` is a pydantic-settings ``BaseSettings``; its sources
(``backend.config.sources``), highest priority first: the named environment variables,
``LM__SECTION__KEY`` variables, the JSON file, the defaults. A missing ``config.json``
means all defaults (embedded, offline models).

Environment (``docs/configuration.md`` has the full table):

- ``LM_CONFIG`` — the config file when ``load_settings`` is given no path;
- ``LM__SECTION__KEY=value`` — any key, e.g. ``LM__MEMORY__WEIGHTS__RECENCY=0.3``
  (a value starting with ``{`` or ``[`` is read as JSON, anything else as text);
- named overrides, which win over the generic ones: ``LM_HOST``, ``LM_PORT``,
  ``LM_DATA_DIR``, ``LM_CHROMA_URL``, ``LM_DATABASE_URL`` (a secret: it may hold a
  password), ``LM_API_KEYS="key1:alice,key2:bob"`` (merged into ``server.api_keys``),
  ``LM_CHAT_API_KEY`` / ``LM_HIPPOCAMPUS_API_KEY`` / ``LM_EMBEDDING_API_KEY`` (for
  ``openai`` roles; ignored for embedded ones);
- ``OPENAI_API_KEY`` — fallback key for an ``openai`` role that has none.

The sections live in ``backend.config.roles`` (``chat``, ``hippocampus``, ``embedding``)
and ``backend.config.memory`` (``memory``, validated into the engine's own types); this
module has ``storage``, ``server`` and the whole. ``backend.config`` is the public API.

Failure policy: bad configuration fails at start. Every problem raises ``ConfigError``,
whose message has one line per problem naming where it came from, the key path and
what is wrong (``backend.config.errors``). Secrets (``SecretStr``; ``server.api_keys``)
never appear in reprs or errors.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from backend.config.errors import ConfigError, problems
from backend.config.memory import MemorySettings
from backend.config.roles import (
    ChatRole,
    EmbeddingRole,
    HippocampusRole,
    Section,
    check_url,
    resolve_keys,
    resolve_path,
)
from backend.config.sources import ENV_PREFIX, ConfigLoad, active, sources

logger = logging.getLogger(__name__)

PERSONA_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"


# ---- storage and server -----------------------------------------------------------------


def redact_database_url(url: str) -> str:
    """The URL with its password (and any query, which may hold one) masked."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    if parts.username:
        netloc = f"{parts.username}{':***' if parts.password is not None else ''}@{netloc}"
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


class StorageSettings(Section):
    data_dir: Path = Field(Path("data"), validate_default=True)
    chroma_url: str | None = None  # http://127.0.0.1:8001 → a Chroma HttpClient; else local
    sessions_db: Path = Field(None, validate_default=True)  # type: ignore[assignment]

    # A PostgreSQL server shared by several app processes (docs/deployment.md), e.g.
    # postgresql://limbic:secret@db:5432/limbic; None: SQLite at sessions_db.
    database_url: SecretStr | None = None

    _url = field_validator("chroma_url")(check_url)
    _paths = field_validator("data_dir", "sessions_db")(resolve_path)

    @field_validator("database_url", mode="before")
    @classmethod
    def _check_database_url(cls, value: Any) -> Any:
        if value is None or value == "":
            return None
        raw = value.get_secret_value() if isinstance(value, SecretStr) else value
        if not isinstance(raw, str):
            raise ValueError("must be a URL string")
        parts = urlsplit(raw.strip())
        if parts.scheme.lower() not in ("postgresql", "postgres", "postgresql+psycopg"):
            raise ValueError(
                "must be a PostgreSQL URL such as postgresql://user:password@host:5432/limbic"
                " (leave it null for SQLite at sessions_db)"
            )
        try:
            parts.port  # noqa: B018 - raises for a port that is not a number
        except ValueError:
            raise ValueError("has an invalid port") from None
        if not parts.hostname or not parts.path.strip("/"):
            raise ValueError("needs a host and a database name, e.g. postgresql://host/limbic")
        return raw.strip()

    @field_validator("sessions_db", mode="before")
    @classmethod
    def _default_db(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and isinstance(info.data.get("data_dir"), Path):
            return info.data["data_dir"] / "sessions.sqlite3"
        return value


class ServerSettings(Section):
    host: str = Field("127.0.0.1", min_length=1)
    port: int = Field(8000, ge=0, le=65_535)  # 0: any free port (tests)
    # API key → user id. Empty: no key is required (keep the host on loopback then).
    api_keys: dict[str, str] = Field(default_factory=dict, repr=False)
    max_body_bytes: int = Field(1_048_576, ge=1024)
    max_message_chars: int = Field(32_000, ge=1)
    default_persona: str = Field("companion", pattern=PERSONA_ID_PATTERN)
    personas_dir: Path = Field(Path("personas"), validate_default=True)

    _paths = field_validator("personas_dir")(resolve_path)

    @field_validator("api_keys")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key, user in value.items():
            if not key or any(ch.isspace() or ch == "," for ch in key):
                raise ValueError("an API key must be non-empty, without spaces or commas")
            if not user or len(user) > 128 or any(ch.isspace() or ch in ":/\\" for ch in user):
                raise ValueError("a user id must be 1-128 characters without spaces, : / \\")
        return value


class Settings(BaseSettings):
    """Every section; a section left out of the input is validated from ``{}`` (defaults).

    The file and the environment are read by ``load_settings`` alone (it activates the
    sources, then adds readable errors and the roles' API keys): ``Settings(**data)`` and
    ``Settings.model_validate(data)`` validate ``data`` and nothing else.
    """

    model_config = SettingsConfigDict(
        extra="forbid",
        frozen=True,
        hide_input_in_errors=True,
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        case_sensitive=True,  # the names are lower-cased by the source (LM__ as written)
        env_ignore_empty=True,
    )

    chat: ChatRole
    hippocampus: HippocampusRole
    embedding: EmbeddingRole
    memory: MemorySettings
    storage: StorageSettings
    server: ServerSettings

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, *sources(settings_cls))

    @model_validator(mode="before")
    @classmethod
    def _all_sections(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {name: {} for name in cls.model_fields} | data
        return data

    def safe_dump(self) -> dict[str, Any]:
        """A JSON-able view for logs and health pages: secrets masked."""
        data = self.model_dump(mode="json", by_alias=True)
        url = self.storage.database_url
        data["storage"]["database_url"] = (
            None if url is None else redact_database_url(url.get_secret_value())
        )
        data["server"]["api_keys"] = {
            f"<key {i}>": user for i, user in enumerate(self.server.api_keys.values(), 1)
        }
        return data


def load_settings(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read ``path`` (default: ``$LM_CONFIG`` or ``./config.json``), apply ``env``, validate.

    ``env`` defaults to ``os.environ``. Relative paths in the file are resolved against
    the file's directory. Raises ``ConfigError`` on any problem (bad JSON, unknown key,
    bad value, a missing ``api_key_env`` variable).
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    load = ConfigLoad.open(path, environ)
    try:
        with active(load):
            settings = Settings()
    except ValidationError as exc:
        raise ConfigError(problems(exc, load.source, Settings)) from None
    except SettingsError as exc:  # a variable pydantic-settings could not read
        raise ConfigError([f"environment: {exc}"]) from None
    settings = resolve_keys(settings, environ, load.source)
    if settings.server.host not in ("127.0.0.1", "localhost", "::1") and not (
        settings.server.api_keys
    ):
        logger.warning("server.host is %s but no API keys are set", settings.server.host)
    return settings
