"""The production-like stack definition stays valid."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _docker_compose() -> str:
    binary = shutil.which("docker-compose")
    if binary is None:
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail("docker-compose is not installed (apt-get install docker-compose)")
        pytest.skip("Debian's docker-compose is not installed")
    return binary


def _config(*extra: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_docker_compose(), "-f", str(ROOT / "docker-compose.yml"), "config", *extra],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **env},
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_docker_compose_file_is_valid():
    result = _config("-q", env={"SECRET_KEY": "test-secret"})
    assert result.returncode == 0, result.stderr


def test_docker_compose_defines_the_whole_stack():
    result = _config("--services", env={"SECRET_KEY": "test-secret"})
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == {
        "postgres",
        "redis",
        "web",
        "worker",
        "beat",
        "minio",
        "minio-init",
    }


def test_docker_compose_refuses_to_run_without_a_secret_key():
    result = _config("-q", env={})
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
