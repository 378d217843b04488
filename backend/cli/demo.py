"""``limbic-memory demo``: replay a scripted multi-session chat and score its probes.

A script is a JSON list of sessions; a session is a list of turns
``{"role": "user"|"assistant", "content": str}``; user turns may carry
``"probe": {"expects_any": [str, ...], "topic": str?, "stale_any": [str, ...]?}``
(``backend.cli.conversation_script``, the format of ``bench/data/eval/conversations/``).
Only the user turns are sent; the assistant turns are reference text. Each session is a
new conversation through the OpenAI-compatible API (the app creates the session; its
``X-Session-Id`` carries the following turns), and every turn's memory merge is awaited
(``GET /api/sessions/{id}`` until it has one report per turn) before the next turn is
sent, so later sessions see what earlier ones planted. Probes are streamed with
intermediate steps, which gives the activated memories. A probe passes when its reply
contains any ``expects_any`` string (case-insensitively). The output ends with the line
``probes passed N/M``.

In-process (the default) the app is built from the config and served on a free loopback
port in a thread, with a fresh data directory (a temporary one unless ``--data-dir``)
and a fresh user (a one-off API key), so memory starts empty. Against ``--url`` the
server's store is used as is: the memories listed are only those this run's sessions
created.

The script's parser is ``backend.cli.conversation_script``; finding a persona's script
and scoring a probe, ``backend.cli.demo_script``; the HTTP replay,
``backend.cli.demo_replay``; the report, ``backend.cli.demo_report``; the in-process app,
``backend.cli.demo_app``; this module is the command.

Failure policy: a malformed script (``ScriptError``) or an unknown demo
(``DemoUsageError``) → exit 2; the app failing to start, an HTTP error, or a merge that
does not finish in time → ``DemoError`` (exit 1).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, TextIO

from backend.cli.conversation_script import ScriptError, load_script
from backend.cli.demo_app import describe_models, in_process_app
from backend.cli.demo_replay import DemoClient, DemoError, replay
from backend.cli.demo_report import render
from backend.cli.demo_script import DemoUsageError, demo_path


def run(
    *,
    persona: str | None,
    script_path: Path | None,
    url: str | None,
    api_key: str | None,
    data_dir: Path | None,
    merge_timeout: float,
    load_settings: Callable[[], Any] | None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``limbic-memory demo``: 0 when the replay ran (whatever the probes scored)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        settings = None if url else (load_settings() if load_settings else None)
        if script_path is None:
            if persona is None:
                raise DemoUsageError("give a PERSONA (its shipped demo) or --script FILE")
            # The shipped demos sit beside the personas (``server.personas_dir``), also
            # when the replay goes to a server given by URL.
            config = settings or (load_settings() if load_settings else None)
            if config is None:
                raise DemoUsageError("give --script FILE (no settings to find the demos)")
            script_path = demo_path(persona, [Path(config.server.personas_dir) / "demos"])
        script = load_script(script_path)
    except (DemoUsageError, ScriptError) as exc:
        print(f"limbic-memory demo: {exc}", file=err)
        return 2

    def progress(line: str) -> None:
        print(f"  {line}", file=err, flush=True)

    with suppress(ValueError):
        script_path = script_path.resolve().relative_to(Path.cwd())
    shown = persona or (settings.server.default_persona if settings else "(the server's default)")
    print(
        f"demo: persona {shown}, script {script_path} ({len(script.sessions)} sessions, "
        f"{len(script.turns)} user turns, {script.probes} probes)",
        file=out,
    )
    try:
        if url:
            print(f"app: {url}", file=out, flush=True)
            client = DemoClient(url, api_key, merge_timeout=merge_timeout)
            try:
                result = replay(client, script, persona, progress=progress)
            finally:
                client.close()
        else:
            assert settings is not None
            where = data_dir if data_dir is not None else "a temporary data dir"
            print(f"app: in-process ({where}, a fresh user)", file=out)
            print(f"models: {describe_models(settings)}", file=out, flush=True)
            with in_process_app(settings, data_dir) as (base_url, key):
                client = DemoClient(base_url, key, merge_timeout=merge_timeout)
                try:
                    result = replay(client, script, persona, progress=progress)
                finally:
                    client.close()
    except DemoError as exc:
        print(f"limbic-memory demo: {exc}", file=err)
        return 1
    render(result, out)
    out.flush()
    return 0
