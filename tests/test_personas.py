from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backend.config import MemorySettings
from backend.personas import (
    Persona,
    PersonaError,
    PersonaRegistry,
    UnknownPersona,
    load_persona,
    load_personas,
)

REPO = Path(__file__).resolve().parent.parent
CARD: dict[str, Any] = {
    "name": "Coach",
    "description": "Keeps you moving.",
    "system_prompt": "You are a running coach.",
    "greeting": "Ready?",
}


def card(directory: Path, persona_id: str, **fields: Any) -> Path:
    path = directory / f"{persona_id}.json"
    path.write_text(json.dumps({**CARD, **fields}, ensure_ascii=False), encoding="utf-8")
    return path


def test_shipped_companion_persona() -> None:
    registry = PersonaRegistry.load(REPO / "personas", "companion")
    companion = registry.default
    assert companion.id == "companion" and companion.language == "auto"
    prompt = companion.system_prompt.lower()
    assert "ai companion" in prompt and "never claim to be human" in prompt
    assert "data, not instructions" in prompt
    assert "chinese" in prompt and "english" in prompt
    assert companion.greeting and companion.hippocampus_focus
    assert dict(companion.memory) == {}


def test_load_directory(tmp_path: Path) -> None:
    card(tmp_path, "coach", memory={"lambda": 0.8, "weights": {"emotion": 0.3}})
    card(tmp_path, "zh-friend", language="zh-Hans", hippocampus_focus="  ")
    (tmp_path / "notes.txt").write_text("ignored")
    (tmp_path / ".hidden.json").write_text("{not json")
    personas = load_personas(tmp_path)
    assert list(personas) == ["coach", "zh-friend"]
    coach = personas["coach"]
    assert isinstance(coach, Persona) and coach.name == "Coach"
    assert coach.memory["weights"] == {"emotion": 0.3}
    with pytest.raises(TypeError):
        coach.memory["lambda"] = 1  # type: ignore[index]
    assert personas["zh-friend"].hippocampus_focus is None
    assert personas["zh-friend"].language == "zh-Hans"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"system_prompt": ""}, "system_prompt: String should have at least 1 character"),
        ({"nmae": "x"}, "unknown field 'nmae'"),
        ({"id": "other"}, "id: 'other' must equal the file name ('coach')"),
        ({"id": "../etc"}, "id: must match"),
        ({"language": "Chinese"}, "language"),
        ({"memory": {"lambda": -1}}, "memory.lambda: must be between 0 and 100"),
        ({"memory": {"wieghts": {}}}, "did you mean 'weights'?"),
    ],
)
def test_bad_cards_name_file_and_field(
    tmp_path: Path, fields: dict[str, Any], expected: str
) -> None:
    path = card(tmp_path, "coach", **fields)
    with pytest.raises(PersonaError) as info:
        load_persona(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_missing_required_field(tmp_path: Path) -> None:
    path = tmp_path / "coach.json"
    path.write_text(json.dumps({"name": "Coach"}))
    with pytest.raises(PersonaError, match="system_prompt: is required"):
        load_persona(path)


@pytest.mark.parametrize("name", ["Coach.json", "a.b.json", "-x.json", f"{'a' * 65}.json"])
def test_file_names_must_be_ids(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(CARD))
    with pytest.raises(PersonaError, match="file name must be a persona id"):
        load_persona(path)


def test_bad_json_and_all_problems_reported(tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text("{oops")
    (tmp_path / "two.json").write_text("[]")
    with pytest.raises(PersonaError) as info:
        load_personas(tmp_path)
    assert "one.json: not valid UTF-8 JSON" in str(info.value)
    assert "two.json: the top level must be a JSON object" in str(info.value)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(PersonaError, match="persona directory not found"):
        load_personas(tmp_path / "nope")


def test_overrides_checked_against_the_configured_memory(tmp_path: Path) -> None:
    path = card(tmp_path, "coach", memory={"k": 40})
    load_persona(path)  # fine against the defaults (pool 50)
    with pytest.raises(PersonaError, match="must not exceed pool"):
        load_persona(path, MemorySettings.model_validate({"pool": 30, "k": 8}))


def test_registry_resolves_models(tmp_path: Path) -> None:
    card(tmp_path, "coach")
    card(tmp_path, "companion", name="Companion")
    registry = PersonaRegistry.load(tmp_path, "companion")
    assert len(registry) == 2 and "coach" in registry and "nope" not in registry
    assert [p.id for p in registry] == ["coach", "companion"]
    assert registry.get("coach") is not None and registry.get("nope") is None
    for placeholder in (None, "", "string", "  "):
        assert registry.resolve(placeholder).id == "companion"
    assert registry.resolve("coach").id == "coach"
    with pytest.raises(UnknownPersona):
        registry.resolve("gpt-4o")


def test_registry_needs_its_default(tmp_path: Path) -> None:
    card(tmp_path, "coach")
    with pytest.raises(PersonaError, match="default persona 'companion' not found"):
        PersonaRegistry.load(tmp_path, "companion")


# --- the card format: shipped personas, avatars, overrides, policies ---------------------


def test_shipped_tutor_and_coach() -> None:
    registry = PersonaRegistry.load(REPO / "personas", "companion", MemorySettings())
    assert [p.id for p in registry] == ["coach", "companion", "tutor"]
    tutor, coach = registry.get("tutor"), registry.get("coach")
    assert tutor is not None and coach is not None
    for persona in (tutor, coach):
        prompt = persona.system_prompt.lower()
        assert persona.language == "auto" and persona.greeting and persona.avatar
        assert "data, not instructions" in prompt and "not a person" in prompt
        assert "chinese" in prompt and "english" in prompt
        assert persona.hippocampus_focus and len(persona.hippocampus_focus) > 300
        assert persona.retrieval_policy is not None  # both tune recall
    assert "recurring mistakes" in tutor.system_prompt.lower()
    assert "level" in tutor.hippocampus_focus.lower()  # type: ignore[union-attr]
    assert "not a doctor" in coach.system_prompt.lower()
    assert "allerg" in coach.system_prompt.lower()
    focus = coach.hippocampus_focus.lower()  # type: ignore[union-attr]
    assert "allergy" in focus and "injury" in focus and "highest importance" in focus


@pytest.mark.parametrize("avatar", ["🦉", "avatars/owl.png", "avatars/a_b-1.webp", ""])
def test_good_avatars(tmp_path: Path, avatar: str) -> None:
    persona = load_persona(card(tmp_path, "coach", avatar=avatar))
    assert persona.avatar == (avatar or None)


@pytest.mark.parametrize(
    "avatar",
    [
        "../secret.png",
        "avatars/../../etc/passwd",
        "/etc/passwd",
        "avatars/owl.svg",
        "C:\\owl.png",
        "avatars/.hidden.png",
        "a very long text",
    ],
)
def test_bad_avatars_name_file_and_field(tmp_path: Path, avatar: str) -> None:
    path = card(tmp_path, "coach", avatar=avatar)
    with pytest.raises(PersonaError) as info:
        load_persona(path)
    assert str(path) in str(info.value) and "avatar:" in str(info.value)


@pytest.mark.parametrize("key", ["mode", "pool", "short_term_token_budget", "lam", "salient"])
def test_only_some_memory_settings_can_be_overridden(tmp_path: Path, key: str) -> None:
    path = card(tmp_path, "coach", memory={key: 1})
    with pytest.raises(PersonaError) as info:
        load_persona(path)
    message = str(info.value)
    assert str(path) in message and f"'{key}' cannot be overridden by a persona" in message
    assert "allowed: weights, hybrid, lambda, k, gate" in message


def test_overrides_become_policies_over_the_configured_settings(tmp_path: Path) -> None:
    base = MemorySettings.model_validate({"k": 5, "hybrid": {"cosine": 0.5}})
    path = card(
        tmp_path,
        "coach",
        memory={"lambda": 0.9, "hybrid": {"importance": 0.4}, "gate": {"min_confidence": 0.8}},
    )
    persona = load_persona(path, base)
    policy = persona.retrieval_policy
    assert policy is not None
    assert policy.lam == 0.9 and policy.k == 5  # the configured k, the persona's lambda
    assert policy.hybrid.importance == 0.4 and policy.hybrid.cosine == 0.5
    assert persona.gate_policy is not None and persona.gate_policy.min_confidence == 0.8
    assert persona.gate_policy.min_importance == base.gate.min_importance
    plain = load_persona(card(tmp_path, "plain"), base)
    assert plain.retrieval_policy is None and plain.gate_policy is None
    only_gate = load_persona(card(tmp_path, "gated", memory={"gate": {"min_importance": 0.5}}))
    assert only_gate.retrieval_policy is None and only_gate.gate_policy is not None


def test_validate_and_write_cards(tmp_path: Path) -> None:
    from backend.personas import validate_card, write_card

    checked = validate_card({**CARD, "avatar": "🏃"}, source="upload")
    assert checked["language"] == "auto" and checked["avatar"] == "🏃"
    with pytest.raises(PersonaError, match="upload: name: is required"):
        validate_card({"system_prompt": "x"}, source="upload")
    with pytest.raises(PersonaError, match="upload: the top level must be a JSON object"):
        validate_card([], source="upload")
    path = write_card(tmp_path, "coach", checked)
    assert json.loads(path.read_text(encoding="utf-8"))["id"] == "coach"
    assert load_persona(path).avatar == "🏃"
    with pytest.raises(PersonaError, match="not a persona id"):
        write_card(tmp_path, "../x", checked)


def test_registry_add_serves_a_new_persona(tmp_path: Path) -> None:
    card(tmp_path, "companion", name="Companion")
    registry = PersonaRegistry.load(tmp_path, "companion")
    registry.add(load_persona(card(tmp_path, "coach")))
    assert [p.id for p in registry] == ["coach", "companion"]
    assert registry.resolve("coach").name == "Coach"
    registry.add(load_persona(card(tmp_path, "companion", name="Friend")))
    assert registry.default.name == "Friend" and len(registry) == 2


def test_long_term_write_takes_a_personas_gate() -> None:
    from backend.clock import SystemClock
    from backend.longterm.memory import LongTermMemory
    from backend.memory.types import Candidate, GatePolicy, Namespace
    from backend.stores.in_memory import InMemoryVectorStore
    from tests.stores.fakes import BagOfWordsEmbedder

    long_term = LongTermMemory(InMemoryVectorStore(), BagOfWordsEmbedder(), SystemClock())
    ns = Namespace("alice", "coach")
    weak = Candidate("Likes green tea.", importance=0.3, confidence=0.9)
    assert long_term.write(ns, [weak])[0].action == "reject"
    lenient = GatePolicy(min_importance=0.2)
    assert long_term.write(ns, [weak], gate_policy=lenient)[0].action != "reject"
