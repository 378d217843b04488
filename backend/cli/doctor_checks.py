"""What ``limbic-memory doctor`` checks (docs/reliability.md, "``limbic-memory doctor``"):
the findings of one store (``Check``), and the checks of the long-term store, the outbox
and the session database. Read-only: the repair is ``backend.cli.doctor_repair``, the
command and its report ``backend.cli.doctor``."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from backend.config import Settings
from backend.memory.types import Namespace

if TYPE_CHECKING:
    from backend.stores.chroma_scan import RecordScan
    from backend.stores.chroma_store import ChromaVectorStore

log = logging.getLogger(__name__)

OK = "ok"
WARNING = "warning"  # worth a look, nothing to repair (parked outbox writes)
NEEDS_REPAIR = "needs_repair"
CANNOT_CHECK = "cannot_check"

STORE_DIR = "chroma"
OUTBOX_FILE = "outbox.sqlite3"
SHOWN_IDS = 10  # ids listed per line in the text report (JSON has them all)


@dataclass
class Check:
    """One store's findings."""

    name: str
    status: str = OK
    where: str = ""
    lines: list[str] = field(default_factory=list)  # the text report
    details: dict[str, Any] = field(default_factory=dict)  # the JSON report

    def problem(self, line: str, status: str = NEEDS_REPAIR) -> None:
        rank = (OK, WARNING, NEEDS_REPAIR, CANNOT_CHECK)
        if rank.index(status) > rank.index(self.status):
            self.status = status
        self.lines.append(line)

    def as_dict(self) -> dict[str, Any]:
        notes = [line.strip() for line in self.lines]
        return {"status": self.status, "where": self.where, **self.details, "notes": notes}


def guarded(name: str, check: Callable[[Settings], Check], settings: Settings) -> Check:
    """Run one check; an unexpected failure makes it "cannot check", not a traceback."""
    try:
        return check(settings)
    except Exception as exc:
        log.exception("doctor: the %s check failed", name)
        return Check(name, CANNOT_CHECK, lines=[f"the check failed: {type(exc).__name__}: {exc}"])


# --- the long-term store ---------------------------------------------------------------------


def shown(ids: list[str]) -> str:
    more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    return ", ".join(ids[:SHOWN_IDS]) + more


def open_store(settings: Settings) -> tuple[ChromaVectorStore | None, str]:
    """The store to check and where it is; ``None`` when there is no local store yet."""
    from backend.stores.chroma_store import ChromaVectorStore

    url = settings.storage.chroma_url
    if url:
        parts = urlsplit(url)
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 8000)
        where = f"{parts.scheme}://{parts.hostname}:{port}"
        return ChromaVectorStore.http(parts.hostname or "127.0.0.1", port, ssl=https), where
    path = settings.storage.data_dir / STORE_DIR
    if not (path / "chroma.sqlite3").is_file():
        return None, str(path)
    return ChromaVectorStore.persistent(path), str(path)


@contextmanager
def opened(store: ChromaVectorStore) -> Iterator[ChromaVectorStore]:
    try:
        yield store
    finally:
        store.close()


def check_store(settings: Settings) -> Check:
    from backend.stores.vector_port import VectorStoreUnavailable

    check = Check("long-term store")
    check.details["kind"] = "server" if settings.storage.chroma_url else "embedded"
    try:
        store, check.where = open_store(settings)
    except VectorStoreUnavailable as exc:
        check.problem(f"cannot open it: {exc}", CANNOT_CHECK)
        return check
    if store is None:
        check.lines.append("no store yet (nothing was ever remembered here)")
        check.details["namespaces"] = []
        return check
    try:
        with opened(store):
            _audit(store, check)
    except VectorStoreUnavailable as exc:
        check.problem(f"cannot read it: {exc}", CANNOT_CHECK)
    if not settings.storage.chroma_url:
        backups = sorted(p.name for p in settings.storage.data_dir.glob(f"{STORE_DIR}.broken-*"))
        if backups:
            check.details["backups"] = backups
            check.lines.append(
                f"backups of earlier repairs (delete when no longer needed): {', '.join(backups)}"
            )
    return check


def _audit(store: ChromaVectorStore, check: Check) -> None:
    collections = store.collections()
    others = [name for name, ns in collections if ns is None]
    found = sorted({ns for _, ns in collections if ns is not None}, key=lambda n: n.key)
    namespaces = []
    for ns in found:
        scan = store.scan_records(ns)
        namespaces.append(_scan_dict(scan))
        check.lines.append(
            f"{ns.persona_id} (user {ns.user_id}): {scan.read} memories, "
            f"{scan.with_vector} with a vector, {scan.without_vector} waiting for one"
        )
        if scan.vector_unreadable:
            check.problem(
                f"  {len(scan.vector_unreadable)} with a vector that cannot be read "
                f"(the text reads; --repair re-embeds it): {shown(scan.vector_unreadable)}"
            )
        if scan.unreadable:
            check.problem(
                f"  {len(scan.unreadable)} listed by the index but unreadable (no text to "
                f"copy; --repair keeps them in the backup): {shown(scan.unreadable)}"
            )
        if scan.missing_collections:
            check.problem(f"  missing collection(s): {', '.join(scan.missing_collections)}")
    check.details["namespaces"] = namespaces
    check.details["other_collections"] = others
    if not found:
        check.lines.append("no memories yet")
    if others:
        check.lines.append(
            f"collections that are not limbic-memory's (left alone): {', '.join(others)}"
        )


