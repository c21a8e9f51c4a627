"""Settings come from the environment, with safe failures for dangerous combinations."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

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


def _example_secret_key() -> str:
    """The SECRET_KEY that .env.example sets: what a copied .env starts with."""
    lines = (ROOT / ".env.example").read_text().splitlines()
    return next(line.split("=", 1)[1] for line in lines if line.startswith("SECRET_KEY="))


@pytest.mark.parametrize(
    "key", [_example_secret_key(), "insecure-development-key-do-not-use-in-production"]
)
def test_production_mode_refuses_a_secret_key_anyone_can_read(tmp_path, key):
    env = {"DEBUG": "0", "MITL_VAR_DIR": str(tmp_path), "SECRET_KEY": key}
    result = _settings_probe(env, "s.DEBUG")
    assert result.returncode != 0
    assert "SECRET_KEY is the placeholder from .env.example" in result.stderr
    assert "secrets.token_urlsafe(50)" in result.stderr
    # While developing (DEBUG on) the placeholder is harmless and still starts.
    relaxed = _settings_probe({**env, "DEBUG": "1"}, "s.SECRET_KEY == " + repr(key))
    assert (relaxed.returncode, relaxed.stdout.strip()) == (0, "True"), relaxed.stderr


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


def test_rate_limits_default_to_a_few_a_minute_and_can_be_switched_off(tmp_path):
    rates = "s.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']"
    default = _settings_probe({"MITL_VAR_DIR": str(tmp_path)}, rates)
    changed = _settings_probe(
        {
            "MITL_VAR_DIR": str(tmp_path),
            "LOGIN_RATE_PER_IP": "off",
            "LOGIN_RATE_PER_USERNAME": "20/hour",
            "LOGIN_RATE_PER_ACCOUNT": "50/hour",
            "MTURK_NEW_ASSIGNMENT_RATE_PER_IP": "off",
        },
        rates,
    )
    assert default.returncode == 0, default.stderr
    assert default.stdout.strip() == str(
        {
            "login-ip": "10/min",
            "login-username": "5/min",
            "login-account": "20/min",
            "mturk-new-assignment": "60/hour",
        }
    )
    assert changed.stdout.strip() == str(
        {
            "login-ip": None,
            "login-username": "20/hour",
            "login-account": "50/hour",
            "mturk-new-assignment": None,
        }
    )


def test_a_malformed_login_rate_is_refused(tmp_path):
    result = _settings_probe(
        {"MITL_VAR_DIR": str(tmp_path), "LOGIN_RATE_PER_USERNAME": "5 per minute"}, "1"
    )
    assert result.returncode != 0
    assert "LOGIN_RATE_PER_USERNAME must be a rate like 5/min" in result.stderr


def test_cache_url_selects_a_shared_redis_cache(tmp_path):
    local = _settings_probe({"MITL_VAR_DIR": str(tmp_path)}, "s.CACHES['default']['BACKEND']")
    shared = _settings_probe(
        {"MITL_VAR_DIR": str(tmp_path), "CACHE_URL": "redis://cache:6379/1"},
        "s.CACHES['default']['BACKEND'], s.CACHES['default']['LOCATION']",
    )
    wrong = _settings_probe({"MITL_VAR_DIR": str(tmp_path), "CACHE_URL": "memcached://m"}, "1")

    assert local.stdout.strip() == repr("django.core.cache.backends.locmem.LocMemCache")
    assert shared.stdout.strip() == str(
        ("django.core.cache.backends.redis.RedisCache", "redis://cache:6379/1")
    )
    assert wrong.returncode != 0 and "CACHE_URL must be a Redis URL" in wrong.stderr


def test_the_evaluation_caps_come_from_the_environment(tmp_path):
    caps = "s.EVALUATION_MAX_BODY_BYTES, s.EVALUATION_MAX_RANKING_LENGTH"
    default = _settings_probe({"MITL_VAR_DIR": str(tmp_path)}, caps)
    changed = _settings_probe(
        {
            "MITL_VAR_DIR": str(tmp_path),
            "EVALUATION_MAX_BODY_MB": "5",
            "EVALUATION_MAX_RANKING_LENGTH": "200",
        },
        caps,
    )
    wrong = _settings_probe({"MITL_VAR_DIR": str(tmp_path), "EVALUATION_MAX_BODY_MB": "lots"}, "1")

    assert default.stdout.strip() == str((20 * 2**20, 1000))
    assert changed.stdout.strip() == str((5 * 2**20, 200))
    assert "EVALUATION_MAX_BODY_MB must be a whole number of at least 1" in wrong.stderr


def test_sessions_are_read_through_the_cache_only_when_it_is_shared(tmp_path):
    shared = _settings_probe(
        {"MITL_VAR_DIR": str(tmp_path), "CACHE_URL": "redis://127.0.0.1:6379/1"},
        "s.SESSION_ENGINE",
    )
    per_process = _settings_probe({"MITL_VAR_DIR": str(tmp_path)}, "s.SESSION_ENGINE")

    assert shared.returncode == 0 and per_process.returncode == 0, shared.stderr
    assert shared.stdout.strip() == repr("annotation.sessions")  # cached_db, cache failures aside
    # Local memory is per process: a logout would not reach the other web processes.
    assert per_process.stdout.strip() == repr("django.contrib.sessions.backends.db")


HTTPS_SETTINGS = (
    "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
    "s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
    "s.SECURE_PROXY_SSL_HEADER"
)
PRODUCTION_BLOCK = "# --- production behind a TLS proxy ---"


def documented_production_environment() -> dict[str, str]:
    """The `# KEY=value` lines of .env.example's block for production behind a TLS proxy."""
    lines = (ROOT / ".env.example").read_text().splitlines()
    block = lines[lines.index(PRODUCTION_BLOCK) + 1 :]
    env: dict[str, str] = {}
    for line in block:
        if not line.startswith("# ") or "=" not in line:
            break
        key, value = line.removeprefix("# ").split("=", 1)
        env[key] = value
    return env


