"""How a call's options become llama-cpp-python ``create_chat_completion`` arguments.

The embedded adapter (``backend.llm.embedded_llama``) passes a client's ``Sampling``
through as llama.cpp's own sampling arguments, only the fields that are set, and caps a
JSON schema's string lengths before llama.cpp turns it into a grammar. Checked here, so
that a bad request fails as ``LLMBadRequest`` before any generation starts (docs/api.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.llm.port import LLMBadRequest, Sampling

# llama.cpp turns ``maxLength: n`` into n nested optional characters; at n = 1200 its
# sampler crashed (SIGSEGV, llama-cpp-python 0.3.36), at 300 it ran fine. Longer bounds
# are capped here; the caller's parser accepts what comes.
GRAMMAR_MAX_STRING_LENGTH = 300


def cap_string_lengths(schema: Any, cap: int) -> Any:
    """A copy of ``schema`` with every ``maxLength`` at most ``cap``."""
    if isinstance(schema, Mapping):
        out = {key: cap_string_lengths(value, cap) for key, value in schema.items()}
        if isinstance(out.get("maxLength"), int):
            out["maxLength"] = min(out["maxLength"], cap)
        return out
    if isinstance(schema, list):
        return [cap_string_lengths(item, cap) for item in schema]
    return schema


def sampling_arguments(sampling: Sampling | None, model: str = "") -> dict[str, Any]:
    """``create_chat_completion`` keyword arguments for a client's ``sampling``: only the
    fields it set (llama-cpp-python's defaults stay otherwise: top_p 0.95, top_k 40,
    min_p 0.05, no penalties, a seed drawn per call). ``logit_bias`` keys are OpenAI's
    token ids as strings and become ints; a key that is not a token id (not a
    non-negative integer) or a bias that is not a number → ``LLMBadRequest``. Ids past the
    vocabulary are checked once the model is loaded (``check_logit_bias``)."""
    if sampling is None:
        return {}
    arguments: dict[str, Any] = {}
    if sampling.stop:
        arguments["stop"] = list(sampling.stop)
    for name in ("seed", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty"):
        value = getattr(sampling, name)
        if value is not None:
            arguments[name] = value
    if sampling.logit_bias:
        bias: dict[int, float] = {}
        for key, value in sampling.logit_bias.items():
            text = str(key).strip()
            if not (text.isascii() and text.isdigit()):
                raise LLMBadRequest(
                    f"{model}: logit_bias key {str(key)[:40]!r} is not a token id "
                    "(a non-negative integer)",
                    model=model,
                )
            try:
                bias[int(text)] = float(value)
            except (TypeError, ValueError):
                raise LLMBadRequest(
                    f"{model}: logit_bias value for token {text} is not a number", model=model
                ) from None
        arguments["logit_bias"] = bias
    return arguments


def check_logit_bias(arguments: Mapping[str, Any], n_vocab: int, model: str = "") -> None:
    """A ``logit_bias`` token id must be in the model's vocabulary (llama-cpp-python would
    fail in the middle of sampling) → ``LLMBadRequest`` otherwise."""
    outside = sorted(t for t in arguments.get("logit_bias") or {} if t >= n_vocab)
    if outside:
        raise LLMBadRequest(
            f"{model}: logit_bias token id {outside[0]} is outside the vocabulary "
            f"(0 - {n_vocab - 1})",
            model=model,
        )
