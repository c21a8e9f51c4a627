"""The batch state machine: which stage runs next, and running one stage idempotently.

    draft → retrieving → pooling → building → annotating → aggregating → released

An adaptive batch (`strategy: adaptive`) loops: after aggregating it goes back to pooling
(which then selects the next round's pairs, `pipeline.curation`) while its budget
lasts and positives seem to remain; `Batch.round` counts the rounds.

`retrieving`, `pooling`, `building` and `aggregating` run by themselves (Celery tasks
chain them); `annotating` waits for people (or the simulated crowd) and ends when every
HIT has its approved assignments (the pages and a periodic task then queue its close:
`pipeline.tasks.annotation_close_check_queue`), or when an admin closes it early. A state names the
stage that runs next; a failed stage keeps its state and records the error, so running
it again resumes where it stopped. An admin may cancel a batch before it is released
(`batch_cancel`); a cancelled batch runs nothing any more.

Nothing here queues a task: a call that moves a batch returns what comes next
(`StageNext`), and the tasks layer (`pipeline.tasks.next_queue`) queues it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Model

from annotation.errors import ServiceError, StateConflict
from annotation.handout import assignments_close_batch
from annotation.instructions import instructions_examples_propose, instructions_save
from annotation.models import (
    HIT,
    Assignment,
    Batch,
    BatchState,
    Candidate,
    Dataset,
    HITItem,
    Judgement,
    MachineAnnotator,
    PositivePair,
    Proposal,
    Ranking,
    Release,
    Verdict,
)
from annotation.mturk.state import is_production
from annotation.rounds import round_hits_missing_work
from mitl.config import BatchConfig, batch_config, parse_batch_config
from mitl.instructions import Example

from .aggregate import verdicts_aggregate
from .build import hits_build
from .bulk import tables_analyze
from .corpus import corpus_load
from .curation import curation_report, round_advance, rounds_continue
from .diversity import diversity_save
from .pool import candidates_pool
from .progress import ProgressListener, StageTracker
from .release import release_create
from .retrieve import (
    embeddings_warm,
    rankings_compute,
    retrieval_finish,
    retrieval_plan,
)

STAGE_ORDER: tuple[str, ...] = (
    BatchState.DRAFT,
    BatchState.RETRIEVING,
    BatchState.POOLING,
    BatchState.BUILDING,
    BatchState.ANNOTATING,
    BatchState.AGGREGATING,
    BatchState.RELEASED,
)
AUTOMATIC_STAGES = frozenset(
    {BatchState.RETRIEVING, BatchState.POOLING, BatchState.BUILDING, BatchState.AGGREGATING}
)


@dataclass(frozen=True)
class StageNext:
    """What a stage call leaves to be queued; the tasks layer queues it (`next_queue`).

    `moved`: this call moved the batch on (a duplicate or late delivery never did, so it
    never starts a next stage twice). `stage`: the automatic stage to queue next, if any.
    `chunks`: retrieval chunks (annotator id, query ids) to queue, one task each.
    `mturk_publish`: a later round's HITs join the batch's MTurk publication, on
    production when `mturk_production`, else on the sandbox. `released`: this call
    released the batch.
    """

    batch_id: int
    moved: bool = False
    stage: str | None = None
    chunks: tuple[tuple[int, tuple[int, ...]], ...] = ()
    mturk_publish: bool = False
    mturk_production: bool = False
    released: bool = False  # this call released the batch: its bias report may be built


def batch_create(
    *,
    dataset: Dataset,
    name: str,
    raw_config: Mapping[str, Any],
    instructions_examples: Sequence[Example] | None = None,
    user: AbstractBaseUser | None = None,
) -> Batch:
    """Validate the configuration and create a draft batch with its annotators.

    Its instructions start at version 1 with `instructions_examples` (the admin's), else
    with the examples proposed from the dataset (`instructions_examples_propose`).
    """
    config = parse_batch_config(raw_config)
    annotators = list(MachineAnnotator.objects.filter(name__in=config.annotators))
    missing = sorted(set(config.annotators) - {a.name for a in annotators})
    if missing:
        raise ServiceError(
            f"batch config: unknown annotator {missing[0]!r}; create it first "
            "(python manage.py annotator_create) or fix the name",
            field="annotators",
        )
    n_images = dataset.images.count()
    n_captions = dataset.captions.filter(is_invalid=False).count()
    if config.n_image_queries > n_images or config.n_caption_queries > n_captions:
        raise ServiceError(
            f"batch config: dataset {dataset.name!r} has {n_images} images and {n_captions} "
            f"valid captions, fewer than the {config.n_image_queries} image and "
            f"{config.n_caption_queries} caption queries asked for"
        )
    with transaction.atomic():
        batch = Batch.objects.create(dataset=dataset, name=name, config=config.to_json())
        batch.annotators.set(annotators)
        if instructions_examples is None:
            instructions_examples = instructions_examples_propose(dataset=dataset, seed=config.seed)
        instructions_save(batch=batch, examples=instructions_examples, user=user)
    return batch


def state_of(batch_id: int) -> str:
    return Batch.objects.values_list("state", flat=True).get(pk=batch_id)


def next_state(state: str) -> str:
    """Return the state after `state`; a cancelled batch stays cancelled."""
    if state == BatchState.CANCELLED:
        return BatchState.CANCELLED
    return STAGE_ORDER[STAGE_ORDER.index(state) + 1]


def batch_start(*, batch: Batch) -> StageNext:
    """Move a draft batch to retrieving; return its first stage for the caller to queue.

    The caller queues it in the same transaction (`pipeline.tasks.batch_start_queue`), so a
    started batch always has its first stage queued.
    """
    updated = Batch.objects.filter(pk=batch.pk, state=BatchState.DRAFT).update(
        state=BatchState.RETRIEVING
    )
    if not updated:
        raise StateConflict(f"batch {batch.pk} has already started (state {batch.state})")
    return StageNext(batch_id=batch.pk, moved=True, stage=BatchState.RETRIEVING)


def batch_cancel(*, batch: Batch) -> Batch:
    """Stop a batch for good: no stage runs any more and its open HITs are withdrawn.

    A released or already cancelled batch is refused. A stage running at this moment
    finishes its current write but cannot move the batch on (every move is conditional on
    the state). Accepted work expires, so its workers are offered other HITs instead of
    resuming it; submitted work stays and can still be reviewed.
    """
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)
        if locked.state in (BatchState.RELEASED, BatchState.CANCELLED):
            raise StateConflict(f"batch {batch.pk} is {locked.state}; it cannot be cancelled")
        Batch.objects.filter(pk=batch.pk).update(state=BatchState.CANCELLED)
        # The HITs of a cancelled batch are never handed out again, so their slot counts
        # no longer matter; only the workers' open assignments must end.
        assignments_close_batch(batch_id=locked.pk)
    batch.refresh_from_db()
    return batch


RUNNABLE_STAGES = frozenset(
    {
        BatchState.RETRIEVING,
        BatchState.POOLING,
        BatchState.BUILDING,
        BatchState.ANNOTATING,
        BatchState.AGGREGATING,
    }
)

# The tables a stage filled, analysed when it ends, before the next stage reads them
# (tables_analyze). Annotating filled its tables one HIT at a time; aggregation reads them
# all. Aggregating analyses its verdicts itself, before its release reads them.
STAGE_WRITES: dict[str, tuple[type[Model], ...]] = {
    BatchState.RETRIEVING: (Ranking,),
    BatchState.POOLING: (Candidate, Proposal),
    BatchState.BUILDING: (HIT, HITItem),
    BatchState.ANNOTATING: (Assignment, Judgement),
    BatchState.AGGREGATING: (),
}


def stage_run(
    *,
    batch_id: int,
    stage: str,
    listener: ProgressListener | None = None,
    force: bool = False,
    fan_out: bool = False,
) -> str:
    """Run `stage` of the batch if it is the batch's current state; return the state after.

    See `stage_advance`; this form suits callers that want to know where the batch is.
    """
    stage_advance(batch_id=batch_id, stage=stage, listener=listener, force=force, fan_out=fan_out)
    return Batch.objects.values_list("state", flat=True).get(pk=batch_id)


def stage_advance(
    *,
    batch_id: int,
    stage: str,
    listener: ProgressListener | None = None,
    force: bool = False,
    fan_out: bool = False,
) -> StageNext:
    """Run `stage` if it is the batch's current state; return what comes next, unqueued.

    A stage the batch has already passed is a no-op (tasks may be delivered twice): its
    `StageNext` says the call moved nothing and names nothing to queue, so a late
    duplicate never starts the next stage a second time. `force` closes the annotating
    stage even when some HITs still lack approved work. `fan_out` splits retrieval into
    chunks to queue as tasks; the last of them moves the batch on (`retrieval_chunk_run`).
    """
    if stage not in RUNNABLE_STAGES:
        raise ServiceError(
            f"{stage!r} is not a stage that can run (stages: {', '.join(RUNNABLE_STAGES)})"
        )
    batch = Batch.objects.select_related("dataset").get(pk=batch_id)
    if batch.state == BatchState.CANCELLED:
        return StageNext(batch_id=batch_id)  # stopped by an admin: nothing runs any more
    if STAGE_ORDER.index(batch.state) > STAGE_ORDER.index(stage):
        return StageNext(batch_id=batch_id)
    if batch.round > 0 and STAGE_ORDER.index(batch.state) < STAGE_ORDER.index(stage):
        return StageNext(batch_id=batch_id)  # a late duplicate of an earlier round's stage
    if batch.state != stage:
        raise ServiceError(f"batch {batch_id} is {batch.state}; it cannot run {stage} yet")
    config = batch_config(batch)
    tracker = StageTracker(batch=batch, stage=stage, listener=listener)
    try:
        ended = _stage_work(
            batch, stage=stage, config=config, tracker=tracker, force=force, fan_out=fan_out
        )
    except Exception as exc:
        # Only while the stage is current: a twin that lost a race must not mark a batch
        # that has already moved on as failed.
        Batch.objects.filter(pk=batch_id, state=stage).update(error=f"{stage}: {exc}")
        raise
    if ended is not None:
        return ended
    tables_analyze(*STAGE_WRITES[stage])
    moved = Batch.objects.filter(pk=batch_id, state=stage).update(state=next_state(stage), error="")
    following = _moved_to(batch_id, moved=bool(moved), stage=next_state(stage))
    if moved and next_state(stage) == BatchState.RELEASED:
        following = replace(following, released=True)
    # A later round's HITs join the batch's MTurk publication (same HIT type, environment).
    mturk = batch.mturk or {}
    if stage == BatchState.BUILDING and batch.round > 0 and mturk.get("hit_type_id"):
        return replace(following, mturk_publish=True, mturk_production=is_production(mturk))
    return following


def _stage_work(
    batch: Batch,
    *,
    stage: str,
    config: BatchConfig,
    tracker: StageTracker,
    force: bool,
    fan_out: bool,
) -> StageNext | None:
    """Do the stage's work; None when the batch moves on to the next state, else what the
    stage ended with instead (chunks to queue, work still missing, another round)."""
    if stage == BatchState.RETRIEVING and fan_out:
        return _retrieval_dispatch(batch, config, tracker)
    if stage == BatchState.RETRIEVING:
        rankings_compute(batch=batch, config=config, tracker=tracker)
    elif stage == BatchState.POOLING:
        diversity_save(batch=batch)
        candidates_pool(batch=batch, config=config, tracker=tracker)
    elif stage == BatchState.BUILDING:
        hits_build(batch=batch, config=config, tracker=tracker)
    elif stage == BatchState.ANNOTATING:
        if hits_missing_work(batch=batch) and not force:
            return StageNext(batch_id=batch.pk)
        assignments_close_batch(batch_id=batch.pk)
    else:
        verdicts_aggregate(batch=batch, config=config, tracker=tracker)
        tables_analyze(Verdict, PositivePair)
        report = curation_report(batch=batch, config=config)
        if rounds_continue(batch=batch, config=config, report=report):
            moved = round_advance(batch=batch)
            return _moved_to(batch.pk, moved=moved, stage=BatchState.POOLING)
        # A retry after the release was written (before the state moved) adds no v2.
        if not Release.objects.filter(batches=batch).exists():
            release_create(batch=batch, config=config, progress=_blocks_into(tracker))
            tracker.finish()  # the last blocks may fall between two throttled writes
    return None


def _moved_to(batch_id: int, *, moved: bool, stage: str) -> StageNext:
    """What follows a move to `stage`: that stage when it runs by itself and this call moved."""
    automatic = moved and stage in AUTOMATIC_STAGES
    return StageNext(batch_id=batch_id, moved=moved, stage=stage if automatic else None)


def _blocks_into(tracker: StageTracker) -> Callable[[int, int], None]:
    """Report blocks of work (relevance matrices of the release) as the stage's progress."""

    def report(done: int, total: int) -> None:
        if tracker.total != total:
            tracker.start(total)
        tracker.update(done)

    return report


def _retrieval_dispatch(batch: Batch, config: BatchConfig, tracker: StageTracker) -> StageNext:
    """Plan one retrieval chunk per annotator and block of queries still missing."""
    loaded = corpus_load(dataset=batch.dataset)  # read once for planning and warming
    plan = retrieval_plan(batch=batch, config=config, loaded=loaded)
    tracker.start(len(config.annotators) * batch.queries.count())
    if not plan:
        moved = retrieval_finish(batch=batch, config=config)
        return _moved_to(batch.pk, moved=moved, stage=BatchState.POOLING)
    embeddings_warm(batch=batch, config=config, loaded=loaded)
    chunks = tuple((annotator_id, tuple(query_ids)) for annotator_id, query_ids in plan)
    return StageNext(batch_id=batch.pk, chunks=chunks)


def retrieval_chunk_run(*, batch_id: int, annotator_id: int, query_ids: list[int]) -> StageNext:
    """Rank one chunk; the chunk that completes the stage moves the batch on to pooling."""
    batch = Batch.objects.select_related("dataset").get(pk=batch_id)
    if batch.state != BatchState.RETRIEVING:
        return StageNext(batch_id=batch_id)  # delivered again after the stage ended
    config = batch_config(batch)
    tracker = StageTracker(batch=batch, stage=BatchState.RETRIEVING)
    try:
        rankings_compute(
            batch=batch,
            config=config,
            tracker=tracker,
            annotator_ids=[annotator_id],
            query_ids=query_ids,
        )
    except Exception as exc:
        Batch.objects.filter(pk=batch_id, state=BatchState.RETRIEVING).update(
            error=f"retrieving: {exc}"
        )
        raise
    moved = retrieval_finish(batch=batch, config=config)
    return _moved_to(batch_id, moved=moved, stage=BatchState.POOLING)


def hits_missing_work(*, batch: Batch) -> int:
    """Count the current round's HITs that have fewer approved assignments than they need.

    An earlier round closed early keeps its unfinished HITs; they never block a later round.
    """
    return round_hits_missing_work(batch_id=batch.pk, round_=batch.round).count()


def batch_run_until(
    *,
    batch_id: int,
    until: str,
    listener: ProgressListener | None = None,
    force: bool = False,
    queue: Callable[[StageNext], None] | None = None,
) -> str:
    """Run stages in this process until the batch reaches `until` or waits for people.

    Starts a draft batch. Stops at `annotating` while HITs lack approved work (unless
    `force`, which closes only the round that is annotating now: an adaptive batch's next
    round waits for people again). Returns the state reached. This loop runs each next
    stage itself; what else a stage leaves to be queued (a later round's HITs joining the
    batch's MTurk publication) goes to `queue` (`pipeline.tasks.next_queue`), if given.
    """
    if until not in STAGE_ORDER:
        raise ServiceError(f"unknown stage {until!r} (stages: {', '.join(STAGE_ORDER)})")
    state, first_round = Batch.objects.values_list("state", "round").get(pk=batch_id)
    if state == BatchState.DRAFT and until != BatchState.DRAFT:
        Batch.objects.filter(pk=batch_id, state=BatchState.DRAFT).update(
            state=BatchState.RETRIEVING
        )
        state = BatchState.RETRIEVING
    while state != BatchState.CANCELLED and STAGE_ORDER.index(state) < STAGE_ORDER.index(until):
        current_round = Batch.objects.values_list("round", flat=True).get(pk=batch_id)
        step = stage_advance(
            batch_id=batch_id,
            stage=state,
            listener=listener,
            force=force and current_round == first_round,
        )
        if queue is not None:
            queue(replace(step, stage=None))  # the next stage runs here, not on a worker
        new_state = state_of(batch_id)
        if new_state == state:  # annotating, waiting for people
            break
        state = new_state
    return state
