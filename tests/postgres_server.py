"""A real PostgreSQL server for tests: Debian's binaries, a throwaway cluster on loopback.

``initdb`` into a fresh directory, ``pg_ctl start`` on a free loopback port (trust auth,
``fsync=off``: the data is thrown away), one database per test (``new_database``).
PostgreSQL refuses to run as root; when the tests do, the server runs as the
``postgres`` user (Debian's package creates it) or ``nobody``, via ``runuser``.

Missing binaries skip the tests that need a server, unless ``LIMBIC_REQUIRE_POSTGRES=1``
(``.ci/run`` sets it; it installs Debian's ``postgresql``), which fails them instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

START_TIMEOUT_S = 60


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    if found:
        return Path(found[0]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def required() -> bool:
    return os.environ.get("LIMBIC_REQUIRE_POSTGRES", "") not in ("", "0", "false")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One throwaway PostgreSQL cluster; ``start()`` then ``new_database()``; ``stop()``."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            message = "PostgreSQL server binaries (initdb, pg_ctl) not found"
            if required():
                pytest.fail(f"{message}; LIMBIC_REQUIRE_POSTGRES is set")
            pytest.skip(f"{message} (apt-get install postgresql)")
        self.bin = bin_dir
        # Not under pytest's tmp dirs: those are 0700 root's, and the server may run as
        # another user.
        self.base = Path(tempfile.mkdtemp(prefix="limbic-pg-"))
        self.port = _free_port()
        self.user: str | None = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    entry = pwd.getpwnam(name)
                except KeyError:
                    continue
                self.user = name
                os.chown(self.base, entry.pw_uid, entry.pw_gid)
                break
            else:
                pytest.fail("running as root, and no unprivileged user to run PostgreSQL")

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT_S)

    def start(self) -> PostgresServer:
        data = str(self.base / "data")
        done = self._run("initdb", "-D", data, "-U", "limbic", "--auth=trust", "-E", "UTF8",
                         "--locale=C")  # fmt: skip
        if done.returncode != 0:
            pytest.fail(f"initdb failed:\n{done.stdout}\n{done.stderr}")
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        done = self._run("pg_ctl", "-D", data, "-l", str(self.base / "server.log"), "-w",
                         "-t", str(START_TIMEOUT_S), "-o", options, "start")  # fmt: skip
        if done.returncode != 0:
            log = (self.base / "server.log").read_text(errors="replace")[-2000:]
            pytest.fail(f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{log}")
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://limbic@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        deadline = time.monotonic() + 10
        while True:
            try:
                with psycopg.connect(self.url(), autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {name}")
                return self.url(name)
            except psycopg.OperationalError:  # just started; or a busy template
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.base / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.base, ignore_errors=True)
