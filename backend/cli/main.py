"""The ``limbic-memory`` command line: serve (default), chat, demo, mcp, personas, doctor.

One process owns an embedded data directory (``backend.data_dir_lock``): while a server
owns it, ``chat``, ``mcp``, ``personas import`` and ``demo --data-dir`` go through that
server's HTTP API (``backend.cli.remote``); while another CLI command owns it, they stop
with a message that names it (exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="limbic-memory", description="A chat companion with a brain-inspired memory."
    )
    parser.add_argument(
        "--config", type=Path, help="config file (default: config.json or LM_CONFIG)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="start the web app")

    chat = commands.add_parser(
        "chat", help="chat in the terminal (in-process, or through the server that runs)"
    )
    chat.add_argument("-m", "--message", help="send one message and exit")
    chat.add_argument("--session", help="continue this session id")
    chat.add_argument("--persona", help="persona id (default: the configured default)")
    chat.add_argument("--user", default="local", help="user id (default: local)")
    chat.add_argument(
        "--report", action="store_true", help="print each turn's memory report as JSON"
    )

    demo = commands.add_parser(
        "demo", help="replay a scripted multi-session chat and score its memory probes"
    )
    demo.add_argument("persona", nargs="?", help="persona (its shipped demo script)")
    demo.add_argument("--script", type=Path, help="a conversation file (shared eval format)")
    demo.add_argument("--url", help="run against this server instead of in-process")
    demo.add_argument("--api-key", help="API key for --url")
    demo.add_argument(
        "--data-dir", type=Path, help="in-process data dir (default: a temporary one)"
    )
    demo.add_argument(
        "--merge-timeout",
        type=float,
        default=600.0,
        help="seconds to wait for one turn's reply or memory merge (default 600)",
    )

    mcp = commands.add_parser("mcp", help="serve the memory tools over MCP (stdio)")
    mcp.add_argument("--persona", help="persona id (default: the configured default)")
    mcp.add_argument("--user", default="local", help="user id (default: local)")

    personas = commands.add_parser("personas", help="list the installed personas")
    persona_commands = personas.add_subparsers(dest="personas_command")
    importer = persona_commands.add_parser(
        "import", help="import a SillyTavern character card (JSON or PNG) as a persona"
    )
    importer.add_argument("file", type=Path, help="the card: a .json or .png file")
    importer.add_argument(
        "--overwrite", action="store_true", help="replace a persona with the same id"
    )
    importer.add_argument("--id", dest="persona_id", help="the persona id (default: from the name)")

    doctor = commands.add_parser(
        "doctor", help="check the data directory's stores (docs/reliability.md)"
    )
    doctor.add_argument("--repair", action="store_true", help="repair what can be repaired")
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    return parser


def _server_url(settings, command: str) -> str | int | None:  # type: ignore[no-untyped-def]
    """The URL of the server that owns the data directory (use its API), None (open the
    store in-process), or 1 when another CLI process owns it (the message printed)."""
    from backend.cli.remote import owner_url
    from backend.data_dir_lock import DataDirBusy

    try:
        url = owner_url(settings, err=sys.stderr)
    except DataDirBusy as exc:
        print(f"limbic-memory {command}: {exc}", file=sys.stderr)
        return 1
    if url is not None:
        print(
            f"limbic-memory {command}: the data directory {settings.storage.data_dir} is "
            f"owned by the server at {url}: using its API",
            file=sys.stderr,
        )
    return url


def _personas(args: argparse.Namespace) -> int:
    from backend.persona_import import CardImportError, import_card
    from backend.personas import PersonaError, load_personas

    settings = _load(args)
    directory = Path(settings.server.personas_dir)
    if getattr(args, "personas_command", None) == "import":
        try:
            data = args.file.read_bytes()
        except OSError as exc:
            print(f"limbic-memory: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
            return 1
        remote = _persona_server(settings, args)
        if remote is not None:
            from backend.cli.remote import import_persona

            return import_persona(remote, settings, args.file, data, overwrite=args.overwrite)
        try:
            persona = import_card(
                data,
                directory,
                str(args.file),
                persona_id=args.persona_id,
                overwrite=args.overwrite,
                base_memory=settings.memory,
            )
        except CardImportError as exc:
            print(f"limbic-memory: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"limbic-memory: cannot write to {directory}: {exc}", file=sys.stderr)
            return 1
        print(f"imported {persona.id} ({persona.name}) into {directory / (persona.id + '.json')}")
        return 0
    try:
        personas = load_personas(directory, settings.memory)
    except PersonaError as exc:
        print(f"limbic-memory: {exc}", file=sys.stderr)
        return 1
    default = settings.server.default_persona
    rows = [("ID", "NAME", "LANGUAGE")] + [
        (p.id + (" *" if p.id == default else ""), p.name, p.language) for p in personas.values()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}".rstrip())
    return 0


def _persona_server(settings, args: argparse.Namespace) -> str | None:  # type: ignore[no-untyped-def]
    """The running server to import a card through, so that it serves the persona at once.
    None: write the card here (no server; or ``--id``, which the server's import does not
    take: it serves the persona after a restart). Importing opens no store, so a CLI
    process owning the data directory does not stop it."""
    from backend.cli.remote import owner_url
    from backend.data_dir_lock import DataDirBusy

    try:
        url = owner_url(settings, err=sys.stderr)
    except DataDirBusy:
        return None
    if url is not None and args.persona_id is not None:
        print(
            f"limbic-memory: the server at {url} derives a persona's id from its name, so "
            f"--id writes the card here; the server serves it after a restart",
            file=sys.stderr,
        )
        return None
    return url


def _load(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from backend.config import ConfigError, load_settings

    try:
        return load_settings(args.config)
    except ConfigError as exc:
        print(f"limbic-memory: invalid configuration:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _chat_command(args: argparse.Namespace) -> int:
    settings = _load(args)
    url = _server_url(settings, "chat")
    if isinstance(url, int):
        return url
    if url is not None:
        from backend.cli.remote_chat import chat

        return chat(
            url,
            settings,
            message=args.message,
            session=args.session,
            persona=args.persona,
            user=args.user,
            report=args.report,
        )
    return asyncio.run(_chat(args, settings))


async def _chat(args: argparse.Namespace, settings) -> int:  # type: ignore[no-untyped-def]
    from backend.engine.services import StartupError, build_services
    from backend.engine.turn import SessionConflict, TurnRequest
    from backend.llm.port import LLMError
    from backend.personas import UnknownPersona

    try:
        services = build_services(settings, command="chat")
    except StartupError as exc:
        print(f"limbic-memory: {exc}", file=sys.stderr)
        return 1
    session_id: str | None = args.session
    try:
        if not args.message:
            persona = services.personas.resolve(args.persona)
            print(f"[{persona.name}] {persona.greeting}\n(Ctrl-D to quit)", file=sys.stderr)
        while True:
            if args.message:
                text = args.message
            else:
                try:
                    text = input("you> ")
                except EOFError:
                    print(file=sys.stderr)
                    break
                if not text.strip():
                    continue
            request = TurnRequest(
                user_id=args.user, text=text, persona_id=args.persona, session_id=session_id
            )
            try:
                async with services.engine.turn(request) as turn:  # the turn's lifetime
                    if session_id is None:
                        print(f"(session {turn.session.id})", file=sys.stderr)
                    session_id = turn.session.id
                    try:
                        async for chunk in turn.stream():
                            print(chunk, end="", flush=True)
                        print()
                    except LLMError as exc:
                        print(f"\nlimbic-memory: the chat model failed: {exc}", file=sys.stderr)
            except (SessionConflict, UnknownPersona) as exc:  # raised on entering: nothing ran
                print(f"limbic-memory: {exc!r}", file=sys.stderr)
                return 2
            assert turn.merged is not None
            report = await turn.merged
            if args.report:
                print(json.dumps(report, ensure_ascii=False, indent=2))
            if args.message:
                break
    finally:
        await services.aclose()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from backend.cli.demo import run

    url, api_key, data_dir = args.url, args.api_key, args.data_dir
    if url is None and data_dir is not None:
        settings = _load(args)
        storage = settings.storage.model_copy(update={"data_dir": data_dir.resolve()})
        owned = _server_url(settings.model_copy(update={"storage": storage}), "demo")
        if isinstance(owned, int):
            return owned
        if owned is not None:  # as --url: the demo's turns go to that server's user
            url, data_dir = owned, None
            keys = settings.server.api_keys
            if api_key is None and keys:
                api_key = next(iter(keys))
    return run(
        persona=args.persona,
        script_path=args.script,
        url=url,
        api_key=api_key,
        data_dir=data_dir,
        merge_timeout=args.merge_timeout,
        load_settings=lambda: _load(args),
    )


def _mcp_command(args: argparse.Namespace) -> int:
    """The memory tools of one namespace over stdio (stdout is the protocol: log to stderr);
    through the server's /mcp when a server owns the data directory."""
    settings = _load(args)
    url = _server_url(settings, "mcp")
    if isinstance(url, int):
        return url
    if url is None:
        return asyncio.run(_mcp(args, settings))
    from backend.cli.remote_http import RemoteError, auth_headers
    from backend.cli.remote_mcp import check_persona, mcp_relay

    try:
        headers = auth_headers(settings, args.user)
        check_persona(url, headers, args.persona)
    except RemoteError as exc:
        print(f"limbic-memory: {exc}", file=sys.stderr)
        return exc.code
    return mcp_relay(url, headers, args.persona)


