"""The conversation scripts and oracle facts ``bench.memory_formation`` replays.

A script is a JSON list of sessions, each a list of ``{"role", "content"}`` turns; user
turns of the last session carry ``"probe": {"expects_any": [...], "topic": ...,
"stale_any": [...]}`` (the format of the shared eval conversations). An oracle file
(``bench/data/formation_oracle/``) holds the hand-written ideal facts of each user turn.
Bad input raises ``UsageError`` with a message naming the file and the place.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ORACLE_DIR = Path(__file__).resolve().parent / "data" / "formation_oracle"
OracleFacts = dict[tuple[int, int], list[dict[str, Any]]]
_FACT_KEYS = {"content", "category", "importance", "confidence", "subject", "keywords"}
_FACT_KEYS_OPTIONAL = {"supersedes", "emotion"}


class UsageError(ValueError):
    """Bad input (script, oracle, configuration, persona): exit status 2."""


# --- the script --------------------------------------------------------------------------


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
    reply: str | None
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
        return [turn for session in self.sessions for turn in session]


def _strings(value: Any, where: str, *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if (
        not isinstance(value, list)
        or not all(isinstance(v, str) and v.strip() for v in value)
        or (required and not value)
    ):
        need = "a non-empty list" if required else "a list"
        raise UsageError(f"{where}: must be {need} of non-empty strings")
    return tuple(value)


def _probe(value: Any, where: str) -> Probe:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: 'probe' must be an object with 'expects_any'")
    topic = value.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise UsageError(f"{where}: 'probe.topic' must be a string")
    return Probe(
        expects_any=_strings(
            value.get("expects_any"), f"{where}: probe.expects_any", required=True
        ),
        topic=topic,
        stale_any=_strings(value.get("stale_any"), f"{where}: probe.stale_any", required=False),
    )


def parse_script(data: Any, path: Path) -> Script:
    """Validate a parsed script; ``UsageError`` names the place of the first problem."""
    if not isinstance(data, list) or not data:
        raise UsageError(f"{path}: a script must be a non-empty JSON list of sessions")
    sessions: list[tuple[ScriptTurn, ...]] = []
    number = 0
    for s, session in enumerate(data):
        if not isinstance(session, list):
            raise UsageError(f"{path}: session {s}: must be a list of turns")
        turns: list[ScriptTurn] = []
        for t, turn in enumerate(session):
            where = f"{path}: session {s}, turn {t}"
            if not isinstance(turn, dict):
                raise UsageError(f"{where}: must be an object with 'role' and 'content'")
            role, content = turn.get("role"), turn.get("content")
            if role not in ("user", "assistant"):
                raise UsageError(f"{where}: 'role' must be 'user' or 'assistant', not {role!r}")
            if not isinstance(content, str) or not content.strip():
                raise UsageError(f"{where}: 'content' must be a non-empty string")
            if "probe" in turn and role != "user":
                raise UsageError(f"{where}: only user turns can carry a 'probe'")
            if role == "user":
                probe = _probe(turn["probe"], where) if "probe" in turn else None
                turns.append(ScriptTurn(s, len(turns), number, content, None, probe))
                number += 1
            elif turns and turns[-1].reply is None:
                turns[-1] = dataclasses.replace(turns[-1], reply=content)
            else:
                raise UsageError(f"{where}: an assistant turn must follow a user turn")
        if not turns:
            raise UsageError(f"{path}: session {s}: has no user turn")
        sessions.append(tuple(turns))
    script = Script(path, tuple(sessions))
    if not any(turn.probe for turn in script.turns):
        raise UsageError(f"{path}: no user turn carries a 'probe': nothing to score")
    return script


def load_script(path: Path) -> Script:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the script: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: the script is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path}: the script is not valid JSON: {exc}") from None
    return parse_script(data, path)


def load_oracle(path: Path, script: Script) -> OracleFacts:
    """The ideal facts of ``path``, checked against ``script`` (each entry's session and
    turn exist and the user message there starts with its ``user_starts``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the oracle: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: the oracle is not valid JSON: {exc}") from None
    entries = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise UsageError(f"{path}: an oracle is an object with a 'turns' list")
    facts: OracleFacts = {}
    for n, entry in enumerate(entries):
        where = f"{path}: turns[{n}]"
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: must be an object")
        s, t = entry.get("session"), entry.get("turn")
        if not isinstance(s, int) or not isinstance(t, int):
            raise UsageError(f"{where}: 'session' and 'turn' must be integers")
        if not (0 <= s < len(script.sessions) and 0 <= t < len(script.sessions[s])):
            raise UsageError(f"{where}: the script has no user turn {t} in session {s}")
        starts = entry.get("user_starts")
        text = script.sessions[s][t].text.strip()
        if isinstance(starts, str) and not text.startswith(starts.strip()):
            raise UsageError(
                f"{where}: session {s} turn {t} is {text[:40]!r}, the oracle expects "
                f"{starts!r}: the oracle does not belong to this script"
            )
        items = entry.get("long_term")
        if not isinstance(items, list):
            raise UsageError(f"{where}: 'long_term' must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not item.keys() >= _FACT_KEYS:
                raise UsageError(f"{where}: long_term[{i}] needs {sorted(_FACT_KEYS)}")
            unknown = item.keys() - _FACT_KEYS - _FACT_KEYS_OPTIONAL
            if unknown:
                raise UsageError(f"{where}: long_term[{i}]: unknown keys {sorted(unknown)}")
        if (s, t) in facts:
            raise UsageError(f"{where}: session {s} turn {t} appears twice")
        facts[(s, t)] = items
    return facts


def oracle_path(script: Script) -> Path:
    return ORACLE_DIR / f"{script.stem}.json"
