"""Tests, benches and the app share one wiring: ``build_services``. What a test hands in
is what runs; everything else (the outbox, the cluster wrapping, the owner lock, the
models of the web harness) is built as in production."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.engine.services import StartupError, build_services, turn_settings
from backend.llm.fake import FakeChatModel
from backend.llm.openai_compat import OpenAICompatChatModel
from backend.personas import PersonaRegistry
from backend.stores.change_feed import ChangeLoggingVectorStore, SharedLexicalIndex
from backend.stores.in_memory import InMemoryVectorStore
from tests.engine.wiring import REPO, app_settings, fake_settings
from tests.stores.fakes import BagOfWordsEmbedder
from tests.web.harness import AppHarness

from .conftest import Rig, make_rig


def test_the_rig_runs_the_production_wiring_with_its_fakes(rig: Rig) -> None:
    services = rig.services
    assert services.long_term.outbox is not None  # as the app has it
    assert services.engine.chat is rig.chat and services.engine.hippocampus is rig.hippocampus
    assert isinstance(services.store, InMemoryVectorStore)
    assert isinstance(services.embedder, BagOfWordsEmbedder)
    assert services.lock is not None  # the data directory is the rig's alone
    assert services.engine.settings.hippocampus_timeout_s == 5.0  # from the settings
    assert services.engine.settings.token_budget == 300


def test_services_hold_no_copies_of_the_engines_parts(rig: Rig) -> None:
    services, engine = rig.services, rig.engine
    assert services.sessions is engine.sessions and services.long_term is engine.long_term
    assert services.chat is engine.chat and services.clock is engine.clock
    assert services.personas is engine.personas
    swapped = PersonaRegistry.load(REPO / "personas", "companion")
    services.personas = swapped
    assert engine.personas is swapped  # one registry: what the app adds, turns serve


def test_a_data_directory_has_one_owner_whatever_is_replaced(tmp_path: Path) -> None:
    first = make_rig(tmp_path)
    with pytest.raises(StartupError, match="in use"):
        make_rig(tmp_path)  # its own store and models, the same data directory
    first.services.close()
    make_rig(tmp_path).services.close()  # released on close


def test_the_hippocampus_timeout_is_the_settings(tmp_path: Path) -> None:
    remote = fake_settings(tmp_path, hippocampus={"timeout": 42.0})
    assert turn_settings(remote).hippocampus_timeout_s == 42.0
    local = app_settings(tmp_path)
    assert turn_settings(local).hippocampus_timeout_s == local.hippocampus.timeout == 300.0
    custom = app_settings(tmp_path, hippocampus={"timeout": 90})
    assert turn_settings(custom).hippocampus_timeout_s == 90.0


def test_the_reply_cap_is_the_chat_role_s(tmp_path: Path) -> None:
    # The turn knows it (``turn_reply.CAP_TAIL_PIECES``): the app's default reply cap
    # cut bench.reply_quality's replies mid-sentence while the turn saw no cap at all.
    assert turn_settings(app_settings(tmp_path)).chat_max_tokens == 320
    capped = app_settings(tmp_path, chat={"max_tokens": 200})
    assert turn_settings(capped).chat_max_tokens == 200
    assert turn_settings(fake_settings(tmp_path, chat={"max_tokens": 64})).chat_max_tokens == 64


def test_compact_subjects_is_the_settings(tmp_path: Path) -> None:
    assert not turn_settings(app_settings(tmp_path)).compact_subjects  # off by default
    on = app_settings(tmp_path, hippocampus={"compact_subjects": True})
    assert turn_settings(on).compact_subjects
    remote = fake_settings(tmp_path, hippocampus={"compact_subjects": True})
    assert turn_settings(remote).compact_subjects


def test_a_shared_session_database_wraps_a_replaced_store(
    tmp_path: Path, postgres_url: str
) -> None:
    store = InMemoryVectorStore()
    settings = fake_settings(tmp_path / "data", storage={"database_url": postgres_url})
    services = build_services(
        settings,
        command="test",
        chat=FakeChatModel("c"),
        hippocampus=FakeChatModel("h"),
        embedder=BagOfWordsEmbedder(),
        store=store,
    )
    try:
        assert services.store is store
        assert isinstance(services.long_term.lexical, SharedLexicalIndex)
        chain, layer = [], services.long_term.store
        while layer is not None:  # the long-term memory's wrappers, down to the store
            chain.append(layer)
            layer = getattr(layer, "inner", None)
        assert chain[-1] is store
        assert any(isinstance(layer, ChangeLoggingVectorStore) for layer in chain)
    finally:
        services.close()


def test_the_web_harness_is_the_app_as_production_wires_it(tmp_path: Path) -> None:
    embedder = BagOfWordsEmbedder()
    with AppHarness(tmp_path, embedder=embedder) as h:
        services = h.services
        assert services.embedder is embedder  # the test's part is the one used
        assert services.long_term.outbox is not None
        assert services.lock is not None
        assert isinstance(services.chat, OpenAICompatChatModel)  # built from the settings
        assert isinstance(services.hippocampus, OpenAICompatChatModel)
        assert services.engine.settings.hippocampus_timeout_s == h.settings.hippocampus.timeout
