"""``ChatModel`` adapter running a GGUF model in-process with llama-cpp-python.

The model file (a preset's, or one the user names), its checks and its loading are in
``backend.llm.llama_model``; how a call's options become llama.cpp's arguments in
``backend.llm.llama_arguments``. SmolLM2 generates about 80 tokens/s on a laptop CPU.

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
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, cast

from backend.llm.llama_arguments import (
    GRAMMAR_MAX_STRING_LENGTH,
    cap_string_lengths,
    check_logit_bias,
    sampling_arguments,
)
from backend.llm.llama_model import (
    CHATML_END,
    CHATML_TEMPLATE,
    DEFAULT_N_CTX,
    load_llama,
    resolve_model_file,
)
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
from backend.llm.read_ahead import read_prefix
from backend.llm.reply_first import ReplyFirst

logger = logging.getLogger(__name__)


# A tiny model repeats itself without a penalty; 1.2 keeps schema-constrained JSON from
# looping on one array item (measured with SmolLM2-135M on the hippocampus schema).
DEFAULT_REPEAT_PENALTY = 1.2
# Bounds a runaway generation (a 135M model may never emit EOS): ~13 s at 80 tokens/s.
DEFAULT_MAX_TOKENS = 1024
_END = object()


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
    ``llama_model.default_threads()``. A call's ``sampling`` goes to llama.cpp as its ``stop``,
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
        file = resolve_model_file(model_path, preset, model, chat_format)
        self._file = file
        self._preset = file.preset
        self._model = file.model
        self._path = file.path
        self._chat_format = file.chat_format
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
        # Generations waiting for the lock or running: a read-ahead gives way to them.
        self._wanted = 0
        self._wanted_lock = threading.Lock()
        self._read = {"prompt": 0, "ahead": 0}  # ``tokens_read``
        self._prefix_formatter: Any = None  # ChatML without the reply prompt (read-ahead)

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

    @property
    def tokens_read(self) -> dict[str, int]:
        """Prompt tokens evaluated since load: by generations before their first token
        (``"prompt"``: what the cache lacked) and between turns (``"ahead"``). For benches
        that explain a time to the first token."""
        return dict(self._read)

    def token_ids(self, text: str) -> list[int] | None:
        """``text``'s token ids in this model's vocabulary, no BOS (``Tokenizing``), or None
        before the model is loaded. Reads only the vocabulary, which a running generation
        does not change, so it takes no lock."""
        llama = self._llama
        if llama is None:
            return None
        return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    async def read_ahead(self, messages: Sequence[Message]) -> int:
        """Evaluate ``messages`` (the start of the next prompt, no reply prompt after them)
        into the prompt cache between turns (``ReadAhead``, ``backend.llm.read_ahead``);
        the tokens read. Gives way to any generation: none starts while one runs or
        waits, and one that comes stops it within a chunk. Only with the ChatML template
        this adapter renders itself (the Qwen presets): for another template the prefix
        of a prompt is not known, and nothing is read."""
        wire = [dict(m) for m in messages]
        return await asyncio.to_thread(self._read_ahead, wire)

    def _read_ahead(self, messages: list[dict[str, Any]]) -> int:
        if self._chat_format != "chatml" or self._wanted:
            return 0
        if not self._lock.acquire(blocking=False):  # a generation runs: its prompt is newer
            return 0
        try:
            llama = self._llama
            if llama is None:  # not loaded: warming up is ``prime``'s job
                return 0
            if self._prefix_formatter is None:  # compiled once: the template never changes
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                self._prefix_formatter = Jinja2ChatFormatter(
                    CHATML_TEMPLATE, eos_token=CHATML_END, bos_token="", add_generation_prompt=False
                )
            prompt = self._prefix_formatter(messages=messages).prompt
            # As llama-cpp-python's chat handler tokenizes a formatter's prompt.
            tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            started = time.perf_counter()
            read = read_prefix(llama, tokens, lambda: self._wanted > 0)
            self._read["ahead"] += read
            logger.debug(
                "%s: read ahead %d of %d tokens in %.2f s",
                self._model,
                read,
                len(tokens),
                time.perf_counter() - started,
            )
            return read
        finally:
            self._lock.release()

    async def aclose(self) -> None:
        """Drop the model (it is reloaded if used again); waits for a running generation."""

        def close_locked() -> None:
            with self._wanting(), self._lock:  # a read-ahead stops at its next chunk
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
            with self._wanting(), self._lock:
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

    @contextmanager
    def _wanting(self) -> Iterator[None]:
        """Counts a generation from before it waits for the lock until it ends."""
        with self._wanted_lock:
            self._wanted += 1
        try:
            yield
        finally:
            with self._wanted_lock:
                self._wanted -= 1

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

    def _count_prompt(self, tokens: int) -> None:
        self._read["prompt"] += tokens

    def _ensure_loaded(self) -> Any:
        """The ``Llama`` object, loaded on first use. Call with ``self._lock`` held."""
        if self._llama is not None:
            return self._llama
        started = time.perf_counter()
        self._llama = load_llama(
            self._file,
            n_ctx=self._n_ctx,
            n_threads=self._n_threads,
            taking_turns=self._reply_first is not None,
            background=self._background,
            seed=self._seed,
            on_prompt=self._count_prompt,
        )
        self._yield_to_replies(self._llama)
        logger.info("%s: loaded in %.2f s", self._model, time.perf_counter() - started)
        return self._llama

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
