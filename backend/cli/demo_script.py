"""The demo's scripts: finding a persona's shipped script and scoring a probe's reply.
The format and its parser are ``backend.cli.conversation_script``. Nothing here talks to
the app."""

from __future__ import annotations

from pathlib import Path

from backend.cli.conversation_script import Probe


class DemoUsageError(ValueError):
    """No script to run (no persona, an unknown demo): the user's input is wrong."""


def demo_path(persona: str, dirs: list[Path]) -> Path:
    """The shipped script of ``persona``: ``<dir>/<persona>.json`` in the first dir that has it."""
    for directory in dirs:
        candidate = directory / f"{persona}.json"
        if candidate.is_file():
            return candidate
    shipped = sorted({p.stem for d in dirs if d.is_dir() for p in d.glob("*.json")})
    raise DemoUsageError(
        f"no demo script for persona {persona!r} (shipped: {', '.join(shipped) or 'none'}); "
        "pass one with --script FILE"
    )


def score(probe: Probe, reply: str) -> tuple[bool, list[str]]:
    """Whether ``reply`` contains any ``expects_any`` value, and the ``stale_any`` values it
    mentions (case-insensitively)."""
    low = reply.casefold()
    passed = any(e.casefold() in low for e in probe.expects_any)
    return passed, [s for s in probe.stale_any if s.casefold() in low]
