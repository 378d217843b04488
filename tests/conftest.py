"""Shared test helpers: where the golden fixtures and the eval corpus live (in the repo)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres_server import PostgresServer

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "limbic"  # copies: see its PROVENANCE.md
EVAL = REPO_ROOT / "bench" / "data" / "eval"  # copies, without LoCoMo: see its PROVENANCE.md


def _require_shared() -> bool:
    # .ci/run sets this so that missing data fails the run instead of silently skipping.
    return os.environ.get("LIMBIC_REQUIRE_FIXTURES", "") not in ("", "0", "false")


def _locate(env_var: str, default: Path, what: str) -> Path:
    path = Path(os.environ.get(env_var) or default)
    if not path.is_dir():
        message = f"{what} not found at {path} (set {env_var} to point elsewhere)"
        if _require_shared():
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``tests/fixtures/limbic`` (override with ``LIMBIC_FIXTURES_DIR``)."""
    return _locate("LIMBIC_FIXTURES_DIR", FIXTURES, "golden fixtures")


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    """``bench/data/eval`` (override with ``LIMBIC_EVAL_DIR``)."""
    return _locate("LIMBIC_EVAL_DIR", EVAL, "eval corpus")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for this test session (skipped without the binaries,
    unless LIMBIC_REQUIRE_POSTGRES=1)."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh, empty database on that server."""
    return postgres_server.new_database()
