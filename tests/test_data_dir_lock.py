"""One owner per data directory (backend.data_dir_lock): real processes, a real flock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from backend.config import load_settings
from backend.data_dir_lock import (
    LOCK_FILE,
    OWNER_FILE,
    DataDirBusy,
    acquire_data_dir,
    current_owner,
    needs_owner_lock,
)

REPO = Path(__file__).resolve().parents[1]

# Takes the directory, says so, then waits for stdin to close (or for a signal).
HOLDER = """
import sys
from pathlib import Path
from backend.data_dir_lock import acquire_data_dir
lock = acquire_data_dir(Path(sys.argv[1]), command="holder", url=sys.argv[2] or None)
print("held", flush=True)
sys.stdin.read()
lock.release()
"""

# Tries to take the directory: exit 0 when it could, 3 with the message when it is busy.
CONTENDER = """
import sys
from pathlib import Path
from backend.data_dir_lock import DataDirBusy, acquire_data_dir
try:
    acquire_data_dir(Path(sys.argv[1]), command="contender").release()
except DataDirBusy as exc:
    print(exc)
    print(exc.owner.pid if exc.owner else "none")
    sys.exit(3)
"""


def _python(code: str, *args: str, **options: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=REPO, text=True, **options
    )  # fmt: skip


@contextmanager
def holder(data_dir: Path, url: str = "") -> Iterator[subprocess.Popen[str]]:
    proc = _python(
        HOLDER, str(data_dir), url, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def contend(data_dir: Path) -> tuple[int, str]:
    proc = _python(CONTENDER, str(data_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_acquire_records_the_owner_and_release_clears_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert current_owner(data) is None  # never owned: nothing created
    assert not data.exists()
    lock = acquire_data_dir(data, command="serve")
    try:
        record = json.loads((data / OWNER_FILE).read_text())
        assert record["pid"] == os.getpid() and record["command"] == "serve"
        assert record["url"] is None and record["started_at"]
        owner = current_owner(data)
        assert owner is not None and owner.pid == os.getpid() and owner.url is None
        lock.set_url("http://127.0.0.1:8123")
        owner = current_owner(data)
        assert owner is not None and owner.url == "http://127.0.0.1:8123"
    finally:
        lock.release()
    assert not (data / OWNER_FILE).exists()
    assert (data / LOCK_FILE).exists()  # kept: deleting a lock file is a race
    assert current_owner(data) is None
    lock.release()  # idempotent
    with acquire_data_dir(data, command="chat") as again:
        assert again.held and current_owner(data) is not None
    assert not again.held and current_owner(data) is None


def test_a_second_acquisition_in_the_same_process_is_refused(tmp_path: Path) -> None:
    with acquire_data_dir(tmp_path, command="serve"):
        with pytest.raises(DataDirBusy) as busy:
            acquire_data_dir(tmp_path, command="chat")
        assert busy.value.owner is not None and busy.value.owner.pid == os.getpid()
        assert "this process" in str(busy.value)
    acquire_data_dir(tmp_path, command="chat").release()


def test_another_process_is_refused_with_the_owners_pid(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with acquire_data_dir(data, command="serve", url="http://127.0.0.1:8123"):
        code, out = contend(data)
    assert code == 3, out
    message, pid = out.strip().splitlines()
    assert int(pid) == os.getpid()
    assert f"pid {os.getpid()}" in message
    assert "limbic-memory serve" in message and "http://127.0.0.1:8123" in message
    assert str(data) in message and "docs/reliability.md" in message
    code, out = contend(data)  # released: the other process gets it
    assert code == 0, out


def test_current_owner_sees_another_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with holder(data, "http://127.0.0.1:9999") as proc:
        owner = current_owner(data)
        assert owner is not None
        assert (owner.pid, owner.url, owner.command) == (
            proc.pid,
            "http://127.0.0.1:9999",
            "holder",
        )
        with pytest.raises(DataDirBusy) as busy:
            acquire_data_dir(data, command="chat")
        assert busy.value.owner == owner
        assert proc.stdin is not None
        proc.stdin.close()  # let it release and exit
        assert proc.wait(timeout=30) == 0
    assert current_owner(data) is None
    assert not (data / OWNER_FILE).exists()


def test_a_killed_owner_leaves_its_record_but_never_blocks(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with holder(data, "http://127.0.0.1:9999") as proc:
        dead = proc.pid
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    stale = json.loads((data / OWNER_FILE).read_text())
    assert stale["pid"] == dead  # the record stays behind...
    assert current_owner(data) is None  # ...but only the lock counts
    with acquire_data_dir(data, command="serve"):
        owner = current_owner(data)
        assert owner is not None and owner.pid == os.getpid() and owner.url is None
    code, out = contend(data)
    assert code == 0, out


def _settings(tmp_path: Path, storage: dict[str, Any]) -> Any:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"storage": {"data_dir": str(tmp_path / "data"), **storage}}))
    return load_settings(config, env={})


@pytest.mark.parametrize(
    ("storage", "needed"),
    [
        ({}, True),  # embedded Chroma and SQLite: the default
        ({"chroma_url": "http://127.0.0.1:8001"}, True),  # SQLite sessions still local
        ({"database_url": "postgresql://u:p@db:5432/limbic"}, True),  # embedded Chroma
        (
            {"chroma_url": "http://127.0.0.1:8001", "database_url": "postgresql://db/limbic"},
            False,  # the cluster setup: shared by many processes by design
        ),
    ],
)
def test_needs_owner_lock_for_embedded_stores_only(
    tmp_path: Path, storage: dict[str, Any], needed: bool
) -> None:
    assert needs_owner_lock(_settings(tmp_path, storage)) is needed
