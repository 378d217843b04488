"""The demo's script (docs/demos.md, "The script format"): its JSON format, loading and
validating it, finding a persona's shipped script, and scoring a probe's reply. Nothing
here talks to the app."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class DemoUsageError(ValueError):
    """A bad script or an unknown demo: the user's input is wrong."""


@dataclass(frozen=True)
class Probe:
    expects_any: tuple[str, ...]
    topic: str | None = None
    stale_any: tuple[str, ...] = ()


@dataclass(frozen=True)
class UserTurn:
    content: str
    probe: Probe | None = None


@dataclass(frozen=True)
class Script:
    path: Path
    sessions: tuple[tuple[UserTurn, ...], ...]

    @property
    def turns(self) -> int:
        return sum(len(s) for s in self.sessions)

    @property
    def probes(self) -> int:
        return sum(1 for s in self.sessions for t in s if t.probe is not None)


def _strings(value: Any, where: str, *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if (
        not isinstance(value, list)
        or not all(isinstance(v, str) and v.strip() for v in value)
        or (required and not value)
    ):
        need = "a non-empty list" if required else "a list"
        raise DemoUsageError(f"{where}: must be {need} of non-empty strings")
    return tuple(value)


def _probe(value: Any, where: str) -> Probe:
    if not isinstance(value, dict):
        raise DemoUsageError(f"{where}: 'probe' must be an object with 'expects_any'")
    unknown = set(value) - {"expects_any", "topic", "stale_any"}
    if unknown:
        raise DemoUsageError(f"{where}: unknown probe key(s) {sorted(unknown)}")
    topic = value.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise DemoUsageError(f"{where}: 'probe.topic' must be a string")
    return Probe(
        expects_any=_strings(
            value.get("expects_any"), f"{where}: probe.expects_any", required=True
        ),
        topic=topic,
        stale_any=_strings(value.get("stale_any"), f"{where}: probe.stale_any", required=False),
    )


def parse_script(data: Any, path: Path) -> Script:
    """Validate ``data`` (a parsed script); raises ``DemoUsageError`` naming the place."""
    if not isinstance(data, list) or not data:
        raise DemoUsageError(f"{path}: a script must be a non-empty JSON list of sessions")
    sessions: list[tuple[UserTurn, ...]] = []
    for s, session in enumerate(data, 1):
        if not isinstance(session, list):
            raise DemoUsageError(f"{path}: session {s}: must be a list of turns")
        turns: list[UserTurn] = []
        for t, turn in enumerate(session, 1):
            where = f"{path}: session {s}, turn {t}"
            if not isinstance(turn, dict):
                raise DemoUsageError(f"{where}: must be an object with 'role' and 'content'")
            role, content = turn.get("role"), turn.get("content")
            if role not in ("user", "assistant"):
                raise DemoUsageError(f"{where}: 'role' must be 'user' or 'assistant', not {role!r}")
            if not isinstance(content, str) or not content.strip():
                raise DemoUsageError(f"{where}: 'content' must be a non-empty string")
            if "probe" in turn and role != "user":
                raise DemoUsageError(f"{where}: only user turns can carry a 'probe'")
            if role == "user":
                probe = _probe(turn["probe"], where) if "probe" in turn else None
                turns.append(UserTurn(content, probe))
        if not turns:
            raise DemoUsageError(f"{path}: session {s}: has no user turn")
        sessions.append(tuple(turns))
    script = Script(path, tuple(sessions))
    if script.probes == 0:
        raise DemoUsageError(f"{path}: no user turn carries a 'probe': nothing to score")
    return script


def load_script(path: Path) -> Script:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DemoUsageError(f"{path}: cannot read the script: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DemoUsageError(f"{path}: not valid JSON: {exc}") from None
    return parse_script(data, path)


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
    low = reply.casefold()
    passed = any(e.casefold() in low for e in probe.expects_any)
    return passed, [s for s in probe.stale_any if s.casefold() in low]
