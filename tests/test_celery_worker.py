"""A real Celery worker process on the local Redis broker runs the automatic stages.

Services tier: needs PostgreSQL (DATABASE_URL) and Redis; CI sets REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import IO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.models import HIT, Batch, BatchState, Candidate, LeaseState, Ranking, TaskLease
from annotation.task_leases import leases_recover

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


WorkerStart = Callable[..., subprocess.Popen]


@pytest.fixture
def worker_start(celery_queue: str, broker_url: str, tmp_path: Path) -> Iterator[WorkerStart]:
    """Start `celery worker` processes against the test database and the test queue.

    Each logs to tmp_path/<name>.log; extra keyword arguments become its environment.
    """
    db = settings.DATABASES["default"]
    base_env = {
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
    started: list[tuple[subprocess.Popen, IO[str]]] = []

    def start(name: str = "worker", **env: str) -> subprocess.Popen:
        log = (tmp_path / f"{name}.log").open("w")
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
            env={**base_env, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append((process, log))
        return process

    yield start
    for process, log in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()


@pytest.fixture
def worker(worker_start: WorkerStart) -> subprocess.Popen:
    """One worker, logging to tmp_path/worker.log."""
    return worker_start()


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
    from pipeline.tasks import batch_start_queue

    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    batch_start_queue(batch=batch)

    _wait_for_state(batch, BatchState.ANNOTATING, worker, tmp_path / "worker.log")

    assert Ranking.objects.filter(query__batch=batch).count() == 2 * 16
    assert Candidate.objects.filter(batch=batch).exists()
    assert HIT.objects.filter(batch=batch).exists()
    finished = {row.stage: row.done == row.total for row in batch.progress.all()}
    assert finished == {"retrieving": True, "pooling": True, "building": True}
    # the worker, not this process, ran the three automatic stages
    assert (tmp_path / "worker.log").read_text().count("mitl.run_stage") >= 3


def test_a_stage_delivered_twice_changes_nothing(batch, worker, tmp_path):
    from pipeline.tasks import batch_start_queue, run_stage

    batch_start_queue(batch=batch)
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


def test_an_adaptive_batch_loops_its_rounds_on_the_worker_until_released(
    dataset, annotators, small_config, worker, tmp_path
):
    """Every stage of every round, and the simulated crowd between them, run on the worker."""
    from annotation.models import Judgement
    from pipeline.autopilot import autopilot_request
    from pipeline.stages import batch_create
    from pipeline.tasks import batch_start_queue, crowd_autopilot_queue

    batch = batch_create(
        dataset=dataset,
        name="adaptive on the worker",
        raw_config={
            **small_config,
            "strategy": "adaptive",
            "budget_judgements": 200,
            "round_size": 70,
            "ranking_depth": 20,
            "estimate_share": 0.25,
        },
    )
    autopilot_request(batch=batch)
    batch_start_queue(batch=batch)
    crowd_autopilot_queue(batch_id=batch.pk)

    _wait_for_state(batch, BatchState.RELEASED, worker, tmp_path / "worker.log")

    batch.refresh_from_db()
    assert batch.round >= 2
    assert set(HIT.objects.filter(batch=batch).values_list("round", flat=True)) == set(
        range(batch.round + 1)
    )
    assert Judgement.objects.filter(assignment__hit__batch=batch).count() <= 200
    log = (tmp_path / "worker.log").read_text()
    # pooling (selecting), building and aggregating: one task each per round, on the worker
    assert log.count("] received") - log.count("mitl.retrieve_chunk[") >= 3 * (batch.round + 1)
    assert "mitl.crowd_autopilot[" in log
    estimate = batch.reports["curation"]["directions"]["i2t"]["estimate"]
    assert estimate is not None and 0 <= estimate["recall"] <= 1


# --- lost workers and lost messages (annotation/task_leases.py) ------------------------


def _queued_messages(broker_url: str, queue: str) -> list[tuple[str, list]]:
    """The (task name, args) of every message waiting in the Redis queue, oldest first."""
    import redis

    messages = []
    for raw in reversed(redis.Redis.from_url(broker_url).lrange(queue, 0, -1)):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        messages.append((message["headers"]["task"], args))
    return messages


def _pairs_of(batch: Batch) -> set[tuple[str, int, int]]:
    return set(
        Candidate.objects.filter(batch=batch).values_list(
            "direction", "image__ext_id", "caption__ext_id"
        )
    )


def test_a_stage_whose_worker_was_killed_is_sent_again_and_ends_as_if_undisturbed(
    batch, dataset, small_config, worker_start, tmp_path, settings
):
    from pipeline.stages import batch_create, batch_run_until
    from pipeline.tasks import batch_start_queue

    fast = {"TASK_HEARTBEAT_S": "1", "TASK_STALE_S": "3"}
    settings.TASK_HEARTBEAT_S, settings.TASK_STALE_S = 1, 3  # the watchdog's side
    doomed = worker_start("doomed", MITL_FAULT_PAUSES="stage:retrieving=120", **fast)
    batch_start_queue(batch=batch)
    lease = TaskLease.objects.filter(key=f"batch:{batch.pk}:retrieving")
    deadline = time.monotonic() + 60
    while not lease.filter(state=LeaseState.RUNNING).exists():
        assert time.monotonic() < deadline, (tmp_path / "doomed.log").read_text()
        time.sleep(0.2)
    doomed.kill()  # SIGKILL inside the stage: its message stays unacked in Redis for 7 h
    doomed.wait()
    survivor = worker_start("survivor", **fast)

    deadline = time.monotonic() + 30
    while not (recovery := leases_recover()).resent:  # the heartbeat goes stale in 3 s
        assert time.monotonic() < deadline, "the lost stage was never sent again"
        batch.refresh_from_db()
        assert batch.state == BatchState.RETRIEVING  # nothing moves by itself meanwhile
        time.sleep(0.5)
    assert recovery.resent == [f"batch:{batch.pk}:retrieving"]
    _wait_for_state(batch, BatchState.ANNOTATING, survivor, tmp_path / "survivor.log")
    assert not TaskLease.objects.filter(batch=batch).exists()  # every task ended

    twin = batch_create(dataset=dataset, name="undisturbed twin", raw_config=small_config)
    assert batch_run_until(batch_id=twin.pk, until=BatchState.ANNOTATING) == "annotating"
    assert _pairs_of(batch) == _pairs_of(twin)
    assert Ranking.objects.filter(query__batch=batch).count() == 2 * 16
    assert HIT.objects.filter(batch=batch).count() == HIT.objects.filter(batch=twin).count()


def test_the_watchdog_sends_a_lost_message_again_and_gives_up_after_the_limit(
    batch, celery_queue, broker_url, settings
):
    settings.TASK_QUEUED_STALE_S, settings.TASK_MAX_RESENDS = 60, 2
    settings.CELERY_TASK_ALWAYS_EAGER = False  # batch_run below queues, as with a broker
    Batch.objects.filter(pk=batch.pk).update(state=BatchState.POOLING)
    now = timezone.now()
    lost = TaskLease.objects.create(
        key=f"batch:{batch.pk}:pooling",
        task="mitl.run_stage",
        args=[batch.pk, "pooling"],
        state=LeaseState.QUEUED,
        queued_at=now - timedelta(minutes=2),
        batch=batch,
    )
    waiting = TaskLease.objects.create(  # queued 10 s ago: still waiting for a worker
        key="import:1", task="annotation.run_import", args=[1], state="queued", queued_at=now
    )
    alive = TaskLease.objects.create(  # its worker heart-beats
        key="import:2",
        task="annotation.run_import",
        args=[2],
        state=LeaseState.RUNNING,
        holder="w",
        queued_at=now - timedelta(hours=1),
        heartbeat_at=now,
    )

    assert leases_recover().resent == [lost.key]
    assert _queued_messages(broker_url, celery_queue) == [("mitl.run_stage", [batch.pk, "pooling"])]
    lost.refresh_from_db()
    assert (lost.state, lost.resent) == (LeaseState.QUEUED, 1)
    assert leases_recover().resent == []  # just sent: it waits its turn again
    waiting.refresh_from_db()
    alive.refresh_from_db()
    assert (waiting.resent, alive.state, alive.holder) == (0, LeaseState.RUNNING, "w")

    alive.delete()  # its task ended

    later = timezone.now() + timedelta(minutes=5)
    assert leases_recover(now=later).resent == [lost.key, waiting.key]  # lost again
    recovery = leases_recover(now=later + timedelta(minutes=5))
    # The third loss: given up, and the batch says why; the other is sent a second time.
    assert (recovery.abandoned, recovery.resent) == ([lost.key], [waiting.key])
    batch.refresh_from_db()
    assert "lost its worker 3 times" in batch.error and f"batch_run {batch.pk}" in batch.error
    assert TaskLease.objects.get(pk=lost.pk).state == LeaseState.ABANDONED
    assert len(_queued_messages(broker_url, celery_queue)) == 4

    # `batch_run` resumes it: error cleared, leased and sent once more.
    with pytest.raises(CommandError, match="still pooling"):
        call_command("batch_run", batch.pk, "--timeout", "0.5", "--no-progress")
    batch.refresh_from_db()
    assert batch.error == ""
    assert TaskLease.objects.get(pk=lost.pk).state == LeaseState.QUEUED
    assert _queued_messages(broker_url, celery_queue)[-1] == (
        "mitl.run_stage",
        [batch.pk, "pooling"],
    )


def test_a_task_whose_lease_a_live_worker_holds_does_nothing(batch, worker, tmp_path):
    from pipeline.tasks import run_stage

    Batch.objects.filter(pk=batch.pk).update(state=BatchState.POOLING)
    now = timezone.now()
    TaskLease.objects.create(
        key=f"batch:{batch.pk}:pooling",
        task="mitl.run_stage",
        args=[batch.pk, "pooling"],
        state=LeaseState.RUNNING,
        holder="another worker",
        queued_at=now,
        heartbeat_at=now + timedelta(minutes=5),  # alive for the whole test
    )
    result = run_stage.delay(batch.pk, BatchState.POOLING)
    log = tmp_path / "worker.log"
    deadline = time.monotonic() + 60
    while f"[{result.id}] succeeded" not in log.read_text():
        assert time.monotonic() < deadline, f"task not done after 60 s:\n{log.read_text()}"
        time.sleep(0.2)
    batch.refresh_from_db()
    assert batch.state == BatchState.POOLING  # the holder runs the stage, not this delivery
    assert not Candidate.objects.filter(batch=batch).exists()
    assert TaskLease.objects.get(key=f"batch:{batch.pk}:pooling").holder == "another worker"
