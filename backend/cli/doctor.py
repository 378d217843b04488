"""``limbic-memory doctor``: check a data directory's stores, and repair what can be rebuilt.

Checks (docs/reliability.md, "``limbic-memory doctor``"):

- the long-term store (``<data_dir>/chroma``, or the Chroma server at
  ``storage.chroma_url``): every record each namespace's collections list is read back
  as tolerant reads do (``ChromaVectorStore.scan_records``), with its vector; the ids
  whose vector or whole record cannot be read, and collections missing their partner;
- the outbox (``<data_dir>/outbox.sqlite3``): SQLite integrity, queued and parked
  writes, and that every entry decodes;
- the session database: SQLite ``PRAGMA integrity_check`` and the schema version, or, on
  PostgreSQL, a connection and the schema version.

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

Exit codes: 0 healthy (or fully repaired), 1 something needs repair (or a repair left
something behind), 2 something could not be checked.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from backend.config import Settings
from backend.memory.types import Memory, Namespace

if TYPE_CHECKING:
    from backend.embeddings.port import Embedder
    from backend.stores.chroma_store import ChromaVectorStore, RecordScan

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_NEEDS_REPAIR = 1
EXIT_CANNOT_CHECK = 2

OK = "ok"
WARNING = "warning"  # worth a look, nothing to repair (parked outbox writes)
NEEDS_REPAIR = "needs_repair"
CANNOT_CHECK = "cannot_check"

STORE_DIR = "chroma"
OUTBOX_FILE = "outbox.sqlite3"
EMBED_BATCH = 64
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
            store = _guarded("long-term store", _check_store, settings)
            if repair and store.status == NEEDS_REPAIR:
                actions, store = _repair_store(settings, store)
            checks += [
                store,
                _guarded("outbox", _check_outbox, settings),
                _guarded("session database", _check_session_db, settings),
            ]
        finally:
            if lock is not None:
                lock.release()
    code = _exit_code(checks, actions)
    _print(out, settings, checks, actions, code, repair=repair, as_json=as_json)
    return code


def _guarded(name: str, check: Callable[[Settings], Check], settings: Settings) -> Check:
    """Run one check; an unexpected failure makes it "cannot check", not a traceback."""
    try:
        return check(settings)
    except Exception as exc:
        log.exception("doctor: the %s check failed", name)
        return Check(name, CANNOT_CHECK, lines=[f"the check failed: {type(exc).__name__}: {exc}"])


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


# --- the long-term store ---------------------------------------------------------------------


def _shown(ids: list[str]) -> str:
    more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    return ", ".join(ids[:SHOWN_IDS]) + more


def _open_store(settings: Settings) -> tuple[ChromaVectorStore | None, str]:
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
def _opened(store: ChromaVectorStore) -> Iterator[ChromaVectorStore]:
    try:
        yield store
    finally:
        store.close()


def _check_store(settings: Settings) -> Check:
    from backend.stores.vector_port import VectorStoreUnavailable

    check = Check("long-term store")
    check.details["kind"] = "server" if settings.storage.chroma_url else "embedded"
    try:
        store, check.where = _open_store(settings)
    except VectorStoreUnavailable as exc:
        check.problem(f"cannot open it: {exc}", CANNOT_CHECK)
        return check
    if store is None:
        check.lines.append("no store yet (nothing was ever remembered here)")
        check.details["namespaces"] = []
        return check
    try:
        with _opened(store):
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
                f"(the text reads; --repair re-embeds it): {_shown(scan.vector_unreadable)}"
            )
        if scan.unreadable:
            check.problem(
                f"  {len(scan.unreadable)} listed by the index but unreadable (no text to "
                f"copy; --repair keeps them in the backup): {_shown(scan.unreadable)}"
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


def _embedder(settings: Settings) -> Embedder:
    """The configured embedder (tests replace this)."""
    from backend.engine.services import build_embedder

    return build_embedder(settings)


class _Reembedder:
    """New vectors for memories whose vector was lost; ``None`` rows when it cannot."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder: Embedder | None = None
        self.problem: str | None = None

    def vectors(self, memories: list[Memory]) -> list[Any]:
        if self._embedder is None and self.problem is None:
            try:
                self._embedder = _embedder(self._settings)
            except Exception as exc:
                self.problem = f"the embedder cannot be loaded: {exc}"
        result: list[Any] = []
        for start in range(0, len(memories), EMBED_BATCH):
            chunk = memories[start : start + EMBED_BATCH]
            rows: Any = None
            if self._embedder is not None and self.problem is None:
                try:
                    rows = self._embedder.embed([m.content for m in chunk])
                except Exception as exc:
                    self.problem = f"the embedder failed: {exc}"
            result += [None] * len(chunk) if rows is None else list(rows)
        return result


