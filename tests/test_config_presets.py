"""``"model": "<preset>"`` in an embedded chat or hippocampus section: checked against the
preset registry and the installed files, exclusive with ``model_path``, readable errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from backend.config import ConfigError, Settings, load_settings
from backend.llm import presets

INSTALLED = "qwen2.5-coder-0.5b"
MISSING = "qwen2.5-coder-1.5b"


@pytest.fixture(autouse=True)
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A models folder where only qwen2.5-coder-0.5b is installed (an empty stand-in file:
    the configuration checks that a preset is installed, its sha256 is checked at load)."""
    folder = tmp_path / "venv-models"
    folder.mkdir()
    (folder / f"{INSTALLED}.gguf").write_bytes(b"")
    monkeypatch.setattr(presets, "models_dir", lambda: folder)
    return folder


def load(tmp_path: Path, data: dict[str, Any], env: dict[str, str] | None = None) -> Settings:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_settings(path, env or {})


def problems(tmp_path: Path, data: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, data, env)
    return str(info.value)


def test_no_model_means_the_default_preset(tmp_path: Path) -> None:
    settings = load(tmp_path, {})
    assert settings.chat.model is None and settings.chat.model_path is None  # type: ignore[union-attr]
    assert settings.hippocampus.model is None  # type: ignore[union-attr]


def test_a_preset_per_role(tmp_path: Path) -> None:
    settings = load(tmp_path, {"chat": {"model": INSTALLED}, "hippocampus": {"model": INSTALLED}})
    assert settings.chat.provider == settings.hippocampus.provider == "embedded"
    assert settings.chat.model == settings.hippocampus.model == INSTALLED
    assert settings.hippocampus.temperature == 0.2  # the role's other defaults stay


def test_a_preset_from_the_environment(tmp_path: Path) -> None:
    settings = load(tmp_path, {}, {"LM__HIPPOCAMPUS__MODEL": INSTALLED})
    assert settings.hippocampus.model == INSTALLED
    message = problems(tmp_path, {}, {"LM__HIPPOCAMPUS__MODEL": "qwen"})
    assert message.startswith("environment LM__HIPPOCAMPUS__MODEL: hippocampus.model: ")


def test_an_unknown_preset_lists_the_presets(tmp_path: Path) -> None:
    assert problems(tmp_path, {"chat": {"model": "gpt-4o"}}) == (
        "config.json: chat.model: must be a local model preset: smollm2-135m, "
        'qwen2.5-coder-0.5b, qwen2.5-coder-1.5b (for a model on a server add "provider": '
        '"openai") (got "gpt-4o")'
    )


def test_a_preset_that_is_not_installed_says_how_to_install_it(tmp_path: Path) -> None:
    message = problems(tmp_path, {"hippocampus": {"model": MISSING}})
    assert message.startswith(
        f"config.json: hippocampus.model: preset {MISSING} is not installed: "
        f"run ./install.sh --model {MISSING}"
    )


def test_model_and_model_path_are_exclusive(tmp_path: Path) -> None:
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"")
    assert problems(tmp_path, {"chat": {"model": INSTALLED, "model_path": "mine.gguf"}}) == (
        "config.json: chat: give model (a preset) or model_path (a GGUF file), not both"
    )
    settings = load(tmp_path, {"chat": {"model_path": "mine.gguf"}})
    assert settings.chat.model_path == gguf.resolve()  # type: ignore[union-attr]


def test_one_line_per_problem(tmp_path: Path) -> None:
    message = problems(
        tmp_path, {"chat": {"model": "tiny"}, "hippocampus": {"model": MISSING, "n_ctx": 10}}
    )
    lines = message.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("config.json: chat.model: must be a local model preset")
    assert any(line.startswith("config.json: hippocampus.model: preset ") for line in lines)
    assert any("hippocampus.n_ctx: must be between 256 and 1048576" in line for line in lines)


def test_server_roles_keep_their_free_model_names(tmp_path: Path) -> None:
    settings = load(tmp_path, {"chat": {"provider": "openai", "model": "gpt-4o-mini"}})
    assert settings.chat.model == "gpt-4o-mini"
    # The embedding role's local names are a short list: another name still points at
    # "provider", after saying which names are local.
    message = problems(tmp_path, {"embedding": {"model": "x"}})
    assert "'all-minilm-l6-v2', 'e5-small-v2', 'minilm-e5' or 'minilm-use'" in message
    assert 'add "provider": "openai"' in message


