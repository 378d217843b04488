"""A real ``chroma run`` server on loopback for tests and benches, stoppable and restartable.

The CLI is the one installed next to this interpreter. The port and data directory are
kept across ``stop``/``start``, so an app pointed at ``url`` finds the server again after
an outage; ``pause``/``resume`` (SIGSTOP/SIGCONT) make a hung server whose socket still
accepts connections.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

START_TIMEOUT_S = 120.0  # a cold start on a loaded 2-core machine


def free_port() -> int:
    """A loopback port nobody listens on (just now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def heartbeat(port: int) -> bool:
    """True when a Chroma server answers on ``port``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
    try:
        conn.request("GET", "/api/v2/heartbeat")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


class ChromaServer:
    """``chroma run --path DATA/db`` on one port; a context manager (start … stop)."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ChromaServer:
        """Start it and wait for its heartbeat. Raises ``RuntimeError`` with its log."""
        executable = Path(sys.executable).with_name("chroma")
        if not executable.exists():
            raise RuntimeError(f"chroma CLI not found next to {sys.executable}")
        self.data.mkdir(parents=True, exist_ok=True)
        command = [str(executable), "run", "--path", str(self.data / "db")]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
        with (self.data / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not heartbeat(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                rc = self.proc.poll()
                self.stop()
                raise RuntimeError(f"chroma server did not start (rc={rc}):\n{self.log_tail()}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused one cannot act on SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: a hung server, whose socket still accepts connections."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self) -> str:
        path = self.data / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def __enter__(self) -> ChromaServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
