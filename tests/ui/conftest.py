"""Fixtures of the UI tests: the app on a loopback port (``AppHarness``) with two personas,
with or without API keys, and a headless Chromium driven by Playwright.

The UI needs its vendor files (``frontend/install-vendor.sh``) and the browser tests
Debian's ``chromium``; without them the tests skip, or fail when
``LIMBIC_REQUIRE_BROWSER=1`` (set by .ci/run).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.memory.types import Namespace
from backend.personas import PersonaRegistry
from backend.web.ui import vendor_problem
from tests.support import skip_or_fail
from tests.web.harness import REPO, AppHarness

REQUIRE = "LIMBIC_REQUIRE_BROWSER"
API_KEY = "ui-test-key"
OTHER_KEY = "ui-other-key"

POET = {
    "name": "Poet",
    "description": "Answers in short verses and remembers the images you like.",
    "system_prompt": "You are a gentle poet. POET-PROMPT-MARKER.",
    "greeting": "Tell me one small thing you saw today.",
}


def pytest_configure(config: pytest.Config) -> None:
    # Also registered in pyproject.toml; kept here so tests/ui runs on its own.
    config.addinivalue_line("markers", "browser: drives a real browser (headless Chromium)")


@pytest.fixture(autouse=True)
def _vendor_installed() -> None:
    problem = vendor_problem()
    if problem is not None:
        skip_or_fail(problem, REQUIRE)


def with_two_personas(h: AppHarness, tmp_path: Path) -> AppHarness:
    """Swap the harness's personas for the shipped companion plus a test poet."""
    directory = tmp_path / "personas"
    directory.mkdir(exist_ok=True)
    shutil.copy(REPO / "personas" / "companion.json", directory / "companion.json")
    (directory / "poet.json").write_text(json.dumps(POET))
    registry = PersonaRegistry.load(directory, "companion")
    h.services.personas = registry
    h.services.engine.personas = registry
    return h


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AppHarness]:
    with AppHarness(tmp_path) as harness:
        yield with_two_personas(harness, tmp_path)


@pytest.fixture
def auth_h(tmp_path: Path) -> Iterator[AppHarness]:
    keys = {API_KEY: "alice", OTHER_KEY: "bob"}
    with AppHarness(tmp_path, config={"server": {"api_keys": keys}}) as harness:
        yield with_two_personas(harness, tmp_path)


def client(h: AppHarness, **kwargs: Any) -> httpx.Client:
    """A client that looks like the app's own pages (same Origin)."""
    headers = {"Origin": h.base_url, **kwargs.pop("headers", {})}
    return httpx.Client(base_url=h.base_url, headers=headers, timeout=10, **kwargs)


def store_memory(
    h: AppHarness,
    content: str,
    *,
    user: str = "local",
    persona: str = "companion",
    **fields: Any,
) -> str:
    long_term = h.services.long_term
    memory = long_term.new_memory(content, **fields)
    long_term.create(Namespace(user, persona), memory)
    return memory.id


def hippocampus_reply(
    *, background: str = "", short_term: list[dict[str, Any]] | None = None, **memory: Any
) -> str:
    """A hippocampus JSON answer proposing one long-term memory (when ``memory`` given)."""
    long_term = []
    if memory:
        long_term.append(
            {
                "category": "personal_fact",
                "importance": 0.8,
                "confidence": 0.9,
                "subject": "user",
                "keywords": [],
                **memory,
            }
        )
    return json.dumps(
        {
            "background": background,
            "short_term": short_term or [],
            "long_term": long_term,
            "user_emotion": {"label": "calm", "intensity": 0.4},
        }
    )


# --- the browser ---------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")  # stopped before other modules run their event loops
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        skip_or_fail(f"{CHROMIUM} is missing (apt-get install chromium)", REQUIRE)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed (pip install playwright)", REQUIRE)
    with sync_playwright() as playwright:
        # A persistent context would need a user data dir; launch() makes a fresh one.
        instance = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    try:
        yield tab
    finally:
        context.close()
