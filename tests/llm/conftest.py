"""Fixtures for the LLM adapter tests: anyio on asyncio, a scripted OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.scripted_server import ScriptedOpenAIServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as scripted:
        yield scripted
