"""`make soak`, scaled down: every part runs (the MTurk flood during the submissions' kills
and outages), and every promised zero is zero.

It builds its own PostgreSQL cluster and Redis (so it may kill and restart them), which
needs PostgreSQL's server binaries and redis-server on this machine; it skips without them.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.services


def _missing() -> str | None:
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb") and not shutil.which("initdb"):
        return "PostgreSQL's initdb is not installed"
    if not shutil.which("redis-server"):
        return "redis-server is not installed"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return "running as root without runuser: PostgreSQL cannot start"
    return None


def test_a_small_soak_run_keeps_every_promise(tmp_path):
    if reason := _missing():
        pytest.skip(reason)
    argv = [
        sys.executable, "-m", "soak.run", "--submissions", "300", "--clients", "8",
        "--next-hit", "150", "--stages", "aggregating", "--kill-every", "0.5",
        "--mturk-genuine", "16", "--mturk-forged", "200",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    lines = done.stdout.strip().splitlines()
    assert lines, f"no summary (exit {done.returncode}):\n{done.stderr[-4000:]}"
    summary = json.loads(lines[-1])

    examples = {
        part: {k: v for k, v in figures.items() if k.endswith("_examples") and v}
        for part, figures in summary.items()
        if isinstance(figures, dict)
    }
    assert summary["passed"], (summary["broken"], examples)  # what was refused or lost
    assert done.returncode == 0
    submissions = summary["submissions"]
    assert submissions["accepted"] == 300
    assert submissions["gunicorn_kills"] >= 1
    assert submissions["unavailable_503"] > 0  # the database restart was seen, and clean
    assert submissions["postgres_down_s"] > 0 and submissions["redis_down_s"] > 0
    assert submissions["health_after"] == 200
    storm = summary["next_hit"]
    assert storm["assigned"] == storm["slots"] == 90  # every slot filled, none twice
    killed = summary["stages"]["killed_in"]["aggregating"]
    assert killed["same_release_as_undisturbed"] and killed["resent_after_s"] is not None
    mturk = summary["mturk"]  # the forged flood ran during the submissions' kills and outages
    assert mturk["genuine_accepted"] == mturk["genuine_workers"] == 16
    assert mturk["forged_attempts"] == 200
    assert mturk["forged_429"] > 0  # the flood was held back, not just let through
    assert mturk["sync"]["problems"] == 0