async def _mcp(args: argparse.Namespace, settings) -> int:  # type: ignore[no-untyped-def]
    from backend.engine.services import StartupError, build_services
    from backend.memory.types import Namespace
    from backend.personas import UnknownPersona
    from backend.web.mcp_server import serve_stdio

    try:
        services = build_services(settings, command="mcp")
    except StartupError as exc:
        print(f"limbic-memory: {exc}", file=sys.stderr)
        return 1
    try:
        persona = services.personas.resolve(args.persona)
    except UnknownPersona:
        print(f"limbic-memory: unknown persona {args.persona!r}", file=sys.stderr)
        await services.aclose()
        return 2
    try:
        await serve_stdio(services.long_term, Namespace(args.user, persona.id))
    finally:
        await services.aclose()
    return 0


def _doctor(args: argparse.Namespace) -> int:
    try:
        from backend.cli.doctor import run
    except ImportError:
        print("limbic-memory: `doctor` is not part of this version", file=sys.stderr)
        return 2
    return run(_load(args), repair=args.repair, as_json=args.json)


def _serve(args: argparse.Namespace) -> int:
    try:
        from backend.web.server import serve
    except ImportError:
        print(
            "limbic-memory: the web server is not part of this version yet; use "
            "`limbic-memory chat` to talk to the companion in the terminal.",
            file=sys.stderr,
        )
        return 2
    return serve(_load(args))


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    command = args.command or "serve"
    if command == "chat":
        return _chat_command(args)
    if command == "demo":
        return _demo(args)
    if command == "mcp":
        return _mcp_command(args)
    if command == "personas":
        return _personas(args)
    if command == "doctor":
        return _doctor(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
