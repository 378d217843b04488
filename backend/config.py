"""``config.json`` + environment overrides → typed, validated ``Settings``.

Nothing is read at import time: ``load_settings()`` is called once at start and the result
is handed down. Precedence, highest first: environment > ``config.json`` > defaults.
A missing ``config.json`` means all defaults (embedded, offline models).

Environment (``docs/configuration.md`` has the full table):

- ``LM_CONFIG`` — the config file when ``load_settings`` is given no path;
- ``LM__SECTION__KEY=value`` — any key, e.g. ``LM__MEMORY__WEIGHTS__RECENCY=0.3``
  (a value starting with ``{`` or ``[`` is read as JSON, anything else as text);
- named overrides, applied after the generic ones: ``LM_HOST``, ``LM_PORT``,
  ``LM_DATA_DIR``, ``LM_CHROMA_URL``, ``LM_DATABASE_URL`` (a secret: it may hold a
  password), ``LM_API_KEYS="key1:alice,key2:bob"`` (merged into ``server.api_keys``),
  ``LM_CHAT_API_KEY`` / ``LM_HIPPOCAMPUS_API_KEY`` / ``LM_EMBEDDING_API_KEY`` (for
  ``openai`` roles; ignored for embedded ones);
- ``OPENAI_API_KEY`` — fallback key for an ``openai`` role that has none.

Failure policy: bad configuration fails at start. Every problem raises ``ConfigError``,
whose message has one line per problem naming where it came from, the key path and
what is wrong. Secrets (``SecretStr``; ``server.api_keys``) never appear in reprs or
errors.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    StrictBool,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from backend.config_errors import problems
from backend.memory.types import (
    ActivationPolicy,
    GatePolicy,
    HybridWeights,
    RetrievalPolicy,
    ScoreWeights,
)

logger = logging.getLogger(__name__)

ROLES = ("chat", "hippocampus", "embedding")
PERSONA_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
_DEFAULTS = ScoreWeights()
_HYBRID = HybridWeights()
_RETRIEVAL = RetrievalPolicy()
_GATE = GatePolicy()
_FLOAT32_EPS = 1.1920929e-07  # GIST's lower bound for eps (memory-model.md)


class ConfigError(ValueError):
    """Invalid configuration; ``problems`` holds one readable line per problem."""

    def __init__(self, problems: list[str] | tuple[str, ...]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


def _zero_is_unset(value: Any) -> Any:
    return None if value == 0 or value == "" else value


def _check_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL such as http://localhost:8000/v1")
    return value.strip().rstrip("/")


def _resolve_path(value: Path | None, info: ValidationInfo) -> Path | None:
    """Relative paths are relative to the config file's directory (``base_dir``)."""
    if value is None:
        return None
    return (Path((info.context or {}).get("base_dir", ".")) / value.expanduser()).resolve()


# ---- model roles ------------------------------------------------------------------------


class _Embedded(_Section):
    provider: Literal["embedded"] = "embedded"


class EmbeddedChat(_Embedded):
    """The offline llama.cpp model: a preset (``model``) or a GGUF file (``model_path``)."""

    model: str | None = None  # a preset (backend.llm.presets); None: the default preset
    model_path: Path | None = None  # a GGUF file of your own (not hash-checked)
    n_ctx: int = Field(4096, ge=256, le=1_048_576)
    n_threads: int | None = Field(None, ge=1, le=512)  # None: llama.cpp decides
    temperature: float = Field(0.7, ge=0, le=2)
    max_tokens: int | None = Field(512, ge=1)
    repeat_penalty: float = Field(1.1, ge=0.5, le=2)

    _path = field_validator("model_path")(_resolve_path)
    _unset = field_validator("max_tokens", "n_threads", mode="before")(_zero_is_unset)

    @field_validator("model")
    @classmethod
    def _installed_preset(cls, name: str | None) -> str | None:
        from backend.llm import presets  # standard library only, nothing read at import

        if name is None:
            return None
        if name not in presets.PRESETS:
            known = ", ".join(presets.PRESETS)
            raise ValueError(
                f"must be a local model preset: {known} "
                '(for a model on a server add "provider": "openai")'
            )
        if presets.preset_path(name) is None:
            raise ValueError(f"preset {name} is not installed: run ./install.sh --model {name}")
        return name

    @model_validator(mode="after")
    def _preset_or_file(self) -> EmbeddedChat:
        if self.model is not None and self.model_path is not None:
            raise ValueError("give model (a preset) or model_path (a GGUF file), not both")
        return self


