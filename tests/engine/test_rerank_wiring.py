"""The reranking stage as the app wires it: built from ``memory.rerank_n`` by
``build_services``, off (and said so on /healthz) when turned off or not installed, and
what the setting changes in an activation and its report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from backend.cli.doctor_reranker import check_reranker
from backend.clock import FixedClock
from backend.config.memory import MemorySettings
from backend.engine import services as services_module
from backend.engine.report import activation_part
from backend.engine.services import Services, build_services
from backend.longterm.memory import LongTermMemory
from backend.memory.types import Namespace
from backend.reranking import cross_encoder
from backend.reranking.cross_encoder import MODEL_ID
from backend.reranking.port import RerankerUnavailable
from backend.stores.in_memory import InMemoryVectorStore
from backend.web.health import check_dependencies
from tests.engine.wiring import fake_settings
from tests.memory.helpers import NOW, memory
from tests.stores.fakes import BagOfWordsEmbedder
from tests.support import skip_or_fail

NS = Namespace("u", "p")


def build(tmp_path: Path, **memory_settings: object) -> Services:
    settings = fake_settings(tmp_path / "data", memory=dict(memory_settings))
    return build_services(
        settings, command="test", embedder=BagOfWordsEmbedder(), store=InMemoryVectorStore()
    )


def test_the_default_app_reranks_and_says_so(tmp_path: Path) -> None:
    missing = cross_encoder.installed()
    if missing is not None:
        skip_or_fail(f"the reranker's model files: {missing}", "LIMBIC_REQUIRE_REAL_MODEL")
    services = build(tmp_path)
    try:
        assert services.settings.memory.rerank_n > 0
        reranker = services.long_term.reranker
        assert reranker is not None and reranker.model == MODEL_ID
        assert services.reranker_off is None
        # Not timed yet: every one of rerank_n a turn.
        assert check_dependencies(services)["reranker"] == {
            "ok": True, "on": True, "model": MODEL_ID, "ms_per_pair": None,
            "pairs_a_turn": services.settings.memory.rerank_n,
        }  # fmt: skip
        services.long_term.rerank_pace.record(10, 100.0)
        services.long_term.rerank_pace.record(10, 100.0)
        health = check_dependencies(services)["reranker"]
        assert (health["ms_per_pair"], health["pairs_a_turn"]) == (10.0, 8)
    finally:
        services.close()


def test_rerank_n_zero_loads_no_model(tmp_path: Path) -> None:
    services = build(tmp_path, rerank_n=0)
    try:
        assert services.long_term.reranker is None
        health = check_dependencies(services)["reranker"]
        assert health["ok"] is True and health["on"] is False
        assert "turned off" in health["off"]
    finally:
        services.close()


def test_without_the_model_files_the_app_runs_with_the_stage_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("backend.wheel_models.sys.prefix", str(tmp_path / "bare-venv"))
    monkeypatch.setattr(services_module, "_RERANKERS", {})
    services = build(tmp_path)
    try:
        assert services.long_term.reranker is None
        health = check_dependencies(services)
        assert health["reranker"]["on"] is False
        assert "not installed: run ./install.sh" in health["reranker"]["off"]
        assert "memory reranking is off" in caplog.text
        # activation still works, without the stage
        services.long_term.store.upsert(NS, [memory("a", "The user's dog is called Pepper")])
        activation = services.long_term.activate(NS, "what is my dog called")
        assert [m.id for m in activation.memories] == ["a"]
        assert activation.retrieval.rerank_skipped == "no reranker"
    finally:
        services.close()


class Scripted:
    """A reranker that finds only the sister relevant (and can go down)."""

    model = "scripted"

    def __init__(self) -> None:
        self.calls = 0
        self.down = False

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls += 1
        if self.down:
            raise RerankerUnavailable("scripted outage")
        return [0.99 if "sister" in p else 0.01 for p in passages]


def long_term(reranker: Scripted, **settings: object) -> LongTermMemory:
    policy = MemorySettings.model_validate({"k": 1, **settings}).activation_policy()
    ltm = LongTermMemory(
        InMemoryVectorStore(), BagOfWordsEmbedder(), FixedClock(NOW),
        activation=replace(policy, salient_n=0), reranker=reranker,
    )  # fmt: skip
    # The message's words favour the hiking notes; only the model knows about the sister.
    rows = [memory(f"h{i}", f"The user went hiking near Lyon, trip {i}") for i in range(5)]
    rows.append(memory("sister", "The user's sister has her home in Lyon"))
    vectors = ltm.embed([m.content for m in rows])
    assert vectors is not None
    ltm.store.upsert(NS, [replace(m, embedding=v) for m, v in zip(rows, vectors, strict=True)])
    return ltm


def test_the_setting_changes_what_is_recalled_and_the_report_shows_the_channel() -> None:
    query = "does anyone of my family live near Lyon hiking"
    on, off = Scripted(), Scripted()
    with_stage = long_term(on).activate(NS, query)
    without = long_term(off, rerank_n=0).activate(NS, query)
    assert [m.id for m in with_stage.memories] == ["sister"]
    assert [m.id for m in without.memories] != ["sister"]
    assert (on.calls, off.calls) == (1, 0)
    report = activation_part(with_stage)
    assert report["activation"]["reranked"] == 6 and report["activation"]["rerank_skipped"] is None
    assert report["activation"]["rerank_ms"] >= 0.0
    (item,) = report["activated"]
    assert item["score"]["rerank"] == 0.99
    weight = MemorySettings().rerank_weight
    assert item["contributions"]["rerank"] == pytest.approx(weight * 0.99, abs=1e-4)
    shares = [v for v in item["contributions"].values() if v is not None]
    assert sum(shares) + item["remainder"] == pytest.approx(item["score"]["final"], abs=1e-9)
    plain = activation_part(without)
    assert plain["activation"]["rerank_skipped"] == "off"
    assert "rerank" not in plain["activated"][0]["score"]
    assert "rerank" not in plain["activated"][0]["contributions"]


def test_a_reranker_that_fails_skips_the_stage_for_that_turn() -> None:
    model = Scripted()
    ltm = long_term(model)
    model.down = True
    activation = ltm.activate(NS, "does anyone of my family live near Lyon hiking")
    assert activation.retrieval.rerank_skipped == "reranker unavailable"
    assert len(activation.memories) == 1 and model.calls == 1
    model.down = False
    assert [m.id for m in ltm.activate(NS, "my family near Lyon hiking").memories] == ["sister"]


def test_doctor_checks_the_files_and_warns_when_they_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = fake_settings(tmp_path / "data")
    off = check_reranker(fake_settings(tmp_path / "data", memory={"rerank_n": 0}))
    assert off.status == "ok" and off.details["on"] is False
    if cross_encoder.installed() is None:
        found = check_reranker(settings)
        assert found.status == "ok" and found.details["on"] is True
        assert "installed and intact" in found.lines[0]
    monkeypatch.setattr("backend.wheel_models.sys.prefix", str(tmp_path / "bare-venv"))
    missing = check_reranker(settings)
    assert missing.status == "warning" and missing.details["on"] is False
    assert "run ./install.sh" in missing.lines[0] and "ranks without" in missing.lines[0]


class Counting(Scripted):
    """The scripted reranker, counting the passages of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[int] = []

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.read.append(len(passages))
        return super().score(query, passages)


