"""The hippocampus stays pure: no I/O, clock or network modules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import imported_modules

PACKAGE = Path(__file__).resolve().parents[2] / "backend" / "hippocampus"
FILES = sorted(PACKAGE.glob("*.py"))
ALLOWED_THIRD_PARTY = {"pydantic"}
FORBIDDEN = {
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
    "openai",
    "logging",
    "datetime",
}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_imports_only_pure_modules(path: Path) -> None:
    for name in imported_modules(path):
        top = name.split(".")[0]
        if top == "backend":
            assert name.startswith(("backend.hippocampus", "backend.memory")), name
        else:
            assert top not in FORBIDDEN, f"{path.name} imports {name}"
            assert top in ALLOWED_THIRD_PARTY or top in sys.stdlib_module_names, name