# The hippocampus contract (backend.hippocampus): "full" is turn.md's (the model rewrites
# background, short-term and long-term), "compact" asks only for facts (small local
# models); "auto": compact for an embedded model, full for a remote one.
HippocampusMode = Literal["auto", "full", "compact"]


class EmbeddedHippocampus(EmbeddedChat):
    mode: HippocampusMode = "auto"
    # Pause while an embedded chat model generates, so a reply never shares the CPU
    # with a hippocampus run (backend.llm.reply_first); "auto": on a machine with fewer
    # than 8 cores, where the two cannot each have the 4 threads they use.
    yield_to_reply: Literal["auto"] | StrictBool = "auto"
    temperature: float = Field(0.2, ge=0, le=2)  # extraction, not prose
    max_tokens: int | None = Field(1024, ge=1)
    # 1.0: the compact contract copies the user's own words (a penalty pushed names and
    # numbers out), and its grammar bounds every list and string, so nothing can loop.
    repeat_penalty: float = Field(1.0, ge=0.5, le=2)


class EmbeddedEmbedding(_Embedded):
    threads: int | None = Field(None, ge=1, le=512)  # None: onnxruntime decides

    _unset = field_validator("threads", mode="before")(_zero_is_unset)


class _Remote(_Section):
    """Any OpenAI-compatible server: OpenAI, DashScope, Ollama, vLLM, LM Studio, llama.cpp."""

    provider: Literal["openai"] = "openai"
    base_url: str = "https://api.openai.com/v1"
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    model: str = Field(min_length=1)
    timeout: float = Field(60.0, gt=0, le=3600)  # seconds per request
    max_retries: int = Field(2, ge=0, le=10)

    _url = field_validator("base_url")(_check_url)

    @model_validator(mode="after")
    def _one_key_source(self) -> _Remote:
        if self.api_key is not None and self.api_key_env is not None:
            raise ValueError("give api_key or api_key_env, not both")
        return self

    def api_key_value(self) -> str | None:
        """The key to send, or None (a local server that needs none)."""
        return self.api_key.get_secret_value() if self.api_key is not None else None


class _RemoteText(_Remote):
    temperature: float | None = Field(0.7, ge=0, le=2)  # None: the server's default
    max_tokens: int | None = Field(None, ge=1)

    _unset = field_validator("max_tokens", mode="before")(_zero_is_unset)


class OpenAIChat(_RemoteText):
    tools: bool = False  # the server supports function calling (memory tools)
    vision: bool = False  # the model reads images (messages may carry image parts)


class OpenAIHippocampus(_RemoteText):
    mode: HippocampusMode = "auto"
    temperature: float | None = Field(0.2, ge=0, le=2)
    timeout: float = Field(120.0, gt=0, le=3600)
    # How the JSON output is requested: response_format json_schema, json_object, or not.
    json_mode: Literal["schema", "object", "none"] = "schema"


class OpenAIEmbedding(_Remote):
    timeout: float = Field(30.0, gt=0, le=3600)
    dimensions: int | None = Field(None, ge=1, le=65_536)
    batch_size: int = Field(64, ge=1, le=2048)

    _unset = field_validator("dimensions", mode="before")(_zero_is_unset)


def _provider_of(value: Any) -> str | None:
    tag = (
        value.get("provider", "embedded")
        if isinstance(value, dict)
        else getattr(value, "provider", None)
    )
    return tag if isinstance(tag, str) else None


_TAG = Discriminator(_provider_of)
ChatRole = Annotated[
    Annotated[EmbeddedChat, Tag("embedded")] | Annotated[OpenAIChat, Tag("openai")], _TAG
]
HippocampusRole = Annotated[
    Annotated[EmbeddedHippocampus, Tag("embedded")] | Annotated[OpenAIHippocampus, Tag("openai")],
    _TAG,
]
EmbeddingRole = Annotated[
    Annotated[EmbeddedEmbedding, Tag("embedded")] | Annotated[OpenAIEmbedding, Tag("openai")],
    _TAG,
]

# ---- memory -----------------------------------------------------------------------------

_Unit = Annotated[float, Field(ge=0, le=1)]


