"""The conversation-script format (docs/demos.md, "The script format"): the one parser
``limbic-memory demo`` and the benches (``bench.formation_script``) read scripts with.

A script is a JSON list of sessions; a session is a list of turns ``{"role":
"user"|"assistant", "content": str}``. A user turn may carry ``"probe": {"expects_any":
[str, ...], "topic": str?, "stale_any": [str, ...]?}``; an assistant turn is the scripted
reply to the user turn just before it. At least one user turn carries a probe.

Failure policy: a malformed script raises ``ScriptError``, whose message names the file,
and the session and turn at fault counted from 1 as a person reads the file. Pure apart
from ``load_script`` reading the file.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROBE_KEYS = frozenset({"expects_any", "topic", "stale_any"})


class ScriptError(ValueError):
    """A script that cannot be read or does not follow the format."""


@dataclass(frozen=True, slots=True)
class Probe:
    expects_any: tuple[str, ...]
    topic: str | None = None
    stale_any: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScriptTurn:
    """One user turn: ``session`` and ``index`` (within the session) from 0, ``number``
    its position in the whole script; ``reply`` the scripted assistant turn after it."""

    session: int
    index: int
    number: int
    text: str
    reply: str | None = None
    probe: Probe | None = None


@dataclass(frozen=True)
class Script:
    path: Path
    sessions: tuple[tuple[ScriptTurn, ...], ...]

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def turns(self) -> list[ScriptTurn]:
        """Every user turn, in order."""
        return [turn for session in self.sessions for turn in session]

    @property
    def probes(self) -> int:
        return sum(1 for turn in self.turns if turn.probe is not None)


def _strings(value: Any, where: str, *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if (
        not isinstance(value, list)
        or not all(isinstance(v, str) and v.strip() for v in value)
        or (required and not value)
    ):
        need = "a non-empty list" if required else "a list"
        raise ScriptError(f"{where}: must be {need} of non-empty strings")
    return tuple(value)


def _probe(value: Any, where: str) -> Probe:
    if not isinstance(value, dict):
        raise ScriptError(f"{where}: 'probe' must be an object with 'expects_any'")
    unknown = set(value) - PROBE_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown probe key(s) {sorted(unknown)}")
    topic = value.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise ScriptError(f"{where}: 'probe.topic' must be a string")
    return Probe(
        expects_any=_strings(
            value.get("expects_any"), f"{where}: probe.expects_any", required=True
        ),
        topic=topic,
        stale_any=_strings(value.get("stale_any"), f"{where}: probe.stale_any", required=False),
    )


def parse_script(data: Any, path: Path) -> Script:
    """Validate ``data`` (a parsed script); ``ScriptError`` names the first problem's place."""
    if not isinstance(data, list) or not data:
        raise ScriptError(f"{path}: a script must be a non-empty JSON list of sessions")
    sessions: list[tuple[ScriptTurn, ...]] = []
    number = 0
    for s, session in enumerate(data):
        if not isinstance(session, list):
            raise ScriptError(f"{path}: session {s + 1}: must be a list of turns")
        turns: list[ScriptTurn] = []
        for t, turn in enumerate(session):
            where = f"{path}: session {s + 1}, turn {t + 1}"
            if not isinstance(turn, dict):
                raise ScriptError(f"{where}: must be an object with 'role' and 'content'")
            role, content = turn.get("role"), turn.get("content")
            if role not in ("user", "assistant"):
                raise ScriptError(f"{where}: 'role' must be 'user' or 'assistant', not {role!r}")
            if not isinstance(content, str) or not content.strip():
                raise ScriptError(f"{where}: 'content' must be a non-empty string")
            if "probe" in turn and role != "user":
                raise ScriptError(f"{where}: only user turns can carry a 'probe'")
            if role == "user":
                probe = _probe(turn["probe"], where) if "probe" in turn else None
                turns.append(ScriptTurn(s, len(turns), number, content, None, probe))
                number += 1
            elif turns and turns[-1].reply is None:
                turns[-1] = dataclasses.replace(turns[-1], reply=content)
            else:
                raise ScriptError(f"{where}: an assistant turn must follow a user turn")
        if not turns:
            raise ScriptError(f"{path}: session {s + 1}: has no user turn")
        sessions.append(tuple(turns))
    script = Script(path, tuple(sessions))
    if script.probes == 0:
        raise ScriptError(f"{path}: no user turn carries a 'probe': nothing to score")
    return script


def load_script(path: Path) -> Script:
    """Read and validate the script at ``path``; ``ScriptError`` on any problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read the script: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ScriptError(f"{path}: the script is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ScriptError(f"{path}: the script is not valid JSON: {exc}") from None
    return parse_script(data, path)
