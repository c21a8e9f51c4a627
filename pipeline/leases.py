"""The lease keys of the pipeline's Celery tasks (annotation/task_leases.py).

One definition for both sides: `pipeline.tasks` writes a task's lease when it queues the
task, and the task holds the same lease while it runs. Below the tasks, so that naming a
lease never needs the tasks module.
"""

from __future__ import annotations

import hashlib
import json

from annotation.task_leases import LeaseSpec


def stage_lease(batch_id: int, stage: str) -> LeaseSpec:
    """The lease of `mitl.run_stage` for one stage of one batch."""
    return LeaseSpec(key=f"batch:{batch_id}:{stage}", batch_id=batch_id)


def chunk_lease(batch_id: int, annotator_id: int, query_ids: list[int]) -> LeaseSpec:
    """The lease of one `mitl.retrieve_chunk`: the batch, the annotator and its queries."""
    digest = hashlib.sha1(json.dumps(query_ids).encode(), usedforsecurity=False).hexdigest()
    return LeaseSpec(
        key=f"batch:{batch_id}:retrieving:{annotator_id}:{digest[:16]}", batch_id=batch_id
    )


def close_lease(batch_id: int) -> LeaseSpec:
    """The lease of `mitl.close_annotation` for one batch."""
    return LeaseSpec(key=f"batch:{batch_id}:close", batch_id=batch_id)


def evaluation_lease(job_id: int) -> LeaseSpec:
    """The lease of `mitl.run_evaluation` for one evaluation job."""
    return LeaseSpec(key=f"evaluation:{job_id}", evaluation_job_id=job_id)