def test_plain_http_stays_the_default_with_debug_on_or_off(tmp_path):
    plain = (False, False, False, 0, False, False, None)
    for debug in ("1", "0"):
        env = {"MITL_VAR_DIR": str(tmp_path), "DEBUG": debug, "SECRET_KEY": "k" * 60}
        result = _settings_probe(env, HTTPS_SETTINGS)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(plain)


def test_https_only_secures_cookies_redirects_and_sends_hsts(tmp_path):
    env = {"MITL_VAR_DIR": str(tmp_path), "DEBUG": "0", "SECRET_KEY": "k" * 60}
    https = _settings_probe({**env, "HTTPS_ONLY": "1"}, HTTPS_SETTINGS)
    proxied = _settings_probe(
        {
            **env,
            "HTTPS_ONLY": "1",
            "BEHIND_TLS_PROXY": "1",
            "SECURE_HSTS_SECONDS": "0",
            "SECURE_SSL_REDIRECT": "0",
        },
        HTTPS_SETTINGS,
    )

    assert https.stdout.strip() == str((True, True, True, 31536000, False, False, None))
    assert proxied.stdout.strip() == str(
        (True, True, False, 0, False, False, ("HTTP_X_FORWARDED_PROTO", "https"))
    )


def deploy_check(env: dict[str, str]) -> subprocess.CompletedProcess:
    """`manage.py check --deploy`, failing on warnings, in a fresh process with `env`."""
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_documented_production_environment_passes_the_deploy_check(tmp_path):
    documented = documented_production_environment()
    assert {"HTTPS_ONLY", "BEHIND_TLS_PROXY", "SECURE_HSTS_SECONDS"} <= documented.keys()
    env = {
        "PATH": os.environ["PATH"],
        "MITL_VAR_DIR": str(tmp_path),
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        **documented,
    }

    result = deploy_check(env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_deploy_check_warns_about_test_only_fault_pauses(tmp_path):
    env = {
        "PATH": os.environ["PATH"],
        "MITL_VAR_DIR": str(tmp_path),
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        **documented_production_environment(),
        "MITL_FAULT_PAUSES": "submit=0.5",
    }
    result = deploy_check(env)
    assert result.returncode != 0
    assert "mitl.W001" in result.stderr + result.stdout


@pytest.mark.parametrize("value", ["submit", "submit=soon", "=1"])
def test_malformed_fault_pauses_are_refused_at_start(value):
    result = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "MITL_FAULT_PAUSES": value},
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "MITL_FAULT_PAUSES" in result.stderr


def test_docker_compose_passes_the_https_settings_through():
    compose = (ROOT / "docker-compose.yml").read_text()
    for key in documented_production_environment():
        assert f"{key}: ${{{key}:-" in compose, key
