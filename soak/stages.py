"""The machine side under fire: a Celery worker killed inside each automatic stage.

Each scenario runs one batch of the same dataset and configuration from draft to release
on Celery workers: a worker paused inside the chosen stage is killed with SIGKILL once it
holds the stage's lease, a fresh worker takes over, and the watchdog (Celery beat inside
the worker) sends the lost stage again. The crowd is exact, so the release depends only
on the machine side: every scenario must write the same positive sets as the undisturbed
reference run.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from .processes import SoakError, celery_worker, wait_until

STAGE_TIMEOUT_S = 60.0
# The release files that depend only on the batch's data, not on ids or times.
COMPARED_FILES = ("image_to_caption.json", "caption_to_image.json")
BATCH_CONFIG = {
    "annotators": ["soak-tfidf", "soak-bow"],
    "n_image_queries": 12,
    "n_caption_queries": 12,
    "k": 3,
    "golden_negative_depth": 10,
    "hit_size": 8,
    "assignments_per_hit": 2,
    "seed": 3,
}


def stage_dataset(folder: Path) -> int:
    """A small synthetic dataset, imported, and the two annotators the batches use."""
    from annotation.imports.datasets import dataset_import_tsv
    from mitl.synthetic.files import write
    from mitl.synthetic.generation import generate
    from pipeline.annotators import annotator_create

    write(generate(n_images=48, seed=11), folder)
    dataset = dataset_import_tsv(
        name="soak-stages",
        captions_path=folder / "captions.tsv",
        images_dir=folder / "images",
        labels_path=folder / "labels.json",
        meta={"synthetic": json.loads((folder / "synthetic.json").read_text())},
    )
    annotator_create(name="soak-tfidf", kind="bow", config={})
    annotator_create(name="soak-bow", kind="bow", config={"stop_words": False})
    return dataset.pk


def stage_kills_run(stack, *, stages: list[str]) -> dict[str, Any]:
    """The reference run, then one run per stage with its worker killed inside it."""
    dataset_id = stage_dataset(stack.folder / "stage-data")
    reference = _scenario(stack, dataset_id, None)
    runs = {stage: _scenario(stack, dataset_id, stage) for stage in stages}
    for run in runs.values():
        run["same_release_as_undisturbed"] = run.pop("checksums") == reference["checksums"]
    return {
        "undisturbed_seconds": reference["seconds"],
        "killed_in": runs,
        "different_releases": sum(not run["same_release_as_undisturbed"] for run in runs.values()),
    }


def _scenario(stack, dataset_id: int, stage: str | None) -> dict[str, Any]:
    from annotation.models import BatchState, Dataset, Release, TaskLease
    from pipeline.stages import batch_create
    from pipeline.tasks import batch_start_queue

    name = stage or "undisturbed"
    batch = batch_create(
        dataset=Dataset.objects.get(pk=dataset_id), name=f"soak {name}", raw_config=BATCH_CONFIG
    )
    pauses = {"MITL_FAULT_PAUSES": f"stage:{stage}=600"} if stage else {}
    worker = celery_worker({**stack.env, **pauses}, stack.folder, f"worker-{name}").start()
    started = time.monotonic()
    killed_after = resent_after = None
    try:
        batch_start_queue(batch=batch)
        _wait_state(batch, BatchState.ANNOTATING, worker, stage)
        _judge_and_close(batch.pk)
        _wait_state(batch, BatchState.RELEASED, worker, stage)
    except _Killed as killed:
        # The paused worker holds the stage's lease: kill it and let a fresh one take over.
        killed_after = round(time.monotonic() - started, 1)
        worker.kill()
        worker = celery_worker(stack.env, stack.folder, f"worker-{name}-fresh").start()
        lease = TaskLease.objects.filter(key=killed.key)
        wait_until(
            lambda: lease.filter(resent__gt=0).exists() or not lease.exists(),
            f"the watchdog re-sending {killed.key}",
            timeout=STAGE_TIMEOUT_S,
        )
        resent_after = round(time.monotonic() - started, 1)
        if BatchState.ANNOTATING not in _passed(batch):
            _wait_state(batch, BatchState.ANNOTATING, worker, None)
            _judge_and_close(batch.pk)
        _wait_state(batch, BatchState.RELEASED, worker, None)
    finally:
        worker.stop()
    release = Release.objects.get(batches=batch)
    folder = Path(release.path)
    return {
        "killed_after_s": killed_after,
        "resent_after_s": resent_after,
        "seconds": round(time.monotonic() - started, 1),
        "checksums": {
            name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in COMPARED_FILES
        },
    }


def _judge_and_close(batch_id: int) -> None:
    """An exact simulated crowd judges every HIT; then annotation is closed on the workers."""
    from annotation.models import Batch, BatchState
    from mitl.config import batch_config
    from pipeline.progress import StageTracker
    from pipeline.simulate import crowd_simulate
    from pipeline.tasks import annotation_close_queue

    batch = Batch.objects.select_related("dataset").get(pk=batch_id)
    crowd_simulate(
        batch=batch,
        config=batch_config(batch),
        tracker=StageTracker(batch=batch, stage=BatchState.ANNOTATING),
        careless_share=0.0,
        error_rate=0.0,
    )
    # Forced: with two workers per HIT, a golden pair that is wrong itself (a true match
    # drawn as a negative) is failed by both and never suspended, so its HIT stays open.
    annotation_close_queue(batch_id=batch_id, force=True)


class _Killed(Exception):
    """The doomed stage holds its lease: time to kill its worker."""

    def __init__(self, key: str) -> None:
        self.key = key


def _passed(batch) -> set[str]:
    from pipeline.stages import STAGE_ORDER

    batch.refresh_from_db()
    return set(STAGE_ORDER[: STAGE_ORDER.index(batch.state)])


def _wait_state(batch, state: str, worker, doomed_stage: str | None) -> None:
    """Wait for `state`; raise _Killed once the doomed stage's lease is held."""
    from annotation.models import LeaseState, TaskLease

    deadline = time.monotonic() + STAGE_TIMEOUT_S
    key = f"batch:{batch.pk}:{doomed_stage}"
    while time.monotonic() < deadline:
        batch.refresh_from_db()
        if batch.state == state:
            return
        if batch.error:
            raise SoakError(f"batch {batch.pk} failed: {batch.error}\n{worker.tail()}")
        if doomed_stage and TaskLease.objects.filter(key=key, state=LeaseState.RUNNING).exists():
            raise _Killed(key)
        if not worker.alive():
            raise SoakError(f"worker died by itself:\n{worker.tail()}")
        time.sleep(0.2)
    raise SoakError(
        f"batch {batch.pk} still {batch.state} after {STAGE_TIMEOUT_S:.0f} s; leases "
        f"{list(TaskLease.objects.values_list('key', 'state'))}:\n{worker.tail()}"
    )
