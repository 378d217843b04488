from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from backend.config import (
    ROLES,
    ConfigError,
    EmbeddedChat,
    OpenAIChat,
    OpenAIEmbedding,
    Settings,
    load_settings,
)
from backend.memory.types import GatePolicy, HybridWeights, RetrievalPolicy, ScoreWeights
from backend.web.api_keys import user_for_key

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "config.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def load(tmp_path: Path, data: Any, env: dict[str, str] | None = None) -> Settings:
    return load_settings(write(tmp_path, data), env or {})


def problems(tmp_path: Path, data: Any, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, data, env)
    return str(info.value)


def openai_chat(**extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-4o-mini", **extra}


# ---- defaults ---------------------------------------------------------------------------


def test_missing_file_means_all_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "config.json", {})
    assert isinstance(settings.chat, EmbeddedChat)
    assert settings.hippocampus.provider == settings.embedding.provider == "embedded"
    assert settings.hippocampus.repeat_penalty == 1.0
    assert settings.server.host == "127.0.0.1" and settings.server.port == 8000
    assert settings.storage.data_dir == tmp_path / "data"
    assert settings.storage.sessions_db == tmp_path / "data" / "sessions.sqlite3"
    assert settings.server.personas_dir == tmp_path / "personas"
    assert settings.memory.pool == 50 and settings.memory.short_term_token_budget == 1500


def test_default_path_comes_from_lm_config(tmp_path: Path) -> None:
    path = write(tmp_path, {"server": {"port": 9001}})
    assert load_settings(env={"LM_CONFIG": str(path)}).server.port == 9001


def test_example_config_is_exactly_the_defaults(tmp_path: Path) -> None:
    example = tmp_path / "config.json"
    example.write_text((REPO / "config.example.json").read_text(encoding="utf-8"))
    assert load_settings(example, {}) == load_settings(tmp_path / "absent.json", {})


def test_engine_policies_match_the_engine_defaults(tmp_path: Path) -> None:
    memory = load(tmp_path, {}).memory
    assert memory.score_weights() == ScoreWeights()
    assert memory.hybrid_weights() == HybridWeights()
    # The app defaults to the hybrid mode with a relevance floor and the reranking stage
    # (measured: docs/memory-model.md, docs/benchmarks.md); the rest is the engine's default.
    assert memory.retrieval_policy() == RetrievalPolicy(
        mode="hybrid", min_relevance=0.15, rerank_n=30
    )
    assert memory.gate_policy() == GatePolicy()
    activation = memory.activation_policy()
    assert activation.lexical_pool == 30 and activation.min_importance == 0.4
    # the cross-encoder's time budget is the app's (the engine's default has none)
    assert activation.rerank_budget_ms == 80.0


def test_limbic_mode_is_the_spec_pipeline(tmp_path: Path) -> None:
    memory = load(tmp_path, {"memory": {"mode": "limbic", "lambda": 0.9}}).memory
    policy = memory.retrieval_policy()
    # limbic = limbic weights + GIST at the configured lambda, no lexical index.
    assert (policy.mode, policy.lam, policy.weights) == ("limbic", 0.9, ScoreWeights())
    assert memory.activation_policy().lexical_pool == 0


def test_hybrid_settings_become_policies(tmp_path: Path) -> None:
    memory = load(
        tmp_path,
        {
            "memory": {
                "hybrid": {"cosine": 0.5, "cjk_cosine": 1},
                "same_fact": 0.7,
                "min_relevance": 0.1,
                "lexical_pool": 12,
                "rerank_n": 12,
                "rerank_weight": 0.5,
            }
        },
    ).memory
    policy = memory.retrieval_policy()
    assert (policy.hybrid.cosine, policy.hybrid.cjk_cosine) == (0.5, 1.0)
    assert (policy.same_fact, policy.min_relevance) == (0.7, 0.1)
    assert (policy.rerank_n, policy.rerank_weight) == (12, 0.5)
    assert load(tmp_path, {"memory": {"rerank_n": 0}}).memory.retrieval_policy().rerank_n == 0
    unbounded = load(tmp_path, {"memory": {"rerank_budget_ms": None}}).memory
    assert unbounded.activation_policy().rerank_budget_ms is None
    with pytest.raises(ConfigError, match="rerank_budget_ms"):
        load(tmp_path, {"memory": {"rerank_budget_ms": 0}})
    with pytest.raises(ConfigError, match="rerank_weight"):
        load(tmp_path, {"memory": {"rerank_weight": 1.5}})
    assert memory.activation_policy().lexical_pool == 12
    with pytest.raises(ConfigError, match="at least one hybrid channel weight"):
        load(
            tmp_path,
            {
                "memory": {
                    "hybrid": {
                        "cosine": 0,
                        "relevance": 0,
                        "importance": 0,
                        "recency": 0,
                        "emotion": 0,
                    }
                }
            },
        )


