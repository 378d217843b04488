"""How fast the embedded chat model reads and writes, alone and beside the hippocampus's.

    python -m bench.model_speed [--chat qwen2.5-coder-1.5b] [--beside qwen2.5-coder-0.5b]
                                [--repeat 2] [--tokens 80]

A check of the machine, not of the app: before reading a slow long session as the
app's, see whether the host gives the model its cores. The chat preset's GGUF is loaded
with llama-cpp-python as the app loads it when both roles take turns (every core, the
same context size), then a ~350-token prompt is read from nothing and ``--tokens`` are
generated, ``--repeat`` times, in three settings:

- ``alone``: the chat model is the only one loaded;
- ``beside, idle``: the ``--beside`` preset is loaded too and does nothing;
- ``beside, busy``: the ``--beside`` preset generates without pause in another thread
  (what the app's ``ReplyFirst`` prevents: the two share the cores).

Prints a Markdown table: prompt tokens read per second and tokens generated per second
(the best of the repeats), then the command line and the machine. Exit status 1 when a
preset is not installed (``./install.sh --model NAME``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from backend.llm import presets
from backend.llm.llama_model import DEFAULT_N_CTX, load_llama, resolve_model_file
from backend.llm.port import LLMUnavailable

PROMPT = (
    "<|im_start|>system\nYou are a warm companion.<|im_end|>\n<|im_start|>user\n"
    + "I had a long day at work and my cat knocked over a plant. " * 20
    + "Tell me a story about it.<|im_end|>\n<|im_start|>assistant\n"
)


def _load(name: str, *, background: bool) -> Any:
    """The preset loaded by the app's own loader, as when the two roles take turns."""
    file = resolve_model_file(None, name, None, None)
    return load_llama(
        file, n_ctx=DEFAULT_N_CTX, n_threads=None, taking_turns=True,
        background=background, seed=None,
    )  # fmt: skip


def _measure(chat: Any, tokens: int, repeat: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s), the best of ``repeat`` runs."""
    prompt_tokens = len(chat.tokenize(PROMPT.encode()))
    best_read, best_write = 0.0, 0.0
    for _ in range(repeat):
        chat.reset()  # read the prompt from nothing every time
        started, first, count = time.perf_counter(), None, 0
        for _chunk in chat.create_completion(PROMPT, max_tokens=tokens, stream=True, seed=1):
            count += 1
            if first is None:
                first = time.perf_counter()
        ended = time.perf_counter()
        if first is None or count < 2:
            continue
        best_read = max(best_read, prompt_tokens / (first - started))
        best_write = max(best_write, (count - 1) / (ended - first))
    return best_read, best_write


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.model_speed", description=__doc__)
    parser.add_argument("--chat", default="qwen2.5-coder-1.5b")
    parser.add_argument("--beside", default="qwen2.5-coder-0.5b")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=80)
    args = parser.parse_args(argv)
    try:
        chat = _load(args.chat, background=False)
    except (ValueError, presets.PresetError, LLMUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = [("alone", *_measure(chat, args.tokens, args.repeat))]
    try:
        other = _load(args.beside, background=True)
    except (ValueError, presets.PresetError, LLMUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows.append(("beside, idle", *_measure(chat, args.tokens, args.repeat)))
    stop = threading.Event()

    def generate() -> None:
        while not stop.is_set():
            for _chunk in other.create_completion(
                "Summarise: " + "tea. " * 50, max_tokens=200, stream=True
            ):
                if stop.is_set():
                    break

    worker = threading.Thread(target=generate, daemon=True)
    worker.start()
    time.sleep(1.0)
    rows.append(("beside, busy", *_measure(chat, args.tokens, args.repeat)))
    stop.set()
    worker.join()
    print(f"| {args.chat} | prompt tokens/s | generated tokens/s |")
    print("|---|---:|---:|")
    for label, read, write in rows:
        print(f"| {label} | {read:.0f} | {write:.1f} |")
    print()
    print("command: python -m bench.model_speed " + " ".join(argv or sys.argv[1:]))
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {platform.machine()}, nproc {os.cpu_count()}, load average {load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
