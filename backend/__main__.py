"""The ``limbic-memory`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="limbic-memory", description="A chat companion with a brain-inspired memory."
    )
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="start the web app (not built yet)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    command = args.command or "serve"
    if command == "serve":
        # The web app is not built yet; say so instead of pretending to serve.
        print(
            "limbic-memory: the web server is not part of this version yet; "
            "the memory engine is (see README.md).",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