class WeightsSettings(_Section):
    """Score weights (memory-model.md, "Scoring"); defaults are ``ScoreWeights()``'s."""

    recency: _Unit = _DEFAULTS.recency
    importance: _Unit = _DEFAULTS.importance
    relevance: _Unit = _DEFAULTS.relevance
    emotion: _Unit = _DEFAULTS.emotion
    base: _Unit = _DEFAULTS.base
    cosine: _Unit = _DEFAULTS.cosine
    recency_half_life_days: float = Field(_DEFAULTS.recency_half_life_days, gt=0, le=3650)


class HybridSettings(_Section):
    """Channel weights of the ``hybrid`` mode; defaults are ``HybridWeights()``'s
    (docs/memory-model.md, "Hybrid mode")."""

    cosine: _Unit = _HYBRID.cosine
    relevance: _Unit = _HYBRID.relevance  # the BM25 lexical channel
    importance: _Unit = _HYBRID.importance
    recency: _Unit = _HYBRID.recency
    emotion: _Unit = _HYBRID.emotion
    recency_half_life_days: float = Field(_HYBRID.recency_half_life_days, gt=0, le=3650)
    # Trust in the cosine of CJK query text: 0 for the local MiniLM (English vocabulary),
    # 1 for a multilingual embedder.
    cjk_cosine: _Unit = _HYBRID.cjk_cosine
    bm25_k1: float = Field(_HYBRID.bm25_k1, ge=0, le=10)
    bm25_b: _Unit = _HYBRID.bm25_b
    relevance_scale: float = Field(_HYBRID.relevance_scale, gt=0, le=100)

    @model_validator(mode="after")
    def _some_weight(self) -> HybridSettings:
        if self.cosine + self.relevance + self.importance + self.recency + self.emotion <= 0:
            raise ValueError("at least one hybrid channel weight must be positive")
        return self


class SalientSettings(_Section):
    """Recent important memories added to the pool without a semantic match."""

    n: int = Field(5, ge=0, le=100)
    min_importance: _Unit = 0.7
    days: float = Field(30, gt=0, le=36_500)


class GateSettings(_Section):
    """Save-gate thresholds; defaults are ``GatePolicy()``'s (memory-model.md)."""

    min_importance: _Unit = _GATE.min_importance
    min_confidence: _Unit = _GATE.min_confidence
    echo_cosine: _Unit = _GATE.echo_cosine
    duplicate_cosine: _Unit = _GATE.duplicate_cosine
    # The "same fact" similarity for the echo guard and within-turn deduplication.
    same_fact: _Unit = _GATE.same_fact
    # Share of a candidate's content the user's words must hold (grounding).
    min_support: _Unit = _GATE.min_support


