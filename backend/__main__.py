"""The ``limbic-memory`` command line: serve (default), chat, mcp."""

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

    chat = commands.add_parser("chat", help="chat in the terminal, in-process")
    chat.add_argument("-m", "--message", help="send one message and exit")
    chat.add_argument("--session", help="continue this session id")
    chat.add_argument("--persona", help="persona id (default: the configured default)")
    chat.add_argument("--user", default="local", help="user id (default: local)")
    chat.add_argument(
        "--report", action="store_true", help="print each turn's memory report as JSON"
    )

    mcp = commands.add_parser("mcp", help="serve the memory tools over MCP (stdio)")
    mcp.add_argument("--persona", help="persona id (default: the configured default)")
    mcp.add_argument("--user", default="local", help="user id (default: local)")
    return parser


def _load(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from backend.config import ConfigError, load_settings

    try:
        return load_settings(args.config)
    except ConfigError as exc:
        print(f"limbic-memory: invalid configuration:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from None


async def _chat(args: argparse.Namespace) -> int:
    from backend.engine.services import StartupError, build_services
    from backend.engine.turn import SessionConflict, TurnRequest
    from backend.llm.port import LLMError
    from backend.personas import UnknownPersona

    settings = _load(args)
    try:
        services = build_services(settings)
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
                turn = await services.engine.begin(request)
            except (SessionConflict, UnknownPersona) as exc:
                print(f"limbic-memory: {exc!r}", file=sys.stderr)
                return 2
            if session_id is None:
                print(f"(session {turn.session.id})", file=sys.stderr)
            session_id = turn.session.id
            try:
                async for chunk in turn.stream():
                    print(chunk, end="", flush=True)
                print()
            except LLMError as exc:
                print(f"\nlimbic-memory: the chat model failed: {exc}", file=sys.stderr)
            assert turn.merged is not None
            report = await turn.merged
            if args.report:
                print(json.dumps(report, ensure_ascii=False, indent=2))
            if args.message:
                break
    finally:
        await services.aclose()
    return 0


async def _mcp(args: argparse.Namespace) -> int:
    """The memory tools of one namespace over stdio (stdout is the protocol: log to stderr)."""
    from backend.engine.services import StartupError, build_services
    from backend.memory.types import Namespace
    from backend.personas import UnknownPersona
    from backend.web.mcp_server import serve_stdio

    settings = _load(args)
    try:
        services = build_services(settings)
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
        return asyncio.run(_chat(args))
    if command == "mcp":
        return asyncio.run(_mcp(args))
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