def test_a_slow_pace_cuts_the_pairs_to_the_time_budget() -> None:
    query = "does anyone of my family live near Lyon hiking"
    model = Counting()
    ltm = long_term(model, rerank_budget_ms=50)
    assert ltm.activation.rerank_budget_ms == 50
    # Two calls at 20 ms a pair: 50 ms holds two pairs of the six.
    ltm.rerank_pace.record(10, 200.0)
    ltm.rerank_pace.record(10, 200.0)
    activation = ltm.activate(NS, query)
    assert model.read == [2] and activation.retrieval.reranked == 2
    # Without a budget every one of rerank_n is read, whatever the pace.
    unbounded = Counting()
    free = long_term(unbounded, rerank_budget_ms=None)
    free.rerank_pace.record(10, 200.0)
    free.rerank_pace.record(10, 200.0)
    assert free.activate(NS, query).retrieval.reranked == 6 and unbounded.read == [6]


def test_activations_time_the_model_into_the_pace_and_a_new_model_starts_afresh() -> None:
    model = Counting()
    ltm = long_term(model)
    assert ltm.rerank_pace.ms_per_pair() is None
    for _ in range(2):
        ltm.activate(NS, "does anyone of my family live near Lyon hiking")
    pace = ltm.rerank_pace.ms_per_pair()
    assert pace is not None and pace >= 0.0
    # A fast model reads all six within the default budget.
    assert model.read == [6, 6]
    ltm.reranker = Counting()
    assert ltm.rerank_pace.ms_per_pair() is None
