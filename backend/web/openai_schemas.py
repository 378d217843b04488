"""The OpenAI chat request's body: the Pydantic models ``/v1/chat/completions`` and
``/chat/stream`` validate it with (``backend.web.openai_api`` is the route).

Request fields take their JSON type only, as OpenAI's do; unknown fields are accepted
and ignored. The sampling fields become the chat model's ``Sampling``
(``ChatRequest.sampling``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from backend.llm.port import Sampling
from backend.storable_text import unstorable_reason

MAX_MESSAGES = 1000
MAX_STOPS = 16


# Strict: each field takes its JSON type only (``"stream": "yes"``, ``"1"`` or ``1`` for a
# boolean is a 400 naming the field, as OpenAI answers); an integer is still a number.
STRICT = ConfigDict(extra="allow", strict=True)


class ContentPart(BaseModel):
    model_config = STRICT
    type: str = "text"
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = STRICT
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = Field(None, max_length=256)

    @field_validator("content")
    @classmethod
    def _storable(cls, value: str | list[ContentPart] | None) -> str | list[ContentPart] | None:
        texts = [value] if isinstance(value, str) else [p.text or "" for p in value or ()]
        for text in texts:
            reason = unstorable_reason(text)
            if reason is not None:
                raise ValueError(f"the text {reason}")
        return value

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content if part.type == "text")
        return ""


class StreamOptions(BaseModel):
    model_config = STRICT
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The OpenAI chat request. The sampling parameters go to the chat model; other
    unknown parameters are accepted and ignored (``logprobs`` among them)."""

    model_config = STRICT
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=0)
    max_completion_tokens: int | None = Field(None, ge=0)
    n: int | None = Field(None, ge=1, le=128)
    # ``true``: the NeMo Agent Toolkit's request schema's placeholder, read as "not set".
    stop: str | list[str] | bool | None = None
    seed: int | None = None
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    user: str | None = Field(None, max_length=256)
    stream_options: StreamOptions | None = None
    additional_props: dict[str, Any] | None = None
    intermediate_steps: bool = False

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | bool | None) -> str | list[str] | bool | None:
        stops = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        if len(stops) > MAX_STOPS or any(not s or len(s) > 256 for s in stops):
            raise ValueError(f"stop takes at most {MAX_STOPS} non-empty strings of 256 characters")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _biases(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for token, bias in (value or {}).items():
            if not token.isdigit() or not -100 <= bias <= 100:
                raise ValueError("logit_bias maps token ids (digits) to biases in [-100, 100]")
        return value

    def sampling(self) -> Sampling | None:
        """The sampling parameters; placeholder zeros (``top_p``/``top_k`` 0, which the
        NeMo UI sends and no sampler can use) mean "not set"."""
        stop = self.stop
        stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
        sampling = Sampling(
            stop=tuple(stops),
            seed=self.seed,
            top_p=self.top_p or None,
            top_k=self.top_k or None,
            min_p=self.min_p,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            logit_bias=self.logit_bias or None,
        )
        return None if sampling.empty else sampling

    def wants_steps(self) -> bool:
        props = self.additional_props or {}
        return self.intermediate_steps or bool(props.get("enableIntermediateSteps"))
