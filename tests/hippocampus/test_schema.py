"""The output schema: bounded everywhere (so a grammar-constrained small model stops)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from backend.hippocampus import (
    HIPPOCAMPUS_SCHEMA,
    SessionMemoryState,
    hippocampus_schema,
    parse_result,
)
from tests.support import require_module

VALID_EXAMPLE: dict[str, Any] = {
    "background": "The user is preparing a move to Osaka with their sister Mei.",
    "short_term": [
        {"role": "note", "text": "Talked about packing."},
        {"role": "user", "text": "I still need to sell the piano."},
        {"role": "assistant", "text": "Maybe a local music school wants it?"},
    ],
    "long_term": [
        {
            "content": "The user's sister Mei lives in Osaka.",
            "category": "relationship",
            "importance": 0.8,
            "confidence": 0.9,
            "subject": "user",
            "keywords": ["mei", "osaka", "sister"],
            "emotion": {"label": "joy", "intensity": 0.6},
            "supersedes": "The user's sister Mei lives in Kyoto.",
        },
        {
            "content": "用户喜欢喝咖啡。",
            "category": "preference",
            "importance": 0.6,
            "confidence": 0.95,
            "subject": "user",
            "keywords": ["咖啡"],
        },
    ],
    "user_emotion": {"label": "anxious", "intensity": 0.7},
}


def _walk(node: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if "type" in node:
            yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")


def _types(node: dict[str, Any]) -> set[str]:
    kind = node["type"]
    return set(kind) if isinstance(kind, list) else {kind}


def test_every_string_has_max_length_and_every_array_max_items() -> None:
    nodes = list(_walk(HIPPOCAMPUS_SCHEMA))
    strings = [(p, n) for p, n in nodes if "string" in _types(n)]
    arrays = [(p, n) for p, n in nodes if "array" in _types(n)]
    assert len(strings) >= 8 and len(arrays) == 3
    for path, node in strings:
        assert isinstance(node.get("maxLength"), int) and node["maxLength"] > 0, path
    for path, node in arrays:
        assert isinstance(node.get("maxItems"), int) and node["maxItems"] > 0, path


def test_every_object_is_closed_and_lists_its_required_fields() -> None:
    for path, node in _walk(HIPPOCAMPUS_SCHEMA):
        if "object" in _types(node):
            assert node.get("additionalProperties") is False, path
            assert set(node["required"]) <= set(node["properties"]), path


def test_roles_and_subjects_are_enums() -> None:
    item = HIPPOCAMPUS_SCHEMA["properties"]["short_term"]["items"]["properties"]
    assert item["role"]["enum"] == ["user", "assistant", "note"]
    memory = HIPPOCAMPUS_SCHEMA["properties"]["long_term"]["items"]["properties"]
    assert memory["subject"]["enum"] == ["user", "persona"]
    assert "general" in memory["category"]["enum"]


def test_schema_is_json_and_the_copy_is_independent() -> None:
    json.dumps(HIPPOCAMPUS_SCHEMA)
    copy = hippocampus_schema()
    copy["properties"].clear()
    assert HIPPOCAMPUS_SCHEMA["properties"]


def test_valid_example_validates_with_jsonschema() -> None:
    jsonschema = require_module("jsonschema", "./install.sh --dev installs it")
    jsonschema.Draft202012Validator.check_schema(HIPPOCAMPUS_SCHEMA)
    jsonschema.validate(VALID_EXAMPLE, HIPPOCAMPUS_SCHEMA)
    bad = json.loads(json.dumps(VALID_EXAMPLE))
    bad["long_term"][0]["content"] = "x" * 1000
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, HIPPOCAMPUS_SCHEMA)


def test_valid_example_parses_without_any_drop() -> None:
    result = parse_result(VALID_EXAMPLE, SessionMemoryState())
    assert result.dropped == ()
    assert len(result.short_term) == 3 and len(result.long_term) == 2
    assert result.long_term[0].supersedes == "The user's sister Mei lives in Kyoto."