def test_memory_settings_become_policies(tmp_path: Path) -> None:
    memory = load(
        tmp_path,
        {
            "memory": {
                "lambda": 0.8,
                "k": 5,
                "weights": {"recency": 0.1},
                "gate": {"duplicate_cosine": 0.95},
            }
        },
    ).memory
    policy = memory.retrieval_policy()
    assert (policy.k, policy.lam, policy.weights.recency) == (5, 0.8, 0.1)
    assert memory.gate_policy().duplicate_cosine == 0.95


def test_persona_overrides_are_merged_and_validated(tmp_path: Path) -> None:
    memory = load(tmp_path, {}).memory
    merged = memory.with_overrides({"weights": {"emotion": 0.4}, "lambda": 1}, source="p.json")
    assert merged.weights.emotion == 0.4 and merged.weights.recency == 0.25 and merged.lam == 1
    with pytest.raises(ConfigError, match=r"p.json: memory.weights.emotion: must be between"):
        memory.with_overrides({"weights": {"emotion": 3}}, source="p.json")


# ---- providers --------------------------------------------------------------------------


def test_openai_roles(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {
            "chat": openai_chat(base_url="http://localhost:11434/v1/", tools=True, max_tokens=0),
            "embedding": {
                "provider": "openai",
                "model": "text-embedding-3-small",
                "dimensions": 512,
            },
        },
    )
    assert isinstance(settings.chat, OpenAIChat)
    assert settings.chat.base_url == "http://localhost:11434/v1"
    assert settings.chat.tools is True and settings.chat.max_tokens is None
    assert isinstance(settings.embedding, OpenAIEmbedding) and settings.embedding.dimensions == 512
    assert settings.chat.api_key_value() is None  # a local server needs none


def test_bad_value_names_the_key_and_the_range(tmp_path: Path) -> None:
    message = problems(tmp_path, {"chat": openai_chat(temperature=5)})
    assert message == "config.json: chat.temperature: must be between 0 and 2 (got 5)"


def test_the_retry_deadline_is_seconds_or_none(tmp_path: Path) -> None:
    assert load(tmp_path, {}, {}).chat.retry_deadline == 2.5
    settings = load(tmp_path, {"chat": openai_chat(retry_deadline=None)}, {"OPENAI_API_KEY": "k"})
    assert settings.chat.retry_deadline is None
    message = problems(tmp_path, {"chat": {"provider": "embedded", "retry_deadline": 0}})
    assert message.startswith("config.json: chat.retry_deadline: must be greater than 0")


def test_every_problem_is_reported(tmp_path: Path) -> None:
    message = problems(
        tmp_path, {"memory": {"weights": {"recency": 2}, "mode": "fast"}, "server": {"port": -1}}
    )
    assert "config.json: memory.weights.recency: must be between 0 and 1 (got 2)" in message
    assert "memory.mode: must be 'hybrid' or 'limbic'" in message
    assert "server.port: must be between 0 and 65535 (got -1)" in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"chat": openai_chat(temprature=1)}, "did you mean 'temperature'?"),
        ({"memroy": {}}, "unknown key 'memroy' (did you mean 'memory'?)"),
        ({"chat": {"model": "gpt-4o"}}, 'add "provider": "openai"'),
        ({"chat": {"provider": "anthropic"}}, "chat.provider: must be one of 'embedded', 'openai'"),
        ({"chat": {"provider": "openai"}}, "chat.model: is required"),
        ({"chat": openai_chat(base_url="localhost:8080")}, "chat.base_url: must be an http(s) URL"),
        ({"storage": {"chroma_url": "ftp://x"}}, "storage.chroma_url: must be an http(s) URL"),
        ({"memory": {"k": 60}}, "k (60) must not exceed pool (50)"),
        ({"server": {"default_persona": "../x"}}, "server.default_persona"),
        ({"chat": openai_chat(api_key="a", api_key_env="B")}, "api_key or api_key_env, not both"),
    ],
)
def test_mistakes_are_explained(tmp_path: Path, data: dict[str, Any], expected: str) -> None:
    assert expected in problems(tmp_path, data)


