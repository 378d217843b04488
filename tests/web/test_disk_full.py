"""A full disk, for real: a small tmpfs mounted for the test, filled with a file.

Mounting needs root (CAP_SYS_ADMIN); where it is refused the tmpfs tests skip with the
reason. Two tests need no privileges and always run: ``test_enospc_on_the_write_probe_
stops_start`` covers the start-up check by raising ``ENOSPC`` from the probe's ``fsync``
(what a full disk with delayed allocation, or a full NFS share, reports), and
``test_a_full_session_database_at_run_time_is_a_507`` the run-time path, with SQLite's own
``SQLITE_FULL`` from a page limit on the app's session database.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from backend.config import Settings, load_settings
from backend.engine.services import MIN_FREE_BYTES, StartupError, build_services
from tests.llm.scripted_server import Reply, ScriptedOpenAIServer
from tests.web.app_process import AppProcess, hippocampus_reply
from tests.web.harness import AppHarness


def _mount_tmpfs(where: Path, size_mib: int) -> str | None:
    """Mount a tmpfs of ``size_mib`` at ``where``; the reason it failed, or ``None``."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs", str(where)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run mount: {exc}"
    return None if done.returncode == 0 else f"mount -t tmpfs refused: {done.stderr.strip()}"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs (a real filesystem with a real size limit), unmounted afterwards."""
    where = tmp_path / "disk"
    reason = _mount_tmpfs(where, 64)
    if reason is not None:
        pytest.skip(f"a tmpfs cannot be mounted here ({reason}); see the ENOSPC and 507 tests")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, timeout=30)


def free_bytes(disk: Path) -> int:
    stats = os.statvfs(disk)
    return stats.f_bavail * stats.f_frsize


def fill(disk: Path, leave_bytes: int = 0) -> Path:
    """Write a file until the filesystem has ``leave_bytes`` free (or is full)."""
    filler = disk / f"filler-{uuid.uuid4().hex[:6]}"
    with filler.open("wb") as handle:
        try:
            while (room := free_bytes(disk) - leave_bytes) > 0:
                handle.write(b"\0" * min(room, 2**20))
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _settings(tmp_path: Path, data_dir: Path) -> Settings:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"storage": {"data_dir": str(data_dir)}}))
    return load_settings(config, env={})


def test_full_disk_stops_start_with_a_clear_message(tmp_path: Path, small_disk: Path) -> None:
    data = small_disk / "data"
    data.mkdir()
    fill(small_disk)
    with pytest.raises(StartupError, match=r"the disk holding .* is full"):
        build_services(_settings(tmp_path, data))
    assert list(data.iterdir()) == []  # no database, no store, no probe left behind


def test_nearly_full_disk_stops_start_with_a_clear_message(
    tmp_path: Path, small_disk: Path
) -> None:
    data = small_disk / "data"
    data.mkdir()
    fill(small_disk, leave_bytes=MIN_FREE_BYTES // 4)
    with pytest.raises(StartupError, match=r"only \d+\.\d MiB free on the disk holding"):
        build_services(_settings(tmp_path, data))
    assert list(data.iterdir()) == []


def test_enospc_on_the_write_probe_stops_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync

    def full(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".write-probe"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    data = tmp_path / "data"
    with pytest.raises(StartupError, match=r"the disk holding .* is full"):
        build_services(_settings(tmp_path, data))
    assert list(data.iterdir()) == []


def test_a_full_session_database_at_run_time_is_a_507(tmp_path: Path) -> None:
    """The run-time path without privileges: ``PRAGMA max_page_count`` caps the app's
    session database at its size, so its next write that needs a page fails inside
    SQLite with ``SQLITE_FULL`` ("database or disk is full"), the error a full disk
    gives; everything above it (the store, the turn, the error handlers) is the app's.
    The turn is a 507 with a clear message, the app stays up, and once the cap is lifted
    (space freed) the same session goes on, its database intact."""
    with AppHarness(tmp_path) as h, httpx.Client(base_url=h.base_url, timeout=30) as client:

        def post(text: str, session: str | None = None) -> httpx.Response:
            headers = {"X-Session-Id": session} if session else {}
            body = {"messages": [{"role": "user", "content": text}]}
            return client.post("/v1/chat/completions", headers=headers, json=body)

        first = post("My dog is called Biscuit.")
        assert first.status_code == 200, first.text
        session = first.headers["x-session-id"]
        db = h.services.sessions.db
        (pages,) = db.read("PRAGMA page_count")[0]
        db.read(f"PRAGMA max_page_count = {pages}")  # the disk is full from here on
        statuses: list[int] = []
        body = "I keep writing long messages. " * 600  # ~18 KB a turn
        for _ in range(40):  # SQLite reuses free pages first: it may take a few turns
            r = post(body, session)
            statuses.append(r.status_code)
            if r.status_code != 200:
                break
        assert statuses[-1] == 507, statuses
        error = r.json()["error"]
        assert error["code"] == "insufficient_storage" and "disk is full" in error["message"]
        assert client.get("/healthz").status_code == 200  # the app is still up
        db.read("PRAGMA max_page_count = 1073741823")  # space freed (SQLite's default)
        h.chat.enqueue(Reply(chunks=["Back", " again."]))
        r = post("Still there?", session)
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "Back again."
        detail = client.get(f"/api/sessions/{session}").json()
        transcript = detail["transcript"]
        assert [m["role"] for m in transcript[-2:]] == ["user", "assistant"]
        assert transcript[-2]["content"] == "Still there?"
        # The failed turn left no half: every user message but the refused one has its reply.
        assert [m["role"] for m in transcript] == ["user", "assistant"] * (len(transcript) // 2)
    with closing(sqlite3.connect(tmp_path / "sessions.sqlite3")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.slow
def test_disk_filling_up_at_run_time_fails_the_turn_clearly(
    tmp_path: Path, small_disk: Path
) -> None:
    """The app's data dir on the tmpfs; the disk fills between turns: the turn that cannot
    be stored is a 507 with a clear message (never a hang or a corrupt database), the
    app stays up, and once space is freed the same session goes on."""
    with ScriptedOpenAIServer() as chat, ScriptedOpenAIServer() as hippocampus:
        storage = {"data_dir": str(small_disk / "data")}
        app = AppProcess(tmp_path, chat.base_url, hippocampus.base_url, storage)
        app.start()
        try:
            hippocampus.enqueue(hippocampus_reply("The user's dog is called Biscuit"))
            session, report = app.turn(None, "My dog is called Biscuit.")
            assert len(report["written"]) == 1
            filler = fill(small_disk)
            statuses: list[int] = []
            body = "I keep writing long messages. " * 600  # ~18 KB a turn
            for _ in range(40):  # SQLite reuses free pages first: it takes a few turns
                r = app.client.post(
                    "/v1/chat/completions",
                    headers={"X-Session-Id": session},
                    json={"messages": [{"role": "user", "content": body}]},
                )
                statuses.append(r.status_code)
                if r.status_code != 200:
                    break
            assert statuses[-1] == 507, statuses
            error = r.json()["error"]
            assert error["code"] == "insufficient_storage" and "disk is full" in error["message"]
            assert app.client.get("/healthz").status_code == 200  # the app is still up
            filler.unlink()
            chat.enqueue(Reply(chunks=["Back", " again."]))
            r = app.client.post(
                "/v1/chat/completions",
                headers={"X-Session-Id": session},
                json={"messages": [{"role": "user", "content": "Still there?"}]},
            )
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == (
                "Back again."
            )
            detail = app.client.get(f"/api/sessions/{session}").json()
            roles = [m["role"] for m in detail["transcript"]]
            assert roles[:2] == ["user", "assistant"] and roles[-2:] == ["user", "assistant"]
            assert detail["transcript"][-2]["content"] == "Still there?"
        finally:
            app.stop()
            app.client.close()
    db = small_disk / "data" / "sessions.sqlite3"
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
