"""Settings for building the app with ``build_services`` in tests and benches.

Everything a test does not replace is then built as production builds it (the outbox,
the cluster wrapping, the owner lock of ``data_dir``): see ``backend/engine/services.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.config import Settings

REPO = Path(__file__).resolve().parents[2]


def app_settings(data_dir: Path, **sections: dict[str, Any]) -> Settings:
    """The default settings with the repository's personas and ``data_dir`` (give each
    build its own: it is locked while in use); ``sections`` merged over them."""
    data: dict[str, dict[str, Any]] = {
        "storage": {"data_dir": str(data_dir)},
        "server": {"personas_dir": str(REPO / "personas")},
    }
    for section, values in sections.items():
        data[section] = {**data.get(section, {}), **values}
    return Settings.model_validate(data)


def fake_settings(data_dir: Path, **sections: dict[str, Any]) -> Settings:
    """``app_settings`` for scripted models: ``provider: openai`` roles that are never
    called (the test hands in its fakes), so the turn settings are a remote model's."""
    roles: dict[str, dict[str, Any]] = {
        "chat": {"provider": "openai", "model": "fake-chat"},
        "hippocampus": {"provider": "openai", "model": "fake-hippocampus"},
    }
    for role, values in roles.items():
        sections[role] = {**values, **sections.get(role, {})}
    return app_settings(data_dir, **sections)
