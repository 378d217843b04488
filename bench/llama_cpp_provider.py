"""The app on llama-cpp-python's own OpenAI-compatible server, as a user sets it up
(issue 26): both roles pointed at one ``python -m llama_cpp.server`` with no ``json_mode``,
a short chat typed at a human pace, and what the user gets: when each reply starts, what
the hippocampus runs did, and the memories written.

    python -m bench.llama_cpp_provider [--preset qwen2.5-coder-1.5b] [--gap 5]

Prints one row per turn (time to the first token, reply time, the hippocampus status of
the turn's memory report, memories written), then the memories, the JSON mode the
client settled on and the health. The server is started from this venv on a free
loopback port with the preset's GGUF and ``--chat_format chatml``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from backend.engine.services import build_services
from backend.engine.turn_types import TurnRequest
from backend.llm import presets
from tests.engine.wiring import app_settings
from tests.llm.llama_cpp_server import llama_cpp_server

MESSAGES = (
    "hey, I'm Priya. long day.",
    "I'm a nurse on the night shift at St Mary's in Leeds, just got home",
    "my flatmate Tom made curry but I can't eat it, I'm allergic to peanuts",
    "my sister Anjali is expecting her first baby in March",
    "our pug Pixel snores like a tractor",
    "what should I cook tonight?",
)


async def chat(base_url: str, alias: str, gap: float) -> None:
    role = {"provider": "openai", "base_url": base_url, "model": alias, "timeout": 600}
    data_dir = Path(tempfile.mkdtemp(prefix="llama-cpp-provider-"))
    services = build_services(app_settings(data_dir, chat=role, hippocampus=role))
    session: str | None = None
    print(f"{'turn':>4} {'ttft_s':>7} {'reply_s':>8}  reply")
    try:
        for number, text in enumerate(MESSAGES, 1):
            started = time.perf_counter()
            first: float | None = None
            request = TurnRequest(user_id="bench", text=text, session_id=session)
            async with services.engine.turn(request) as turn:
                async for _ in turn.stream():
                    first = first or time.perf_counter() - started
            session = turn.session.id
            took = time.perf_counter() - started
            print(f"{number:>4} {first or 0:>7.2f} {took:>8.2f}  {turn.reply[:90]!r}")
            await asyncio.sleep(gap)
        await services.engine.drain()
        assert session is not None
        print("\nturn  hippocampus")
        for number, stored in enumerate(services.sessions.turn_reports(session), 1):
            info = stored.report.get("hippocampus", {})
            written = [w["content"] for w in stored.report.get("written", [])]
            retried = f" (retried: {info['retried']})" if info.get("retried") else ""
            print(
                f"{number:>4}  {info.get('status')} {info.get('mode')} "
                f"{info.get('ms', 0) / 1000:.1f} s{retried}; written {written}"
            )
        hippocampus = services.hippocampus
        print(f"\njson_mode: {getattr(hippocampus, 'json_mode', None)}")
        print(f"health: {services.engine.memory_health.report()}")
    finally:
        await services.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="qwen2.5-coder-1.5b")
    parser.add_argument("--gap", type=float, default=5.0, help="seconds between messages")
    args = parser.parse_args()
    model = presets.preset_path(args.preset)
    if model is None:
        raise SystemExit(f"preset {args.preset} is not installed")
    log = Path(tempfile.mkdtemp()) / "server.log"
    with llama_cpp_server(log, model=model, alias="qwen15") as base_url:
        asyncio.run(chat(base_url, "qwen15", args.gap))


if __name__ == "__main__":
    main()