def test_unreadable_json_and_wrong_top_level(tmp_path: Path) -> None:
    assert "config.json: invalid JSON at line 1 column 10" in problems(tmp_path, '{"chat": }')
    assert "top level must be a JSON object" in problems(tmp_path, "[]")


# ---- secrets ----------------------------------------------------------------------------


def test_secrets_never_printed(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {"chat": openai_chat(api_key="sk-very-secret"), "server": {"api_keys": {"k-secret": "al"}}},
    )
    assert settings.chat.api_key_value() == "sk-very-secret"
    for text in (repr(settings), str(settings), json.dumps(settings.safe_dump())):
        assert "sk-very-secret" not in text and "k-secret" not in text
    assert settings.safe_dump()["server"]["api_keys"] == {"<key 1>": "al"}


def test_secrets_never_in_errors(tmp_path: Path) -> None:
    message = problems(
        tmp_path,
        {"chat": openai_chat(api_key=12345), "server": {"api_keys": {"sk-leak": ["bob"]}}},
    )
    assert "sk-leak" not in message and "12345" not in message
    assert "server.api_keys.<key>" in message


def test_api_keys_map_to_users(tmp_path: Path) -> None:
    keys = load(
        tmp_path, {"server": {"api_keys": {"k1": "alice"}}}, {"LM_API_KEYS": "k2:bob, k3:carol"}
    ).server.api_keys
    assert user_for_key(keys, "k1") == "alice" and user_for_key(keys, "k3") == "carol"
    assert user_for_key(keys, "nope") is None and user_for_key({}, "k1") is None
    assert "api key" in problems(tmp_path, {"server": {"api_keys": {"a b": "x"}}}).lower()
    assert "LM_API_KEYS" in problems(tmp_path, {}, {"LM_API_KEYS": "novalue"})


# ---- environment ------------------------------------------------------------------------


def test_named_env_overrides_win_over_the_file(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {"server": {"port": 8001, "host": "127.0.0.1"}, "storage": {"data_dir": "here"}},
        {
            "LM_PORT": "9000",
            "LM_HOST": "0.0.0.0",
            "LM_DATA_DIR": "/srv/limbic",
            "LM_CHROMA_URL": "http://127.0.0.1:8001",
        },
    )
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", 9000)
    assert settings.storage.data_dir == Path("/srv/limbic")
    assert settings.storage.sessions_db == Path("/srv/limbic/sessions.sqlite3")
    assert settings.storage.chroma_url == "http://127.0.0.1:8001"


def test_generic_nested_env(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {"chat": openai_chat()},
        {
            "LM__MEMORY__WEIGHTS__RECENCY": "0.3",
            "LM__MEMORY__LAMBDA": "0.7",
            "LM__CHAT__MODEL": "qwen-plus",
            "LM__CHAT__TOOLS": "true",
            "LM__SERVER__API_KEYS": '{"k9": "zoe"}',
            "LM__SERVER__PORT": "7000",
            "LM_PORT": "7001",  # the named variable wins
        },
    )
    assert settings.memory.weights.recency == 0.3 and settings.memory.lam == 0.7
    assert isinstance(settings.chat, OpenAIChat)
    assert settings.chat.model == "qwen-plus" and settings.chat.tools is True
    assert settings.server.api_keys == {"k9": "zoe"} and settings.server.port == 7001


def test_env_errors_name_the_variable(tmp_path: Path) -> None:
    message = problems(tmp_path, {}, {"LM_PORT": "http"})
    assert message.startswith("environment LM_PORT: server.port: must be a valid integer")
    assert "environment LM__MEMORY__K: memory.k" in problems(tmp_path, {}, {"LM__MEMORY__K": "0"})


