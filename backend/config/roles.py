"""The model-role sections of the configuration: ``chat``, ``hippocampus``, ``embedding``.

Each role is a union tagged by ``provider``: ``"embedded"`` (in-process, offline) or
``"openai"`` (any OpenAI-compatible server). ``resolve_keys`` fills an ``openai`` role's
key from the environment after validation (docs/configuration.md, "provider": "openai").
Also the small pieces every section shares: the ``Section`` base, URL and path checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    StrictBool,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from backend.config.errors import ConfigError
from backend.config.sources import base_dir
from backend.embeddings.factory import LocalModel

logger = logging.getLogger(__name__)

ROLES = ("chat", "hippocampus", "embedding")
# A guard retry started before this many seconds after the message that has shown
# nothing by then gives way to the stand-in: two rejected attempts of the 1.5B on two
# cores take about 2 s, and a third then pushed the first words past 3 s
# (docs/benchmarks.md, "A deadline for retries").
RETRY_DEADLINE_S = 2.5


class Section(BaseModel):
    """A configuration section: unknown keys are errors, values are never echoed."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


def zero_is_unset(value: Any) -> Any:
    return None if value == 0 or value == "" else value


def check_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL such as http://localhost:8000/v1")
    return value.strip().rstrip("/")


def resolve_path(value: Path | None, info: ValidationInfo) -> Path | None:
    """Relative paths are relative to the config file's directory: the validation context's
    ``base_dir``, else the file being loaded (``backend.config.sources``), else ``.``."""
    if value is None:
        return None
    base = (info.context or {}).get("base_dir") or base_dir() or "."
    return (Path(base) / value.expanduser()).resolve()


# ---- embedded ---------------------------------------------------------------------------


class _Embedded(Section):
    provider: Literal["embedded"] = "embedded"


class EmbeddedChat(_Embedded):
    """The offline llama.cpp model: a preset (``model``) or a GGUF file (``model_path``)."""

    model: str | None = None  # a preset (backend.llm.presets); None: the default preset
    model_path: Path | None = None  # a GGUF file of your own (not hash-checked)
    n_ctx: int = Field(4096, ge=256, le=1_048_576)
    n_threads: int | None = Field(None, ge=1, le=512)  # None: llama.cpp decides
    temperature: float = Field(0.7, ge=0, le=2)
    # A companion's reply is a few sentences; a story or a poem fits in 320 tokens, and
    # the cap bounds a rambling reply (docs/benchmarks.md, "Reply quality").
    max_tokens: int | None = Field(320, ge=1)
    repeat_penalty: float = Field(1.1, ge=0.5, le=2)
    # Hold back and resample a reply that opens as a refusal, an echo, a repeat or a
    # help-desk line (backend.engine.reply_guard).
    reply_guard: bool = True
    # Seconds after the message by which a guard retry must have shown something; past
    # it, the app's stand-in is shown instead (docs/configuration.md). None: no deadline.
    retry_deadline: float | None = Field(RETRY_DEADLINE_S, gt=0, le=600)

    _path = field_validator("model_path")(resolve_path)
    _unset = field_validator("max_tokens", "n_threads", mode="before")(zero_is_unset)

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


# The hippocampus contract (backend.hippocampus, docs/memory-formation.md): "full" (the
# model rewrites background, short-term and long-term), "compact" asks only for facts
# (small local models); "auto": compact for an embedded model or a server on a loopback
# or private address, full for a hosted one (backend.engine.services.hippocampus_mode).
HippocampusMode = Literal["auto", "full", "compact"]


# The compact contract's grammar lets a fact open only with "The user" or a name of the
# user's words (backend.hippocampus.compact.fact_openers). Off by default: measured on
# the 0.5B, it cost probe recall (docs/benchmarks.md, "Subjects in the grammar").
CompactSubjects = StrictBool


class EmbeddedHippocampus(EmbeddedChat):
    mode: HippocampusMode = "auto"
    compact_subjects: CompactSubjects = False
    # Pause while an embedded chat model generates, so a reply never shares the CPU
    # with a hippocampus run (backend.llm.reply_first); "auto": on a machine with fewer
    # than 8 cores, where the two cannot each have the 4 threads they use.
    yield_to_reply: Literal["auto"] | StrictBool = "auto"
    temperature: float = Field(0.2, ge=0, le=2)  # extraction, not prose
    max_tokens: int | None = Field(1024, ge=1)
    # 1.0: the compact contract copies the user's own words (a penalty pushed names and
    # numbers out), and its grammar bounds every list and string, so nothing can loop.
    repeat_penalty: float = Field(1.0, ge=0.5, le=2)
    # Seconds a turn's hippocampus run may take before the turn falls back (its memory
    # kept by rule, docs/reliability.md): a local run on a small CPU is slow.
    timeout: float = Field(300.0, gt=0, le=3600)


class EmbeddedEmbedding(_Embedded):
    # The offline model (docs/configuration.md, "embedding"); None: the default one
    # (backend.embeddings.factory.DEFAULT_LOCAL_MODEL). A change re-embeds the store.
    model: LocalModel | None = None
    threads: int | None = Field(None, ge=1, le=512)  # None: onnxruntime decides

    _unset = field_validator("threads", mode="before")(zero_is_unset)


# ---- OpenAI-compatible servers ----------------------------------------------------------


class _Remote(Section):
    """Any OpenAI-compatible server: OpenAI, DashScope, Ollama, vLLM, LM Studio, llama.cpp."""

    provider: Literal["openai"] = "openai"
    base_url: str = "https://api.openai.com/v1"
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    model: str = Field(min_length=1)
    timeout: float = Field(60.0, gt=0, le=3600)  # seconds per request
    max_retries: int = Field(2, ge=0, le=10)

    _url = field_validator("base_url")(check_url)

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

    _unset = field_validator("max_tokens", mode="before")(zero_is_unset)


class OpenAIChat(_RemoteText):
    tools: bool = False  # the server supports function calling (memory tools)
    vision: bool = False  # the model reads images (messages may carry image parts)
    reply_guard: bool = True  # as EmbeddedChat.reply_guard
    retry_deadline: float | None = Field(RETRY_DEADLINE_S, gt=0, le=600)  # as EmbeddedChat's


class OpenAIHippocampus(_RemoteText):
    mode: HippocampusMode = "auto"
    compact_subjects: CompactSubjects = False
    temperature: float | None = Field(0.2, ge=0, le=2)
    timeout: float = Field(120.0, gt=0, le=3600)
    # How the JSON output is requested: response_format json_schema, json_object, or not.
    json_mode: Literal["schema", "object", "none"] = "schema"


class OpenAIEmbedding(_Remote):
    timeout: float = Field(30.0, gt=0, le=3600)
    dimensions: int | None = Field(None, ge=1, le=65_536)
    batch_size: int = Field(64, ge=1, le=2048)

    _unset = field_validator("dimensions", mode="before")(zero_is_unset)


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


# Any settings model with the three role sections: ``Settings`` is built on this module,
# so naming it here would close an import circle.
SettingsT = TypeVar("SettingsT", bound=BaseModel)


def resolve_keys(
    settings: SettingsT, env: Mapping[str, str], source: Callable[[tuple[Any, ...]], str]
) -> SettingsT:
    """Fill each ``openai`` role's key in ``settings`` (a ``Settings``).

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