class MemorySettings(_Section):
    # hybrid: cosine + BM25 + importance, restatements collapsed, lexical candidates
    # (docs/memory-model.md); limbic: the spec's scoring (golden fixture) + GIST.
    mode: Literal["hybrid", "limbic"] = "hybrid"
    weights: WeightsSettings = WeightsSettings()  # limbic mode's channel weights
    hybrid: HybridSettings = HybridSettings()  # hybrid mode's channel weights
    lam: float = Field(0.5, alias="lambda", ge=0, le=100)
    eps: float = Field(0.1, ge=_FLOAT32_EPS, le=1)
    pool: int = Field(50, ge=1, le=1000)
    k: int = Field(8, ge=1, le=100)
    # hybrid only: candidates from the lexical index (0: none, no index kept) ...
    lexical_pool: int = Field(30, ge=0, le=1000)
    # ... the similarity at which two memories count as one fact (above 1: never) ...
    same_fact: float = Field(_RETRIEVAL.same_fact, ge=0, le=2)
    # ... counting the vector cosine only from this value (above 1: lexical channels only) ...
    same_fact_cosine: float = Field(_RETRIEVAL.same_fact_cosine, ge=0, le=2)
    # ... and the relevance evidence below which a memory is not recalled (0: off).
    min_relevance: _Unit = _RETRIEVAL.min_relevance
    salient: SalientSettings = SalientSettings()
    gate: GateSettings = GateSettings()
    short_term_token_budget: int = Field(1500, ge=100, le=200_000)
    decay_interval_hours: float = Field(24, ge=0, le=8760)  # 0: no scheduled decay

    @model_validator(mode="after")
    def _k_within_pool(self) -> MemorySettings:
        if self.k > self.pool:
            raise ValueError(f"k ({self.k}) must not exceed pool ({self.pool})")
        return self

    def score_weights(self) -> ScoreWeights:
        return ScoreWeights(**self.weights.model_dump())

    def hybrid_weights(self) -> HybridWeights:
        return HybridWeights(**self.hybrid.model_dump())

    def retrieval_policy(self) -> RetrievalPolicy:
        """The ranking of either mode; both diversify with GIST at ``lambda``."""
        return RetrievalPolicy(
            k=self.k,
            lam=self.lam,
            eps=self.eps,
            weights=self.score_weights(),
            mode=self.mode,
            hybrid=self.hybrid_weights(),
            same_fact=self.same_fact,
            same_fact_cosine=self.same_fact_cosine,
            min_relevance=self.min_relevance,
        )

    def gate_policy(self) -> GatePolicy:
        return GatePolicy(**self.gate.model_dump())

    def activation_policy(self) -> ActivationPolicy:
        """How activation gathers and ranks candidates (``backend.longterm.memory``)."""
        return ActivationPolicy(
            retrieval=self.retrieval_policy(),
            pool=self.pool,
            salient_n=self.salient.n,
            salient_min_importance=self.salient.min_importance,
            salient_days=self.salient.days,
            min_importance=self.gate.min_importance,
            lexical_pool=self.lexical_pool if self.mode == "hybrid" else 0,
        )

    def with_overrides(self, overrides: Mapping[str, Any], *, source: str) -> MemorySettings:
        """These settings with ``overrides`` (e.g. a persona's) merged in, validated again.

        Raises ``ConfigError`` naming ``source`` and the key path.
        """
        data = _deep_merge(self.model_dump(by_alias=True), dict(overrides))
        try:
            return MemorySettings.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(
                problems(exc, lambda _loc: source, MemorySettings, ("memory",))
            ) from None


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


class StorageSettings(_Section):
    data_dir: Path = Field(Path("data"), validate_default=True)
    chroma_url: str | None = None  # http://127.0.0.1:8001 → a Chroma HttpClient; else local
    sessions_db: Path = Field(None, validate_default=True)  # type: ignore[assignment]

    # A PostgreSQL server shared by several app processes (docs/deployment.md), e.g.
    # postgresql://limbic:secret@db:5432/limbic; None: SQLite at sessions_db.
    database_url: SecretStr | None = None

    _url = field_validator("chroma_url")(_check_url)
    _paths = field_validator("data_dir", "sessions_db")(_resolve_path)

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


class ServerSettings(_Section):
    host: str = Field("127.0.0.1", min_length=1)
    port: int = Field(8000, ge=0, le=65_535)  # 0: any free port (tests)
    # API key → user id. Empty: no key is required (keep the host on loopback then).
    api_keys: dict[str, str] = Field(default_factory=dict, repr=False)
    max_body_bytes: int = Field(1_048_576, ge=1024)
    max_message_chars: int = Field(32_000, ge=1)
    default_persona: str = Field("companion", pattern=PERSONA_ID_PATTERN)
    personas_dir: Path = Field(Path("personas"), validate_default=True)

    _paths = field_validator("personas_dir")(_resolve_path)

    @field_validator("api_keys")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key, user in value.items():
            if not key or any(ch.isspace() or ch == "," for ch in key):
                raise ValueError("an API key must be non-empty, without spaces or commas")
            if not user or len(user) > 128 or any(ch.isspace() or ch in ":/\\" for ch in user):
                raise ValueError("a user id must be 1-128 characters without spaces, : / \\")
        return value

    def user_for_key(self, key: str) -> str | None:
        """The user id of an API key, compared in constant time; None when unknown."""
        found = None
        for known, user in self.api_keys.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                found = user
        return found


class Settings(_Section):
    """Every section; a section left out of the input is validated from ``{}`` (defaults)."""

    chat: ChatRole
    hippocampus: HippocampusRole
    embedding: EmbeddingRole
    memory: MemorySettings
    storage: StorageSettings
    server: ServerSettings

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


# ---- loading ----------------------------------------------------------------------------


