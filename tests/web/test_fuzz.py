"""Property-based fuzzing of the OpenAPI schema (schemathesis): no input gets a 5xx.

Every operation of ``/openapi.json`` is called with generated inputs, those that fit the
schema (positive) and those that do not (negative), against the app on a loopback port
with scripted models. The budget is fixed and small (``MAX_EXAMPLES`` per operation and
mode, derandomized, no example database), so the run is deterministic and short.

The operations are enumerated at run time from the app's own schema, so a new route is
fuzzed without touching this file. (schemathesis's ``pytest.from_fixture`` integration
reaches into a pytest internal that pytest 9 removed, so the Hypothesis test is built
here from each operation's ``as_strategy``.)
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.web.harness import AppHarness

MAX_EXAMPLES = 25
NDJSON = "application/x-ndjson"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppHarness]:
    with AppHarness(tmp_path_factory.mktemp("fuzz")) as h:
        yield h


@pytest.fixture(scope="module")
def api_schema(harness: AppHarness) -> schemathesis.BaseSchema:
    # The memory import takes a raw JSON Lines body: send generated text as is.
    schemathesis.serializer.alias(NDJSON, "text/plain")
    return schemathesis.openapi.from_url(harness.base_url + "/openapi.json")


@pytest.fixture(scope="module")
def known_ids(harness: AppHarness) -> dict[str, str]:
    """Path parameters naming things that exist, so generated calls get past the 404s."""
    base = harness.base_url
    memory = httpx.post(
        f"{base}/api/personas/companion/memories", json={"content": "The user likes tea"}
    )
    chat = httpx.post(
        f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert memory.status_code == 201 and chat.status_code == 200
    return {
        "persona_id": "companion",
        "memory_id": memory.json()["id"],
        "session_id": chat.headers["x-session-id"],
    }


def fuzz(
    operation: schemathesis.APIOperation,
    mode: GenerationMode,
    base_url: str,
    path_parameters: dict[str, str],
) -> None:
    wanted = {k: v for k, v in path_parameters.items() if "{" + k + "}" in operation.path}

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=wanted or None))
    def run(case: schemathesis.Case) -> None:
        # Generous: a loaded 2-core CI box must not turn a slow answer into a failure.
        response = case.call(base_url=base_url, timeout=30)
        case.validate_response(response, checks=[not_a_server_error])

    run()


@pytest.mark.parametrize(
    ("mode", "existing"),
    [
        (GenerationMode.POSITIVE, False),
        (GenerationMode.POSITIVE, True),
        (GenerationMode.NEGATIVE, False),
    ],
    ids=["positive", "positive-existing-ids", "negative"],
)
def test_no_input_gets_a_server_error(
    harness: AppHarness,
    api_schema: schemathesis.BaseSchema,
    known_ids: dict[str, str],
    mode: GenerationMode,
    existing: bool,
) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    labels = {op.label for op in operations}
    assert {
        "GET /api/personas/{persona_id}/memories",
        "POST /v1/chat/completions",
        # The NeMo Agent Toolkit UI's routes (backend/web/nemo_api.py).
        "POST /chat",
        "POST /generate",
        "POST /generate/stream",
    } <= labels
    failures = []
    for operation in operations:
        try:
            fuzz(operation, mode, harness.base_url, known_ids if existing else {})
        except Unsatisfiable:  # nothing to get wrong (no parameters, no body)
            assert mode is GenerationMode.NEGATIVE
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