def _scan_dict(scan: RecordScan) -> dict[str, Any]:
    return {
        "user_id": scan.namespace.user_id,
        "persona_id": scan.namespace.persona_id,
        "listed": scan.listed,
        "memories": scan.read,
        "with_vector": scan.with_vector,
        "without_vector": scan.without_vector,
        "vector_unreadable": scan.vector_unreadable,
        "unreadable": scan.unreadable,
        "missing_collections": scan.missing_collections,
    }


# --- the outbox and the session database -----------------------------------------------------


def _sqlite(path: Path) -> sqlite3.Connection:
    """An existing SQLite file, opened without creating anything."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5)


def _integrity(conn: sqlite3.Connection) -> list[str]:
    rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
    return [] if rows == ["ok"] else rows


def check_outbox(settings: Settings) -> Check:
    from backend.longterm.outbox import decode

    path = settings.storage.data_dir / OUTBOX_FILE
    check = Check("outbox", where=str(path))
    if not path.is_file():
        check.lines.append("no outbox file: nothing was ever queued")
        check.details.update(queued=0, parked=0, unreadable=[])
        return check
    try:
        conn = _sqlite(path)
        try:
            broken = _integrity(conn)
            rows = conn.execute(
                "SELECT id, user_id, persona_id, payload, done, dead, queued_at FROM pending_writes"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        check.problem(f"cannot read it: {exc}", CANNOT_CHECK)
        return check
    queued = parked = entries = 0
    unreadable: list[str] = []
    for entry_id, user, persona, payload, done, dead, queued_at in rows:
        try:
            write = decode(Namespace(user, persona), payload, queued_at)
        except Exception:
            unreadable.append(str(entry_id))
            continue
        if dead:
            parked += 1
        else:
            entries += 1
            queued += max(0, len(write.candidates) - int(done))
    check.details.update(
        queued=queued, queued_entries=entries, parked=parked, unreadable=unreadable
    )
    if broken:
        check.problem(f"SQLite integrity check failed: {'; '.join(broken[:5])}")
    if unreadable:
        check.problem(f"{len(unreadable)} entries cannot be decoded (ids {shown(unreadable)})")
    check.lines.append(
        f"{queued} memories queued in {entries} writes (replayed when the server starts)"
        if queued
        else "nothing queued"
    )
    if parked:
        check.problem(f"{parked} writes parked after repeated failures (see the log)", WARNING)
    return check


def check_session_db(settings: Settings) -> Check:
    from backend.sessions.schema import SCHEMA_VERSION

    url = settings.storage.database_url
    if url is not None:
        return _check_postgres(url.get_secret_value(), SCHEMA_VERSION)
    path = settings.storage.sessions_db
    check = Check("session database", where=str(path), details={"kind": "sqlite"})
    if not path.is_file():
        check.lines.append("no session database yet")
        return check
    try:
        conn = _sqlite(path)
        try:
            broken = _integrity(conn)
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        check.problem(f"cannot read it: {exc}", CANNOT_CHECK)
        return check
    check.details.update(integrity=broken or "ok", schema_version=version)
    if broken:
        check.problem(
            f"SQLite integrity check failed: {'; '.join(broken[:5])} (restore a backup; "
            "doctor does not rewrite the session database)"
        )
    _schema_line(check, version, SCHEMA_VERSION)
    return check


def _check_postgres(url: str, expected: int) -> Check:
    from sqlalchemy import text

    from backend.sessions.db import SessionDatabase, SessionStoreError, redact_url

    check = Check("session database", where=redact_url(url), details={"kind": "postgresql"})
    try:
        db = SessionDatabase(url)
    except SessionStoreError as exc:
        check.problem(str(exc), CANNOT_CHECK)
        return check
    try:
        with db.connection() as conn:
            table = conn.execute(text("SELECT to_regclass('schema_version')")).scalar()
            found = (
                conn.execute(text("SELECT version FROM schema_version")).scalar() if table else 0
            )
    except Exception as exc:
        check.problem(f"cannot read it: {type(exc).__name__}: {exc}", CANNOT_CHECK)
        return check
    finally:
        db.close()
    version = int(found or 0)
    check.details["schema_version"] = version
    _schema_line(check, version, expected)
    return check


def _schema_line(check: Check, version: int, expected: int) -> None:
    check.details["schema_expected"] = expected
    if version > expected:
        check.problem(
            f"schema version {version} is newer than this code knows ({expected}): "
            "upgrade limbic-memory"
        )
    elif version < expected:
        check.lines.append(f"schema version {version}: migrated to {expected} at the next start")
    else:
        check.lines.append(f"schema version {version}, integrity ok")