def test_precedence_named_env_then_generic_env_then_file_then_defaults(tmp_path: Path) -> None:
    def port(data: dict[str, Any], env: dict[str, str]) -> int:
        return load(tmp_path, data, env).server.port

    file = {"server": {"port": 8001}}
    assert port({}, {}) == 8000
    assert port(file, {}) == 8001
    assert port(file, {"LM__SERVER__PORT": "8002"}) == 8002
    assert port(file, {"LM__SERVER__PORT": "8002", "LM_PORT": "8003"}) == 8003
    assert port(file, {"LM__SERVER__PORT": "", "LM_PORT": ""}) == 8001  # empty: ignored


def test_env_nesting_merges_key_by_key_with_the_file(tmp_path: Path) -> None:
    memory = load(
        tmp_path,
        {"memory": {"k": 4, "hybrid": {"cosine": 0.5, "relevance": 0.3}}},
        {
            "LM__MEMORY__HYBRID__CJK_COSINE": "1",  # three levels deep
            "LM__Memory__Hybrid__Relevance": "0.4",  # after the prefix, any case
            "lm__memory__k": "9",  # the prefix as written: ignored
        },
    ).memory
    assert (memory.hybrid.cosine, memory.hybrid.relevance, memory.hybrid.cjk_cosine) == (
        0.5,
        0.4,
        1.0,
    )
    assert memory.k == 4


def test_a_json_variable_replaces_the_files_object(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {"memory": {"gate": {"min_importance": 0.3}}, "server": {"api_keys": {"old": "al"}}},
        {
            "LM__MEMORY__GATE": '{"min_support": 0.5}',
            "LM__MEMORY__GATE__SAME_FACT": "0.7",  # merged into the variable's object
            "LM__SERVER__API_KEYS": '{"new": "bo"}',
            "LM_API_KEYS": "named:cy",  # merged into whatever the rest gave
        },
    )
    assert settings.memory.gate == GatePolicy(min_support=0.5, same_fact=0.7)
    assert settings.server.api_keys == {"new": "bo", "named": "cy"}
    assert load(tmp_path, {}, {"LM__MEMORY": '{"k": 3, "pool": 30}'}).memory.pool == 30
    assert problems(tmp_path, {}, {"LM__MEMORY__GATE": '{"x": '}) == (
        "environment LM__MEMORY__GATE: invalid JSON"
    )


def test_env_typos_are_errors_naming_the_variable(tmp_path: Path) -> None:
    assert problems(tmp_path, {}, {"LM__MEMROY__K": "5"}) == (
        "environment LM__MEMROY__K: memroy: unknown key 'memroy' (did you mean 'memory'?)"
    )
    assert problems(tmp_path, {}, {"LM__MEMORY__GATE__MIN_SUPORT": "0.5"}) == (
        "environment LM__MEMORY__GATE__MIN_SUPORT: memory.gate.min_suport: "
        "unknown key 'min_suport' (did you mean 'min_support'?)"
    )
    assert problems(tmp_path, {}, {"LM__MEMORY__HYBRID__BM25_K1": "11"}) == (
        "environment LM__MEMORY__HYBRID__BM25_K1: memory.hybrid.bm25_k1: "
        'must be between 0 and 10 (got "11")'
    )


def test_env_values_are_converted_to_the_keys_type(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {},
        {"LM__HIPPOCAMPUS__YIELD_TO_REPLY": "false", "LM__MEMORY__SALIENT__DAYS": "7.5"},
    )
    assert settings.hippocampus.yield_to_reply is False  # type: ignore[union-attr]
    assert settings.memory.salient.days == 7.5


def test_the_file_explicit_then_lm_config_then_config_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = write(tmp_path, {"server": {"port": 9001}})
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"server": {"port": 9002}}')
    env = {"LM_CONFIG": str(other / "config.json")}
    assert load_settings(named, env).server.port == 9001
    assert load_settings(None, env).server.port == 9002
    monkeypatch.chdir(tmp_path)
    assert load_settings(None, {}).server.port == 9001
    with pytest.raises(ConfigError, match="not a file"):
        load_settings(other, {})


def test_relative_paths_from_env_resolve_against_the_config_file(tmp_path: Path) -> None:
    settings = load(tmp_path, {}, {"LM_DATA_DIR": "state", "LM__SERVER__PERSONAS_DIR": "cards"})
    assert settings.storage.data_dir == tmp_path / "state"
    assert settings.server.personas_dir == tmp_path / "cards"


