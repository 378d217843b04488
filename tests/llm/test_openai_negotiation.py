"""``step_down``: what to leave out after a server turned a request down (issue 26)."""

from __future__ import annotations

import pytest

from backend.llm.openai_negotiation import Offer, step_down
from backend.llm.openai_request import without_size_bounds
from tests.llm.test_openai_compat import LLAMA_CPP_COMPLAINT

FULL = Offer("json_schema", include_usage=True, sampling=frozenset({"top_k", "seed"}))


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_complaint_about_response_format_steps_the_json_mode_down(status: int) -> None:
    lower = step_down(FULL, LLAMA_CPP_COMPLAINT, status, usage_known=False)
    assert lower == Offer(
        "json_object_with_schema", include_usage=True, sampling=frozenset({"top_k", "seed"})
    )
    assert lower is not None
    assert step_down(lower, "response_format: unknown key 'schema'", 400, usage_known=True) == (
        Offer("json_object", include_usage=True, sampling=frozenset({"top_k", "seed"}))
    )


def test_a_named_sampling_field_is_dropped_first_and_only_it() -> None:
    lower = step_down(FULL, "Unrecognized request argument supplied: top_k", 500, usage_known=True)
    assert lower is not None and lower.dropped == {"top_k"}
    assert lower.json_mode == "json_schema" and lower.include_usage
    # "seed" inside another word is not the seed field
    assert step_down(FULL, "exceeded the seeds quota", 500, usage_known=True) is None


def test_stream_options_named_is_dropped() -> None:
    lower = step_down(FULL, "stream_options is not supported", 500, usage_known=True)
    assert lower is not None and not lower.include_usage and lower.json_mode == "json_schema"


def test_a_500_that_names_nothing_is_the_server_failing() -> None:
    assert step_down(FULL, "CUDA out of memory", 500, usage_known=False) is None
    assert step_down(FULL, "bad gateway", 502, usage_known=False) is None


def test_a_bare_400_tries_stream_options_first_while_unknown_then_the_json_mode() -> None:
    lower = step_down(FULL, "bad request", 400, usage_known=False)
    assert lower is not None and not lower.include_usage and lower.json_mode == "json_schema"
    lower = step_down(FULL, "bad request", 400, usage_known=True)
    assert lower is not None and lower.json_mode == "json_object_with_schema"
    nothing_left = Offer("prompt", include_usage=False)
    assert step_down(nothing_left, "bad request", 400, usage_known=True) is None


def test_size_bounds_are_left_out_of_a_grammar_schema_at_every_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": 6,
                "items": {"type": "string", "minLength": 1, "maxLength": 200},
            },
            "emotion": {"type": "string", "enum": ["calm", "angry"]},
        },
        "required": ["facts"],
    }
    assert without_size_bounds(schema) == {
        "type": "object",
        "properties": {
            "facts": {"type": "array", "items": {"type": "string"}},
            "emotion": {"type": "string", "enum": ["calm", "angry"]},
        },
        "required": ["facts"],
    }
    assert schema["properties"]["facts"]["maxItems"] == 6  # a copy: the original stays
