"""The session database's connection: SQLite (a file, the default) or PostgreSQL (a URL).

Both go through SQLAlchemy Core's synchronous engine; the SQL the stores run is portable
between the two except where ``Dialect`` says otherwise.

- SQLite: one connection (``StaticPool``, kept checked out) guarded by an ``RLock``, as
  the store had before SQLAlchemy: the engine calls the sync API through
  ``asyncio.to_thread``, so calls come from a pool of threads and are serialised here.
  WAL journal, ``synchronous=NORMAL``, foreign keys on; a write transaction starts with
  ``BEGIN IMMEDIATE`` (the writer lock up front, so two writers never deadlock).
- PostgreSQL: a pool of psycopg (v3) connections, no process-wide lock (the server
  serialises what must be serialised; ``FOR UPDATE`` where the stores need it).

Failure policy: a database that cannot be opened raises ``SessionStoreError`` at start;
errors after that propagate as SQLAlchemy exceptions.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Row, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# Enough for the threads one process runs at once (asyncio.to_thread's default pool is
# min(32, cpus + 4)); overflow connections are closed again when returned.
PG_POOL_SIZE = 8
PG_MAX_OVERFLOW = 32
# Detect a dead server or a vanished client within about a minute, not hours.
PG_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10}


class SessionStoreError(RuntimeError):
    """The database cannot be used (unreachable, or its schema is newer than this code)."""


def is_postgres_url(target: str) -> bool:
    return target.split(":", 1)[0].lower() in POSTGRES_SCHEMES


def sqlalchemy_url(url: str) -> str:
    """``postgresql://…`` → ``postgresql+psycopg://…`` (psycopg 3, not SQLAlchemy's default)."""
    scheme, sep, rest = url.partition("://")
    if scheme.lower() in POSTGRES_SCHEMES:
        return f"postgresql+psycopg{sep}{rest}"
    return url


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for logs and error messages)."""
    try:
        return make_url(url).render_as_string(hide_password=True)  # parsing needs no driver
    except ArgumentError:
        return "<an unparseable database URL>"


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the two backends."""

    name: str  # "sqlite" or "postgresql"
    # A column that orders rows by insertion (turn_reports has no id column on SQLite).
    insertion_order: str
    # The database's own clock in Unix seconds, so that processes on machines whose
    # clocks differ agree on lease expiry.
    now_s: str


SQLITE = Dialect("sqlite", "rowid", "((julianday('now') - 2440587.5) * 86400.0)")
POSTGRES = Dialect("postgresql", "ord", "EXTRACT(EPOCH FROM clock_timestamp())::float8")


class SessionDatabase:
    """An opened session database; ``target`` is a SQLite path (or ``":memory:"``) or a
    PostgreSQL URL."""

    def __init__(self, target: Path | str) -> None:
        self.target = str(target)
        self.postgres = is_postgres_url(self.target)
        self.dialect = POSTGRES if self.postgres else SQLITE
        self.where = redact_url(self.target) if self.postgres else self.target
        self._lock: contextlib.AbstractContextManager[Any] = (
            contextlib.nullcontext() if self.postgres else threading.RLock()
        )
        self._immediate = False
        self._held: Connection | None = None
        self.journal_mode = "n/a"  # SQLite's, read when the connection opens
        try:
            self.engine = self._pg_engine() if self.postgres else self._sqlite_engine()
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            # SQLite: its one connection stays checked out (a checkout per call would
            # double the cost of the store's small queries).
            self._held = None if self.postgres else self.engine.connect()
        except (SQLAlchemyError, OSError) as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            if self.postgres:
                reason = reason.replace(self.target, self.where)
            raise SessionStoreError(
                f"cannot open the session database {self.where}: {reason}"
            ) from None

    def _pg_engine(self) -> Engine:
        return create_engine(
            sqlalchemy_url(self.target),
            pool_size=PG_POOL_SIZE,
            max_overflow=PG_MAX_OVERFLOW,
            pool_pre_ping=True,  # a server restart costs one reconnect, not an error
            connect_args={"connect_timeout": 10, **PG_KEEPALIVES},
        )

    def _sqlite_engine(self) -> Engine:
        if self.target != ":memory:":
            Path(self.target).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            "sqlite://" if self.target == ":memory:" else f"sqlite:///{self.target}",
            poolclass=StaticPool,
            connect_args={"check_same_thread": False},
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi: Any, _record: Any) -> None:
            dbapi.isolation_level = None  # we issue BEGIN ourselves (below)
            cursor = dbapi.cursor()
            for pragma in ("foreign_keys = ON", "busy_timeout = 5000", "synchronous = NORMAL"):
                cursor.execute(f"PRAGMA {pragma}")
            cursor.execute("PRAGMA journal_mode = WAL")
            self.journal_mode = str(cursor.fetchone()[0])
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Reads are single statements: SQLite's autocommit reads them consistently,
            # without a BEGIN round of their own.
            if self._immediate:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """One committed transaction (rolled back on any exception)."""
        if self._held is None:
            with self.engine.begin() as conn:
                yield conn
            return
        with self._lock:
            self._immediate = True
            try:
                with self._held.begin():
                    self._immediate = False
                    yield self._held
            finally:
                self._immediate = False

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection for reads (its transaction is rolled back afterwards)."""
        if self._held is None:
            with self.engine.connect() as conn:
                yield conn
            return
        with self._lock:
            try:
                yield self._held
            finally:
                self._held.rollback()

    def read(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row[Any]]:
        with self.connection() as conn:
            return list(conn.execute(text(sql), dict(params or {})).fetchall())

    def close(self) -> None:
        with self._lock:
            if self._held is not None:
                self._held.close()
                self._held = None
            self.engine.dispose()
