"""The in-repo copies of the golden fixtures and the eval corpus are the files their
PROVENANCE.md lists, byte for byte (sha256), and nothing else is in those folders."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COPIES = {
    REPO / "tests" / "fixtures" / "limbic": {"PROVENANCE.md"},
    REPO / "bench" / "data" / "eval": {"PROVENANCE.md", "ruff.toml"},  # not copies
}
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([0-9a-f]{64})`\s*\|")


def _listed(folder: Path) -> dict[str, str]:
    text = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    return {m[1]: m[2] for line in text.splitlines() if (m := ROW.match(line))}


@pytest.mark.parametrize("folder", list(COPIES), ids=lambda p: str(p.relative_to(REPO)))
def test_the_copies_match_their_provenance(folder: Path) -> None:
    listed = _listed(folder)
    assert listed, "no `file` | `sha256` rows in PROVENANCE.md"
    files = (p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    present = {p.as_posix() for p in files if not any(s.startswith((".", "__")) for s in p.parts)}
    assert present - COPIES[folder] == set(listed)
    for name, sha256 in listed.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == sha256, name


def test_no_locomo_in_the_repository() -> None:
    """LoCoMo is CC BY-NC 4.0: its benches read it from ../shared, never from here."""
    # (the bench's own bytecode in __pycache__ is code, not data: a run leaves it there)
    tracked = [
        p
        for p in (REPO / "bench").rglob("*")
        if "locomo" in p.name.lower() and "__pycache__" not in p.parts
    ]
    assert all(p.suffix == ".py" for p in tracked), tracked
