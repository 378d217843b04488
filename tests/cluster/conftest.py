"""Fixtures of the cluster tests: one shared session database, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database several stores (standing in for app processes) open at once."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "sessions.sqlite3")