def test_validating_data_reads_no_file_and_no_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {"server": {"port": 9001}})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LM__SERVER__HOST", "0.0.0.0")
    monkeypatch.setenv("LM_PORT", "9002")
    for settings in (Settings.model_validate({"memory": {"k": 3}}), Settings()):
        assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8000)
    assert load_settings().server.port == 9002  # load_settings reads both


def test_memory_sections_are_the_engines_types(tmp_path: Path) -> None:
    memory = load(tmp_path, {"memory": {"gate": {"min_support": 0.5}}}).memory
    assert type(memory.weights) is ScoreWeights and type(memory.hybrid) is HybridWeights
    assert memory.gate == GatePolicy(min_support=0.5) and memory.gate_policy() is memory.gate
    # A field the engine adds is a key at once; config.example.json spells out every one
    # of weights and gate (hybrid is left out of it).
    example = json.loads((REPO / "config.example.json").read_text(encoding="utf-8"))["memory"]
    for key, engine in (("weights", ScoreWeights), ("gate", GatePolicy)):
        assert set(example[key]) == {f.name for f in dataclasses.fields(engine)}, key


@pytest.mark.parametrize("role", ROLES)
def test_api_key_precedence(tmp_path: Path, role: str) -> None:
    section = {"provider": "openai", "model": "m", "api_key_env": "MY_KEY"}
    data = {role: section}
    named = f"LM_{role.upper()}_API_KEY"

    def key(env: dict[str, str]) -> str | None:
        return getattr(load(tmp_path, data, env), role).api_key_value()

    assert key({"MY_KEY": "from-var", "OPENAI_API_KEY": "o"}) == "from-var"
    assert key({named: "named", "MY_KEY": "from-var"}) == "named"
    assert f"{role}.api_key_env: the environment variable MY_KEY is not set" in problems(
        tmp_path, data, {"OPENAI_API_KEY": "o"}
    )
    data = {role: {"provider": "openai", "model": "m"}}
    assert key({"OPENAI_API_KEY": "fallback"}) == "fallback"
    assert key({}) is None
    data = {role: {"provider": "openai", "model": "m", "api_key": "inline"}}
    assert key({"OPENAI_API_KEY": "fallback"}) == "inline"


def test_role_key_ignored_for_embedded_roles(tmp_path: Path) -> None:
    settings = load(tmp_path, {}, {"LM_CHAT_API_KEY": "x", "OPENAI_API_KEY": "y"})
    assert isinstance(settings.chat, EmbeddedChat)


# ---- the docs never rot -----------------------------------------------------------------

DOC = REPO / "docs" / "configuration.md"


def doc_blocks() -> list[str]:
    return re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_docs_have_presets() -> None:
    text = "\n".join(doc_blocks())
    for url in (
        "https://api.openai.com/v1",
        "https://dashscope.aliyuncs.com/compatible-mode/v1",
        "http://localhost:11434/v1",
        "http://localhost:8000/v1",
        "http://localhost:1234/v1",
        "http://localhost:8080/v1",
    ):
        assert url in text
    assert "text-embedding-3-small" in text


@pytest.mark.parametrize("index", range(len(doc_blocks())))
def test_every_doc_block_is_valid(tmp_path: Path, index: int) -> None:
    block = json.loads(doc_blocks()[index])
    env = {name: "test-key" for name in re.findall(r'"api_key_env": "(\w+)"', json.dumps(block))}
    if "provider" in block:  # one role on its own: valid for at least one role
        errors = []
        for role in ROLES:
            try:
                load(tmp_path, {role: block}, env)
                return
            except ConfigError as exc:
                errors.append(str(exc))
        pytest.fail("\n".join(errors))
    load(tmp_path, block, env)


def test_docs_mention_every_key() -> None:
    text = DOC.read_text(encoding="utf-8")
    example = json.loads((REPO / "config.example.json").read_text(encoding="utf-8"))

    def keys(node: dict[str, Any]) -> list[str]:
        out = []
        for key, value in node.items():
            out.append(key)
            if isinstance(value, dict) and key != "api_keys":
                out += keys(value)
        return out

    missing = [key for key in keys(example) if f"`{key}" not in text and f".{key}`" not in text]
    assert not missing
