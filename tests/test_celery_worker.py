"""A real Celery worker process on the local Redis broker runs the automatic stages.

Services tier: needs PostgreSQL (DATABASE_URL) and Redis; CI sets REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from annotation.models import HIT, Batch, BatchState, Candidate, Ranking

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def broker_url() -> str:
    return os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def celery_queue(broker_url: str) -> Iterator[str]:
    """Point this process's Celery app at Redis on a queue of its own, then restore it."""
    from config.celery import app

    queue = f"test-{uuid.uuid4().hex[:8]}"
    # Settings come from Django under the CELERY_ namespace, so override the prefixed keys.
    overrides = {
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_ALWAYS_EAGER": False,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
    }
    saved = {key: app.conf[key] for key in overrides}
    app.conf.update(overrides)
    _forget_broker_state(app)
    assert not app.conf.task_always_eager
    yield queue
    app.conf.update(saved)
    _forget_broker_state(app)


def _forget_broker_state(app) -> None:
    """Drop the routes and connections Celery built for earlier settings (other tests)."""
    app._pool = None  # connections for the old broker URL (left open for their users)
    app.__dict__.pop("amqp", None)  # cached: queues, router and producer pool


@pytest.fixture
def worker(celery_queue: str, broker_url: str, tmp_path: Path) -> Iterator[subprocess.Popen]:
    """Start `celery worker` against the test database and the test queue."""
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "CELERY_BROKER_URL": broker_url,
        "CELERY_QUEUE": celery_queue,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "RELEASES_DIR": str(settings.RELEASES_DIR),
        "PYTHONUNBUFFERED": "1",  # the tests read the worker's log while it runs
    }
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            "solo",
            "--queues",
            celery_queue,
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "info",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


def _wait_for_state(batch: Batch, state: str, worker: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        batch.refresh_from_db()
        if batch.state == state:
            return
        assert worker.poll() is None, f"worker died:\n{log.read_text()}"
        assert not batch.error, f"stage failed: {batch.error}\n{log.read_text()}"
        time.sleep(0.5)
    pytest.fail(f"batch still {batch.state} after 120 s:\n{log.read_text()}")


def test_worker_runs_retrieval_pooling_and_building_on_postgres(batch, worker, tmp_path):
    from mitl.services.pipeline import batch_start

    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    batch_start(batch=batch)

    _wait_for_state(batch, BatchState.ANNOTATING, worker, tmp_path / "worker.log")

    assert Ranking.objects.filter(query__batch=batch).count() == 2 * 16
    assert Candidate.objects.filter(batch=batch).exists()
    assert HIT.objects.filter(batch=batch).exists()
    finished = {row.stage: row.done == row.total for row in batch.progress.all()}
    assert finished == {"retrieving": True, "pooling": True, "building": True}
    # the worker, not this process, ran the three automatic stages
    assert (tmp_path / "worker.log").read_text().count("mitl.run_stage") >= 3


def test_a_stage_delivered_twice_changes_nothing(batch, worker, tmp_path):
    from mitl.services.pipeline import batch_start
    from mitl.tasks import run_stage

    batch_start(batch=batch)
    _wait_for_state(batch, BatchState.ANNOTATING, worker, tmp_path / "worker.log")
    counts = (
        Candidate.objects.filter(batch=batch).count(),
        HIT.objects.filter(batch=batch).count(),
    )

    log = tmp_path / "worker.log"
    result = run_stage.delay(batch.pk, BatchState.POOLING)
    deadline = time.monotonic() + 60
    while f"[{result.id}] succeeded" not in log.read_text():  # no result backend: read the log
        assert time.monotonic() < deadline, f"task not done after 60 s:\n{log.read_text()}"
        time.sleep(0.2)

    batch.refresh_from_db()
    assert batch.state == BatchState.ANNOTATING
    assert counts == (
        Candidate.objects.filter(batch=batch).count(),
        HIT.objects.filter(batch=batch).count(),
    )