def test_the_docs_example_is_valid_with_the_presets_installed(tmp_path: Path, models: Path) -> None:
    # A ```jsonc block: tests/test_config.py validates the ```json ones on any machine, but
    # this one needs the Qwen presets installed (faked here).
    doc = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
    section = doc.read_text(encoding="utf-8").split("## Local model presets", 1)[1]
    blocks = re.findall(r"```jsonc\n(.*?)```", section.split("\n## ", 1)[0], flags=re.S)
    assert blocks
    (models / f"{MISSING}.gguf").write_bytes(b"")
    for block in blocks:
        settings = load(tmp_path, json.loads(block))
        assert settings.chat.model in presets.PRESETS  # type: ignore[union-attr]


def test_two_local_models_take_turns_on_a_small_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend.engine.services import reply_first

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert reply_first(load(tmp_path, {})) is not None  # "auto", 2 cores
    assert reply_first(load(tmp_path, {"hippocampus": {"yield_to_reply": False}})) is None
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert reply_first(load(tmp_path, {})) is None  # room for both: side by side
    assert reply_first(load(tmp_path, {"hippocampus": {"yield_to_reply": True}})) is not None
    remote = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    assert reply_first(load(tmp_path, {"hippocampus": remote})) is None
    assert "yield_to_reply" in problems(tmp_path, {"hippocampus": {"yield_to_reply": "yes"}})


def test_the_only_local_model_uses_every_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend.engine.services import build_chat_model

    monkeypatch.setattr("os.cpu_count", lambda: 4)
    remote = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    chat = {"model": INSTALLED}  # the stand-in models folder has only this preset
    alone = build_chat_model(load(tmp_path, {"chat": chat, "hippocampus": remote}), "chat")
    assert alone._n_threads == 4  # type: ignore[attr-defined]
    # Two local models side by side (yield_to_reply off): llama.cpp's half each.
    side_by_side = load(tmp_path, {"chat": chat, "hippocampus": {"yield_to_reply": False}})
    assert build_chat_model(side_by_side, "chat")._n_threads is None  # type: ignore[attr-defined]


def test_two_roles_on_one_local_server_take_turns(tmp_path: Path) -> None:
    from backend.engine.services import reply_first

    def remote(url: str) -> dict[str, str]:
        return {"provider": "openai", "base_url": url, "model": "m"}

    local = "http://127.0.0.1:8080/v1"
    same = {"chat": remote(local), "hippocampus": remote(local), "embedding": remote(local)}
    assert reply_first(load(tmp_path, same)) is not None
    apart = {**same, "hippocampus": remote("http://127.0.0.1:8081/v1")}
    assert reply_first(load(tmp_path, apart)) is None  # two servers: side by side
    hosted = "https://api.openai.com/v1"
    cloud = {**same, "chat": remote(hosted), "hippocampus": remote(hosted)}
    assert reply_first(load(tmp_path, cloud, {"OPENAI_API_KEY": "sk-x"})) is None


def test_auto_asks_a_model_on_this_machine_for_facts_only(tmp_path: Path) -> None:
    from backend.engine.services import hippocampus_mode

    def hippocampus(url: str, **extra: str) -> dict[str, object]:
        role = {"provider": "openai", "base_url": url, "model": "m"}
        return {"hippocampus": {**role, **extra}, "chat": role}

    env = {"OPENAI_API_KEY": "sk-x"}
    assert hippocampus_mode(load(tmp_path, {})) == "compact"  # embedded
    assert hippocampus_mode(load(tmp_path, hippocampus("http://127.0.0.1:8080/v1"))) == "compact"
    assert hippocampus_mode(load(tmp_path, hippocampus("http://192.168.1.5:11434/v1"))) == "compact"
    assert hippocampus_mode(load(tmp_path, hippocampus("https://api.openai.com/v1"), env)) == "full"
    local_full = hippocampus("http://127.0.0.1:8080/v1", mode="full")
    assert hippocampus_mode(load(tmp_path, local_full)) == "full"
