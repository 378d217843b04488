"""``limbic-memory doctor``: check a data directory's stores, and repair what can be rebuilt.

Checks (docs/reliability.md, "``limbic-memory doctor``"):

- the long-term store (``<data_dir>/chroma``, or the Chroma server at
  ``storage.chroma_url``): every record each namespace's collections list is read back
  as tolerant reads do (``ChromaVectorStore.scan_records``), with its vector; the ids
  whose vector or whole record cannot be read, and collections missing their partner;
- the outbox (``<data_dir>/outbox.sqlite3``): SQLite integrity, queued and parked
  writes, and that every entry decodes;
- the session database: SQLite ``PRAGMA integrity_check`` and the schema version, or, on
  PostgreSQL, a connection and the schema version;
- the embedding (``backend.cli.doctor_embedding``): which model made the store's vectors,
  and a re-embedding's progress after the embedder was changed;
- the reranker (``backend.cli.doctor_reranker``): whether the cross-encoder's files are
  installed and intact (a warning when not: the app ranks without it).

``--repair`` (embedded store): every readable record (text, metadata and the vector
where it reads) is copied into a fresh directory next to the store; records whose vector
cannot be read get a new one from the configured embedder (or are stored without one,
which the server's backfill completes later); the copy is read back and counted, then
swapped in, the old directory kept as ``chroma.broken-<UTC time>``. Nothing is deleted:
a record whose text cannot be read is reported by id and stays in that backup. With a
Chroma server, ``--repair`` re-embeds the unreadable vectors in place and says what it
cannot do (unreadable records). The outbox and the session database are only checked.

The data directory must not be in use: doctor takes its owner lock
(``backend.data_dir_lock``) and, if a server holds it, says so and checks nothing.

The checks are in ``backend.cli.doctor_checks``, the repair in
``backend.cli.doctor_repair``; this module is the command: the owner lock, the exit code
and the report.

Exit codes: 0 healthy (or fully repaired), 1 something needs repair (or a repair left
something behind), 2 something could not be checked.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from backend.cli.doctor_checks import (
    CANNOT_CHECK,
    NEEDS_REPAIR,
    Check,
    check_outbox,
    check_session_db,
    check_store,
    guarded,
)
from backend.cli.doctor_embedding import check_embedding
from backend.cli.doctor_repair import repair_store
from backend.cli.doctor_reranker import check_reranker
from backend.config import Settings

EXIT_OK = 0
EXIT_NEEDS_REPAIR = 1
EXIT_CANNOT_CHECK = 2


def run(
    settings: Settings, *, repair: bool = False, as_json: bool = False, out: TextIO = sys.stdout
) -> int:
    """Check (and with ``repair`` rebuild) the data directory of ``settings``; print the
    report (JSON with ``as_json``) to ``out``; return the exit code (module doc)."""
    data_dir = settings.storage.data_dir
    checks: list[Check] = []
    actions: list[str] = []
    busy = None
    local = settings.storage.chroma_url is None or settings.storage.database_url is None
    if local and not data_dir.is_dir():
        busy = f"there is no data directory at {data_dir}"
    lock = None
    if busy is None:
        lock, busy = _take_lock(settings)
    if busy is not None:
        checks.append(Check("data directory", CANNOT_CHECK, str(data_dir), [busy]))
    else:
        try:
            store = guarded("long-term store", check_store, settings)
            if repair and store.status == NEEDS_REPAIR:
                actions, store = repair_store(settings, store)
            checks += [
                store,
                guarded("outbox", check_outbox, settings),
                guarded("session database", check_session_db, settings),
                guarded("embedding", check_embedding, settings),
                guarded("reranker", check_reranker, settings),
            ]
        finally:
            if lock is not None:
                lock.release()
    code = _exit_code(checks, actions)
    _print(out, settings, checks, actions, code, repair=repair, as_json=as_json)
    return code


def _exit_code(checks: list[Check], actions: list[str]) -> int:
    statuses = {c.status for c in checks}
    if CANNOT_CHECK in statuses:
        return EXIT_CANNOT_CHECK
    if NEEDS_REPAIR in statuses or any(a.startswith("NOT ") for a in actions):
        return EXIT_NEEDS_REPAIR
    return EXIT_OK


def _take_lock(settings: Settings) -> tuple[Any, str | None]:
    """The data directory's owner lock, or why it cannot be had (a server runs)."""
    try:
        from backend.data_dir_lock import DataDirBusy, acquire_data_dir, needs_owner_lock
    except ImportError:  # pragma: no cover - a build without the owner lock
        return None, None
    if not needs_owner_lock(settings):
        return None, None
    try:
        return acquire_data_dir(settings.storage.data_dir, command="doctor"), None
    except DataDirBusy as exc:
        return None, f"{exc}. Its /healthz shows `needs_repair` when reads met broken records."
    except OSError as exc:
        return None, f"cannot lock the data directory {settings.storage.data_dir}: {exc}"


# --- the report ----------------------------------------------------------------------------------

_RESULT = {
    EXIT_OK: "healthy",
    EXIT_NEEDS_REPAIR: "needs repair",
    EXIT_CANNOT_CHECK: "could not check everything",
}


def _print(
    out: TextIO,
    settings: Settings,
    checks: list[Check],
    actions: list[str],
    code: int,
    *,
    repair: bool,
    as_json: bool,
) -> None:
    if as_json:
        report = {
            "data_dir": str(settings.storage.data_dir),
            "status": _RESULT[code],
            "exit_code": code,
            "checks": {c.name: c.as_dict() for c in checks},
            "repair": {"requested": repair, "actions": actions},
        }
        out.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        return
    write: Callable[[str], Any] = lambda line: out.write(line + "\n")  # noqa: E731
    write(f"limbic-memory doctor: {settings.storage.data_dir}")
    for check in checks:
        where = f" ({check.where})" if check.where else ""
        write(f"- {check.name}{where}: {check.status.replace('_', ' ')}")
        for line in check.lines:
            write(f"    {line}")
    if actions:
        write("repair:")
        for action in actions:
            write(f"    {action}")
    hint = ""
    if code == EXIT_NEEDS_REPAIR and not repair:
        hint = ": run `limbic-memory doctor --repair` with the server stopped"
    elif code == EXIT_NEEDS_REPAIR and actions:
        hint = ": repaired what could be; the lines marked NOT need a person"
    write(f"result: {_RESULT[code]} (exit {code}){hint}")