def _write_reembedded(
    store: ChromaVectorStore, ns: Namespace, lost: list[Memory], embed: _Reembedder
) -> tuple[int, int]:
    """Upsert ``lost`` with new vectors; returns (re-embedded, stored without a vector)."""
    from backend.stores.vector_port import EmbeddingDimensionError

    vectors = embed.vectors(lost)
    memories = [replace(m, embedding=v) for m, v in zip(lost, vectors, strict=True)]
    try:
        store.upsert(ns, memories)
    except (EmbeddingDimensionError, ValueError) as exc:
        embed.problem = embed.problem or f"its vectors do not fit the namespace: {exc}"
        memories = [replace(m, embedding=None) for m in lost]
        store.upsert(ns, memories)
    done = sum(m.embedding is not None for m in memories)
    return done, len(memories) - done


def _repair_store(settings: Settings, check: Check) -> tuple[list[str], Check]:
    """Repair the store; returns what was done and the store checked again."""
    from backend.stores.vector_port import VectorStoreUnavailable

    try:
        rebuild = _repair_in_place if settings.storage.chroma_url else _rebuild
        actions = rebuild(settings)
    except (VectorStoreUnavailable, OSError) as exc:
        return [f"NOT repaired: the repair failed, nothing was swapped: {exc}"], check
    return actions, _guarded("long-term store", _check_store, settings)


def _rebuild(settings: Settings) -> list[str]:
    """Copy every readable record into a fresh directory, verify it, swap it in."""

    data_dir = settings.storage.data_dir
    path = data_dir / STORE_DIR
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 100):  # two repairs within one second get distinct names
        suffix = stamp if n == 1 else f"{stamp}-{n}"
        fresh_path = data_dir / f"{STORE_DIR}.repair-{suffix}"
        backup = data_dir / f"{STORE_DIR}.broken-{suffix}"
        if not fresh_path.exists() and not backup.exists():
            break
    try:
        outcome = _copy_verified(settings, path, fresh_path)
    except BaseException:
        shutil.rmtree(fresh_path, ignore_errors=True)  # only ever a partial copy
        raise
    written, reembedded, without, left_behind, others, problem, verify = outcome
    if verify:
        shutil.rmtree(fresh_path, ignore_errors=True)
        return [
            f"NOT repaired: the rebuilt copy did not verify ({'; '.join(verify)}); "
            f"{path} is unchanged"
        ]
    os.replace(path, backup)
    try:
        os.replace(fresh_path, path)
    except OSError:
        os.replace(backup, path)
        raise
    actions = [
        f"rebuilt {path} from {sum(written.values())} readable memories in {len(written)} "
        f"namespace(s) (verified); the old directory is kept as {backup}"
    ]
    if reembedded:
        actions.append(f"re-embedded {reembedded} memories whose vector could not be read")
    if without:
        actions.append(
            f"stored {without} memories without a vector ({problem}); the server's "
            "backfill gives them one when it can (they are listed and found by text meanwhile)"
        )
    if left_behind:
        actions.append(
            f"NOT copied: {len(left_behind)} records without readable text, kept in "
            f"{backup}: {_shown(left_behind)}"
        )
    if others:
        actions.append(
            f"NOT copied: collections that are not limbic-memory's, kept in {backup}: "
            + ", ".join(others)
        )
    return actions