def load_settings(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read ``path`` (default: ``$LM_CONFIG`` or ``./config.json``), apply ``env``, validate.

    ``env`` defaults to ``os.environ``. Relative paths in the file are resolved against
    the file's directory. Raises ``ConfigError`` on any problem (bad JSON, unknown key,
    bad value, a missing ``api_key_env`` variable).
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    path = Path(path or environ.get("LM_CONFIG") or "config.json")
    data: dict[str, Any] = {}
    if path.is_file():
        data = _read_json(path)
        where = path.name
    else:
        if path.exists():
            raise ConfigError([f"{path}: not a file"])
        logger.info("no config file at %s: using defaults", path)
        where = "defaults"
    origins = _apply_env(data, environ)

    def source(loc: tuple[Any, ...]) -> str:
        for end in range(len(loc), 0, -1):
            if loc[:end] in origins:
                return f"environment {origins[loc[:end]]}"
        return where

    context = {"base_dir": path.resolve().parent}
    try:
        settings = Settings.model_validate(data, context=context)
    except ValidationError as exc:
        raise ConfigError(problems(exc, source, Settings)) from None
    settings = _resolve_keys(settings, environ, source)
    if settings.server.host not in ("127.0.0.1", "localhost", "::1") and not (
        settings.server.api_keys
    ):
        logger.warning("server.host is %s but no API keys are set", settings.server.host)
    return settings


def _read_json(path: Path) -> dict[str, Any]:
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


_NAMED_ENV: dict[str, tuple[str, ...]] = {
    "LM_HOST": ("server", "host"),
    "LM_PORT": ("server", "port"),
    "LM_DATA_DIR": ("storage", "data_dir"),
    "LM_CHROMA_URL": ("storage", "chroma_url"),
    "LM_DATABASE_URL": ("storage", "database_url"),
}


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[tuple[Any, ...], str]:
    """Write environment overrides into ``data``; returns key path → variable name."""
    origins: dict[tuple[Any, ...], str] = {}
    for name in sorted(env):
        if name.startswith("LM__") and env[name] != "":
            loc = tuple(part.lower() for part in name[4:].split("__"))
            if all(loc):
                value = env[name]
                if value.lstrip()[:1] in ("{", "["):
                    try:
                        value = json.loads(value)
                    except json.JSONDecodeError:
                        raise ConfigError([f"environment {name}: invalid JSON"]) from None
                _set_path(data, loc, value)
                origins[loc] = name
    for name, loc in _NAMED_ENV.items():
        if env.get(name):
            _set_path(data, loc, env[name])
            origins[loc] = name
    if env.get("LM_API_KEYS"):
        keys: dict[str, str] = {}
        for item in env["LM_API_KEYS"].split(","):
            key, sep, user = item.strip().rpartition(":")
            if not sep or not key or not user:
                raise ConfigError(["environment LM_API_KEYS: expected 'key1:alice,key2:bob'"])
            keys[key] = user
        server = data.get("server")
        existing = server.get("api_keys") if isinstance(server, dict) else None
        _set_path(data, ("server", "api_keys"), {**(existing or {}), **keys})
        origins[("server", "api_keys")] = "LM_API_KEYS"
    return origins


def _resolve_keys(settings: Settings, env: Mapping[str, str], source: Any) -> Settings:
    """Fill each ``openai`` role's key.

    Order: LM_<ROLE>_API_KEY > api_key > api_key_env's variable > OPENAI_API_KEY > none.
    """
    problems: list[str] = []
    updates: dict[str, Any] = {}
    for role in ROLES:
        section = getattr(settings, role)
        named = env.get(f"LM_{role.upper()}_API_KEY")
        if not isinstance(section, _Remote):
            if named:
                logger.info("LM_%s_API_KEY ignored: the %s role is embedded", role.upper(), role)
            continue
        key = named or section.api_key_value()
        if key is None and section.api_key_env is not None:
            key = env.get(section.api_key_env)
            if not key:
                problems.append(
                    f"{source((role, 'api_key_env'))}: {role}.api_key_env: "
                    f"the environment variable {section.api_key_env} is not set"
                )
                continue
        key = key or env.get("OPENAI_API_KEY") or None
        if key != section.api_key_value():
            updates[role] = section.model_copy(update={"api_key": SecretStr(key or "")})
    if problems:
        raise ConfigError(problems)
    return settings.model_copy(update=updates) if updates else settings


def _set_path(data: dict[str, Any], loc: tuple[str, ...], value: Any) -> None:
    node = data
    for part in loc[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[loc[-1]] = value


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
