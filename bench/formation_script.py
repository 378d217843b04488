"""The conversation scripts and oracle facts ``bench.memory_formation`` replays.

A script is in the conversation-script format (docs/demos.md), read by the one parser
``backend.cli.conversation_script``: user turns of the last session carry probes (the
format of the shared eval conversations). An oracle file (``bench/data/formation_oracle/``)
holds the hand-written ideal facts of each user turn. Bad input raises ``UsageError`` with
a message naming the file and the place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backend.cli import conversation_script
from backend.cli.conversation_script import Script, ScriptError

ORACLE_DIR = Path(__file__).resolve().parent / "data" / "formation_oracle"
OracleFacts = dict[tuple[int, int], list[dict[str, Any]]]
_FACT_KEYS = {"content", "category", "importance", "confidence", "subject", "keywords"}
_FACT_KEYS_OPTIONAL = {"supersedes", "emotion"}


class UsageError(ValueError):
    """Bad input (script, oracle, configuration, persona): exit status 2."""


def load_script(path: Path) -> Script:
    """The script at ``path``; a malformed one is the bench's ``UsageError`` (exit 2)."""
    try:
        return conversation_script.load_script(path)
    except ScriptError as exc:
        raise UsageError(str(exc)) from None


# --- the oracle --------------------------------------------------------------------------


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
