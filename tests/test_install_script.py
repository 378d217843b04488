"""install.sh's pip_net: a pip command cut by the network is tried again, up to PIP_TRIES.

The function is taken out of install.sh and run against a stand-in ``.venv/bin/python``
that fails a given number of times, so the test needs neither pip nor the network.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL = Path(__file__).resolve().parents[1] / "install.sh"


def _function(name: str) -> str:
    text = INSTALL.read_text(encoding="utf-8")
    found = re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", text, re.S | re.M)
    assert found, f"{name} is not defined in install.sh"
    return found.group(0)


def _run(tmp_path: Path, failures: int, tries: str) -> tuple[subprocess.CompletedProcess[str], int]:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    calls = tmp_path / "calls"
    python = venv_bin / "python"
    # Counts its calls; fails the first FAILURES of them.
    python.write_text(
        f'#!/usr/bin/env bash\necho "$*" >> "{calls}"\n[ "$(wc -l < "{calls}")" -gt {failures} ]\n',
        encoding="utf-8",
    )
    python.chmod(0o755)
    script = (
        "set -euo pipefail\n"
        "say() { printf '==> %s\\n' \"$*\"; }\n"
        "sleep() { :; }\n"  # the pauses are not what is tested
        + _function("pip_net")
        + 'pip_net download --quiet thing==1.0 && echo "ok" || echo "gave up"\n'
    )
    done = subprocess.run(
        [bash, "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PIP_TRIES": tries},
        capture_output=True,
        text=True,
        check=True,
    )
    lines = calls.read_text(encoding="utf-8").splitlines()
    assert all(line == "-m pip download --quiet thing==1.0" for line in lines)
    return done, len(lines)


def test_a_cut_download_is_tried_again(tmp_path: Path) -> None:
    done, calls = _run(tmp_path, failures=2, tries="3")
    assert calls == 3
    assert done.stdout.strip().endswith("ok")
    assert "attempt 1 of 3" in done.stdout and "attempt 2 of 3" in done.stdout


def test_it_gives_up_after_pip_tries(tmp_path: Path) -> None:
    done, calls = _run(tmp_path, failures=5, tries="2")
    assert calls == 2
    assert done.stdout.strip().endswith("gave up")


def test_every_network_pip_command_goes_through_it() -> None:
    text = INSTALL.read_text(encoding="utf-8")
    # Uninstalling needs no network; installing and downloading do.
    assert not re.search(r"python -m pip (install|download)", text)
    assert text.count("pip_net install") >= 4 and "pip_net download" in text