def _copy_verified(
    settings: Settings, path: Path, fresh_path: Path
) -> tuple[dict[Namespace, int], int, int, list[str], list[str], str | None, list[str]]:
    """Copy ``path``'s readable records into ``fresh_path`` and read the copy back:
    (memories per namespace, re-embedded, stored without a vector, ids left behind,
    foreign collections, the embedder's problem, what did not verify)."""
    from backend.stores.chroma_store import ChromaVectorStore

    embed = _Reembedder(settings)
    written: dict[Namespace, int] = {}
    reembedded = without = 0
    left_behind: list[str] = []
    with (
        _opened(ChromaVectorStore.persistent(path)) as old,
        _opened(ChromaVectorStore.persistent(fresh_path)) as fresh,
    ):
        collections = old.collections()
        others = [name for name, ns in collections if ns is None]
        for ns in sorted({ns for _, ns in collections if ns is not None}, key=lambda n: n.key):
            lost: list[Memory] = []

            def copy(
                memories: list[Memory],
                vector_lost: set[str],
                ns: Namespace = ns,
                lost: list[Memory] = lost,
            ) -> None:
                keep = [m for m in memories if m.id not in vector_lost]
                lost.extend(m for m in memories if m.id in vector_lost)
                fresh.upsert(ns, keep)  # readable vectors first: they fix the dimension

            scan = old.scan_records(ns, on_batch=copy)
            for start in range(0, len(lost), EMBED_BATCH):
                done, kept = _write_reembedded(fresh, ns, lost[start : start + EMBED_BATCH], embed)
                reembedded, without = reembedded + done, without + kept
            written[ns] = scan.read
            left_behind += scan.unreadable
        verify = _verify(fresh, written)
    return written, reembedded, without, left_behind, others, embed.problem, verify


def _verify(store: ChromaVectorStore, written: dict[Namespace, int]) -> list[str]:
    """What is wrong with the rebuilt copy (empty: every memory reads back)."""
    problems = []
    for ns, expected in written.items():
        if expected == 0:  # nothing of it was readable: it lives on in the backup only
            continue
        scan = store.scan_records(ns)
        if scan.read != expected or not scan.healthy or store.count(ns) != expected:
            problems.append(f"{ns.persona_id}/{ns.user_id}: {scan.read} of {expected} read back")
    return problems


def _repair_in_place(settings: Settings) -> list[str]:
    """Over HTTP: give the records with an unreadable vector a new one, in place."""
    store, where = _open_store(settings)
    assert store is not None
    embed = _Reembedder(settings)
    reembedded = without = 0
    unreadable: list[str] = []
    missing: list[str] = []
    with _opened(store):
        for ns in store.namespaces():
            lost: list[Memory] = []
            scan = store.scan_records(
                ns, on_batch=lambda ms, ids, lost=lost: lost.extend(m for m in ms if m.id in ids)
            )
            for start in range(0, len(lost), EMBED_BATCH):
                done, kept = _write_reembedded(store, ns, lost[start : start + EMBED_BATCH], embed)
                reembedded, without = reembedded + done, without + kept
            unreadable += scan.unreadable
            missing += scan.missing_collections
    actions = []
    if reembedded:
        actions.append(f"re-embedded {reembedded} memories in place on {where}")
    if without:
        actions.append(
            f"moved {without} memories to the vectorless collection ({embed.problem}); the "
            "server's backfill gives them one when it can (they are listed and found by "
            "text meanwhile)"
        )
    if unreadable:
        actions.append(
            f"NOT repaired: {len(unreadable)} records without readable text on the server "
            f"(repair its directory with the server stopped): {_shown(unreadable)}"
        )
    if missing:
        actions.append(f"NOT repaired: missing collections on the server: {', '.join(missing)}")
    return actions


# --- the outbox and the session database -----------------------------------------------------


def _sqlite(path: Path) -> sqlite3.Connection:
    """An existing SQLite file, opened without creating anything."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5)


def _integrity(conn: sqlite3.Connection) -> list[str]:
    rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
    return [] if rows == ["ok"] else rows


def _check_outbox(settings: Settings) -> Check:
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
        check.problem(f"{len(unreadable)} entries cannot be decoded (ids {_shown(unreadable)})")
    check.lines.append(
        f"{queued} memories queued in {entries} writes (replayed when the server starts)"
        if queued
        else "nothing queued"
    )
    if parked:
        check.problem(f"{parked} writes parked after repeated failures (see the log)", WARNING)
    return check


def _check_session_db(settings: Settings) -> Check:
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
