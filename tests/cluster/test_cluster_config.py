"""``storage.database_url``: validated at start, never shown, and what it switches on."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from backend.config import ConfigError, load_settings
from backend.engine.services import StartupError, build_services
from backend.stores.change_feed import ChangeLoggingVectorStore, SharedLexicalIndex
from tests.web.harness import REPO

PASSWORD = "pw-DATABASESECRET-42"


def test_the_url_is_a_secret_everywhere_it_could_show(tmp_path: Path) -> None:
    url = f"postgresql://limbic:{PASSWORD}@db.internal:5432/limbic"
    settings = load_settings(tmp_path / "none.json", env={"LM_DATABASE_URL": url})
    assert settings.storage.database_url is not None
    assert settings.storage.database_url.get_secret_value() == url
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings.model_dump())
    shown = settings.safe_dump()["storage"]["database_url"]
    assert shown == "postgresql://limbic:***@db.internal:5432/limbic"
    assert PASSWORD not in json.dumps(settings.safe_dump())


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"mysql://limbic:{PASSWORD}@db/limbic", "must be a PostgreSQL URL"),
        (f"postgresql://limbic:{PASSWORD}@db", "needs a host and a database name"),
        (f"postgresql://limbic:{PASSWORD}@db:port/limbic", "has an invalid port"),
    ],
)
def test_a_bad_url_fails_at_start_naming_where_without_the_password(
    tmp_path: Path, url: str, message: str
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"storage": {"database_url": url}}))
    with pytest.raises(ConfigError) as failed:
        load_settings(config, env={})
    assert f"config.json: storage.database_url: {message}" in str(failed.value)
    assert PASSWORD not in str(failed.value)
    with pytest.raises(ConfigError) as from_env:
        load_settings(tmp_path / "none.json", env={"LM_DATABASE_URL": url})
    assert str(from_env.value).startswith("environment LM_DATABASE_URL: storage.database_url")


def test_null_or_empty_means_sqlite(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "none.json", env={"LM_DATABASE_URL": ""})
    assert settings.storage.database_url is None
    assert settings.safe_dump()["storage"]["database_url"] is None


def _config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "chat": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
                "hippocampus": {
                    "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                },
                "storage": {"data_dir": str(tmp_path / "data"), "database_url": url},
                "server": {"personas_dir": str(REPO / "personas")},
            }
        )
    )  # fmt: skip
    return config


def test_services_on_postgres_share_the_long_term_changes(
    tmp_path: Path, postgres_url: str
) -> None:
    services = build_services(load_settings(_config(tmp_path, postgres_url), env={}))
    try:
        assert services.sessions.postgres
        assert isinstance(services.long_term.lexical, SharedLexicalIndex)
        assert isinstance(services.long_term.store.inner, ChangeLoggingVectorStore)  # type: ignore[attr-defined]
    finally:
        services.sessions.close()
        close = getattr(services.store, "close", None)
        if callable(close):
            close()


def test_an_unreachable_database_stops_the_start_without_the_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"postgresql://limbic:{PASSWORD}@127.0.0.1:1/limbic"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StartupError, match="cannot open the session database") as failed:
        build_services(load_settings(_config(tmp_path, url), env={}))
    assert PASSWORD not in str(failed.value)
    assert "postgresql://limbic:***@127.0.0.1:1/limbic" in str(failed.value)
    assert PASSWORD not in caplog.text
