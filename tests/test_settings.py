"""Settings come from the environment, with safe failures for dangerous combinations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _settings_probe(env: dict[str, str], expression: str) -> subprocess.CompletedProcess[str]:
    """Import the settings in a fresh interpreter with exactly `env` and print `expression`."""
    code = f"import config.settings as s; print(repr(({expression})))"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], **env},
        timeout=60,
        check=False,
    )


def test_production_mode_without_secret_key_refuses_to_start(tmp_path):
    result = _settings_probe({"DEBUG": "0", "MITL_VAR_DIR": str(tmp_path)}, "s.DEBUG")
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_embedded_default_is_sqlite_under_var_with_eager_tasks(tmp_path):
    result = _settings_probe(
        {"MITL_VAR_DIR": str(tmp_path)},
        "s.DATABASES['default']['ENGINE'], s.DATABASES['default']['NAME'], "
        "s.CELERY_TASK_ALWAYS_EAGER, s.MEDIA_ROOT",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(
        (
            "django.db.backends.sqlite3",
            str(tmp_path / "db.sqlite3"),
            True,
            tmp_path / "media",
        )
    )


def test_database_url_and_broker_select_postgres_and_workers(tmp_path):
    result = _settings_probe(
        {
            "MITL_VAR_DIR": str(tmp_path),
            "DATABASE_URL": "postgres://u:p@db.example:5433/mitl",
            "CELERY_BROKER_URL": "redis://broker:6379/0",
        },
        "s.DATABASES['default']['ENGINE'], s.DATABASES['default']['HOST'], "
        "s.DATABASES['default']['PORT'], s.CELERY_TASK_ALWAYS_EAGER",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(
        ("django.db.backends.postgresql", "db.example", 5433, False)
    )


def test_a_malformed_boolean_is_refused(tmp_path):
    result = _settings_probe({"DEBUG": "maybe", "MITL_VAR_DIR": str(tmp_path)}, "s.DEBUG")
    assert result.returncode != 0
    assert "DEBUG must be a boolean" in result.stderr
