"""The engine in backend/memory/ stays pure: no other backend imports, no clock, no I/O."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import imported_modules

ENGINE = Path(__file__).resolve().parents[2] / "backend" / "memory"
ENGINE_FILES = sorted(ENGINE.glob("*.py"))

# Third-party modules the engine may use; everything else must be stdlib or backend.memory.
ALLOWED_THIRD_PARTY = {"numpy"}
# Modules whose mere import means I/O, time, randomness or concurrency.
FORBIDDEN_MODULES = {
    "random",
    "time",
    "socket",
    "subprocess",
    "asyncio",
    "threading",
    "os",
    "shutil",
    "sqlite3",
    "urllib",
    "http",
    "requests",
    "httpx",
    "chromadb",
    "openai",
    "tempfile",
}
# Attribute calls that read the wall clock or draw random numbers.
FORBIDDEN_CALLS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "monotonic"),
    ("time", "perf_counter"),
    ("random", "random"),
}


def test_engine_has_modules() -> None:
    assert {p.name for p in ENGINE_FILES} >= {
        "types.py",
        "keywords.py",
        "scoring.py",
        "decay.py",
        "gist.py",
        "retrieve.py",
        "gate.py",
    }


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda p: p.name)
def test_engine_imports_only_itself_stdlib_and_numpy(path: Path) -> None:
    for name in imported_modules(path):
        top = name.split(".")[0]
        if top == "backend":
            assert name.startswith("backend.memory"), f"{path.name} imports {name}"
        elif top in FORBIDDEN_MODULES:
            pytest.fail(f"{path.name} imports {name}")
        else:
            assert top in ALLOWED_THIRD_PARTY or top in sys.stdlib_module_names, (
                f"{path.name} imports third-party {name}"
            )


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda p: p.name)
def test_engine_never_reads_the_clock_or_randomness(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            assert (node.value.id, node.attr) not in FORBIDDEN_CALLS, (
                f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}"
            )
        if isinstance(node, ast.Attribute) and node.attr in {"now", "utcnow"}:
            pytest.fail(f"{path.name}:{node.lineno} reads the clock (.{node.attr})")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            assert node.value.attr != "random", f"{path.name}:{node.lineno} uses numpy.random"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in {"open", "print", "input"}, (
                f"{path.name}:{node.lineno} calls {node.func.id}()"
            )


def test_importing_the_engine_pulls_in_no_other_backend_module() -> None:
    code = (
        "import sys, backend.memory.retrieve, backend.memory.gate, backend.memory.decay\n"
        "bad = sorted(m for m in sys.modules if m.startswith('backend') "
        "and m not in ('backend',) and not m.startswith('backend.memory'))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ENGINE.parents[1],
    )
    assert out.stdout.strip() == ""
