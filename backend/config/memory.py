"""The ``memory`` section, validated into the engine's own types.

``memory.weights``, ``memory.hybrid`` and ``memory.gate`` *are* the engine's frozen
dataclasses (``ScoreWeights``, ``HybridWeights``, ``GatePolicy`` in
``backend.memory.types``): their keys, types and defaults are the dataclass's fields, and
this module adds only what a file needs on top, the bounds of each value and the checks
across values. The policies the engine takes (``retrieval_policy()``,
``activation_policy()``, ``gate_policy()``) are built from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import Field, GetCoreSchemaHandler, ValidationError, create_model, model_validator
from pydantic_core import core_schema

from backend.config.errors import ConfigError, problems
from backend.config.roles import Section
from backend.memory.types import (
    ActivationPolicy,
    GatePolicy,
    HybridWeights,
    RetrievalPolicy,
    ScoreWeights,
)

_FLOAT32_EPS = 1.1920929e-07  # GIST's lower bound for eps (docs/memory-model.md)
_RETRIEVAL = RetrievalPolicy()
_UNIT: dict[str, Any] = {"ge": 0, "le": 1}
_DAYS: dict[str, Any] = {"gt": 0, "le": 3650}


class EngineSection:
    """``Annotated[engine_type, EngineSection(...)]``: a JSON object validated into an
    instance of the engine's frozen dataclass.

    The keys, types and defaults are the dataclass's fields; ``bounds`` gives a field's
    range (the unit interval when it names none); ``check`` runs on the result (a
    ``ValueError`` is reported at the section's key). ``settings_model`` is the pydantic
    model that validates the object; ``backend.config.errors`` reads its fields for hints.
    """

    def __init__(
        self,
        engine_type: type[Any],
        bounds: Mapping[str, Mapping[str, Any]] | None = None,
        check: Callable[[Any], None] | None = None,
    ) -> None:
        hints = get_type_hints(engine_type)
        fields: dict[str, Any] = {
            f.name: (hints[f.name], Field(f.default, **(bounds or {}).get(f.name, _UNIT)))
            for f in dataclasses.fields(engine_type)
        }
        self.engine_type = engine_type
        self.check = check
        self.settings_model = create_model(
            engine_type.__name__,
            __base__=Section,
            __doc__=engine_type.__doc__,
            **fields,
        )

    def _to_engine(self, value: Any) -> Any:
        engine = self.engine_type(**dict(value))
        if self.check is not None:
            self.check(engine)
        return engine

    def _to_mapping(self, value: Any) -> Any:
        if isinstance(value, self.engine_type):
            return dataclasses.asdict(value)
        return value

    def __get_pydantic_core_schema__(
        self, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        validated = core_schema.no_info_after_validator_function(
            self._to_engine, handler.generate_schema(self.settings_model)
        )
        return core_schema.no_info_before_validator_function(
            self._to_mapping,
            validated,
            serialization=core_schema.plain_serializer_function_ser_schema(dataclasses.asdict),
        )


def _some_weight(hybrid: HybridWeights) -> None:
    if hybrid.cosine + hybrid.relevance + hybrid.importance + hybrid.recency + hybrid.emotion <= 0:
        raise ValueError("at least one hybrid channel weight must be positive")


# Score weights (docs/memory-model.md, "Scoring"): the limbic mode's channel weights.
Weights = Annotated[ScoreWeights, EngineSection(ScoreWeights, {"recency_half_life_days": _DAYS})]
# The hybrid mode's channel weights (docs/memory-model.md, "Hybrid mode").
Hybrid = Annotated[
    HybridWeights,
    EngineSection(
        HybridWeights,
        {
            "recency_half_life_days": _DAYS,
            "bm25_k1": {"ge": 0, "le": 10},
            "relevance_scale": {"gt": 0, "le": 100},
        },
        check=_some_weight,
    ),
]
# Save-gate thresholds (docs/memory-model.md, "The save gate").
Gate = Annotated[GatePolicy, EngineSection(GatePolicy)]


class SalientSettings(Section):
    """Recent important memories added to the pool without a semantic match."""

    n: int = Field(5, ge=0, le=100)
    min_importance: float = Field(0.7, **_UNIT)
    days: float = Field(30, gt=0, le=36_500)


# The keys of ``RetrievalPolicy`` that are plain values of this section (same names).
_RETRIEVAL_KEYS = tuple(
    f.name for f in dataclasses.fields(RetrievalPolicy) if f.name not in ("weights", "hybrid")
)


class MemorySettings(Section):
    # hybrid: cosine + BM25 + importance, restatements collapsed, lexical candidates
    # (docs/memory-model.md); limbic: the spec's scoring (golden fixture) + GIST.
    mode: Literal["hybrid", "limbic"] = "hybrid"
    weights: Weights = ScoreWeights()  # limbic mode's channel weights
    hybrid: Hybrid = HybridWeights()  # hybrid mode's channel weights
    lam: float = Field(_RETRIEVAL.lam, alias="lambda", ge=0, le=100)
    eps: float = Field(_RETRIEVAL.eps, ge=_FLOAT32_EPS, le=1)
    pool: int = Field(ActivationPolicy().pool, ge=1, le=1000)
    k: int = Field(_RETRIEVAL.k, ge=1, le=100)
    # hybrid only: candidates from the lexical index (0: none, no index kept) ...
    lexical_pool: int = Field(30, ge=0, le=1000)
    # ... the similarity at which two memories count as one fact (above 1: never) ...
    same_fact: float = Field(_RETRIEVAL.same_fact, ge=0, le=2)
    # ... counting the vector cosine only from this value (above 1: lexical channels only) ...
    same_fact_cosine: float = Field(_RETRIEVAL.same_fact_cosine, ge=0, le=2)
    # ... and the relevance evidence below which a memory is not recalled (0: off), pinned
    # and salient health notes aside: 0.15 is the highest floor that costs no recall on
    # the eval corpus (0.17: -0.017); an off-topic message then gets 3.7 notes, not 8.
    min_relevance: float = Field(0.15, **_UNIT)
    # ... the top this many, after the floor, read again by the cross-encoder reranker
    # (ms-marco-MiniLM-L-12-v2, installed by install.sh; 0: off, and it is not loaded):
    # 30 gains LoCoMo 0.065 over 10 and costs the eval corpus nothing ...
    rerank_n: int = Field(30, ge=0, le=200)
    # ... its relevance blended into their final score at this weight (1: its order alone)
    rerank_weight: float = Field(_RETRIEVAL.rerank_weight, **_UNIT)
    # ... and a memory it calls at least this relevant is kept through GIST (above 1: none)
    rerank_keep: float = Field(_RETRIEVAL.rerank_keep, ge=0, le=2)
    # ... and no more of them than its recent pace reads in this many ms (null: all of
    # them); 30 pairs take about 65 ms on a 2-core machine that reads 2.3 ms a pair.
    rerank_budget_ms: float | None = Field(80.0, gt=0, le=60_000)
    salient: SalientSettings = SalientSettings()
    gate: Gate = GatePolicy()
    short_term_token_budget: int = Field(1500, ge=100, le=200_000)
    decay_interval_hours: float = Field(24, ge=0, le=8760)  # 0: no scheduled decay

    @model_validator(mode="after")
    def _k_within_pool(self) -> MemorySettings:
        if self.k > self.pool:
            raise ValueError(f"k ({self.k}) must not exceed pool ({self.pool})")
        return self

    def score_weights(self) -> ScoreWeights:
        return self.weights

    def hybrid_weights(self) -> HybridWeights:
        return self.hybrid

    def retrieval_policy(self) -> RetrievalPolicy:
        """The ranking of either mode; both diversify with GIST at ``lambda``."""
        values = {name: getattr(self, name) for name in _RETRIEVAL_KEYS}
        return RetrievalPolicy(weights=self.weights, hybrid=self.hybrid, **values)

    def gate_policy(self) -> GatePolicy:
        return self.gate

    def activation_policy(self) -> ActivationPolicy:
        """How activation gathers and ranks candidates (``backend.longterm.memory``)."""
        return ActivationPolicy(
            retrieval=self.retrieval_policy(),
            pool=self.pool,
            salient_n=self.salient.n,
            salient_min_importance=self.salient.min_importance,
            salient_days=self.salient.days,
            min_importance=self.gate.min_importance,
            lexical_pool=self.lexical_pool if self.mode == "hybrid" else 0,
            rerank_budget_ms=self.rerank_budget_ms,
        )

    def with_overrides(self, overrides: Mapping[str, Any], *, source: str) -> MemorySettings:
        """These settings with ``overrides`` (e.g. a persona's) merged in, key by key,
        validated again. Raises ``ConfigError`` naming ``source`` and the key path."""
        data = _merged(self.model_dump(by_alias=True), overrides)
        try:
            return MemorySettings.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(
                problems(exc, lambda _loc: source, MemorySettings, ("memory",))
            ) from None


def _merged(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; objects in both are merged, as the sources are."""
    merged = dict(base)
    for key, value in over.items():
        both = isinstance(value, Mapping) and isinstance(merged.get(key), dict)
        merged[key] = _merged(merged[key], value) if both else value
    return merged
