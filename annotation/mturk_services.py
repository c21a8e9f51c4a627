"""Amazon Mechanical Turk at the ORM edge: publish, accept, sync, pay, block, and the
offline CSV path.

Every boto3 call goes through `_call`, which retries throttling and server faults and
turns MTurk's refusals into `MTurkError` messages a person can act on. The client comes
from `mturk_client` (the sandbox unless `production=True`) or from the caller (`client=`,
which tests use to pass a `botocore.stub.Stubber`-wrapped client). Credentials come only
from boto3's default chain (environment, profile, instance role): nothing here stores or
logs them.

What was sent to MTurk is kept in `Batch.mturk` (under the batch's row lock), so running
publish or sync again sends nothing twice:

    settings, cost_estimate        HIT type settings (frozen once a HIT is published)
    environment, hit_type_id       sandbox | production, and MTurk's HITTypeId
    hit_group_id, publish_*_at     for the worker preview link; publication times
    sent    {AssignmentId: {decision, hit, at, by}}   approve/reject sent (or seen) on MTurk
    extra   {hit pk: n}            additional assignments created to replace rejected work
    replaced [AssignmentId]        rejected assignments already replaced
    bonuses {token: {...}}         bonuses paid
    report, last_sync_at           the last sync's report
    sync_lease {token, since, until}  held while a sync runs, so two never overlap

The HIT page only stores MTurk work, as submitted: anyone can open that public page with
made-up ids, so the sync applies the batch's golden policy, and only to the assignments
that MTurk itself lists for the HIT. Those it marks confirmed (`Assignment.confirmed_at`,
also set for the rows of MTurk's results CSV); until then nobody can approve the work.

Row locks follow `assignments.hits_lock`: the HIT's row before any of its assignments'.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings
from django.core.signing import Signer
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from mitl.config import parse_batch_config
from mitl.costs import CostEstimate, mturk_cost

from . import mturk
from .errors import ServiceError
from .handout import ACTIVE_STATUSES, assignment_create, hits_lock, hits_recount_slots
from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    HITItem,
    Worker,
    WorkerSource,
)
from .mturk import MTurkInputError
from .review import (
    assignment_decide_confirmed,
    assignment_golden_misses,
    assignment_review,
    worker_block,
)
from .submissions import AnswerInput, SubmissionResult, answers_from_rows, assignment_submit

logger = logging.getLogger(__name__)

RETRY_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ServiceUnavailable",
        "ServiceFault",
        "InternalError",
        "RequestTimeout",
    }
)
RETRY_TRIES = 4
RETRY_BASE_SECONDS = 0.5  # 0.5, 1, 2 s between tries
PAGE_SIZE = 100  # MTurk's largest page
EXPIRED_AT = datetime(2000, 1, 1, tzinfo=UTC)  # "a time in the past" expires a HIT now
# How long after MTurk's SubmitTime the platform waits for a submission's answers before
# the sync rejects it on MTurk (else MTurk's auto-approval would pay for no work); also how
# long after its deadline work stored here may still turn up on MTurk.
MISSING_GRACE = timedelta(hours=1)
# A sync holds this lease on its batch; longer than the sync task's time limit (30 min), so
# a lease left by a killed sync lapses by itself soon after.
SYNC_LEASE = timedelta(minutes=31)
_HIT_SALT = "mitl.mturk.hit"
_IMAGE_SALT = "mitl.mturk.image"


class MTurkError(ServiceError):
    """MTurk refused a call, or the batch cannot go to MTurk; the message says why."""


class SyncRunning(MTurkError):
    """Another sync of the batch holds its lease: this one did nothing."""


# --- the client and its calls -----------------------------------------------------------


def mturk_client(*, production: bool) -> Any:
    """Return a boto3 MTurk client for the sandbox (default) or production.

    Credentials come from boto3's default chain only; retries are `_call`'s job, so every
    call is retried the same way whatever the client.
    """
    import boto3
    from botocore.config import Config

    return boto3.client(
        "mturk",
        region_name=mturk.REGION,
        endpoint_url=mturk.PRODUCTION_ENDPOINT if production else mturk.SANDBOX_ENDPOINT,
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=30),
    )


def _call(client: Any, method: str, **params: Any) -> dict[str, Any]:
    """Call one MTurk operation, retrying throttling, server faults and network errors."""
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        HTTPClientError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
    )

    operation = client.meta.method_to_api_mapping.get(method, method)
    for attempt in range(RETRY_TRIES):
        last = attempt == RETRY_TRIES - 1
        try:
            return getattr(client, method)(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code", "Unknown"), error.get("Message", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if last or not (code in RETRY_CODES or status >= 500):
                raise MTurkError(f"MTurk {operation} failed ({code}): {message}") from exc
        except (NoCredentialsError, PartialCredentialsError):
            raise MTurkError(
                "no AWS credentials for MTurk: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment, or run where an "
                "instance role may use MTurk"
            ) from None
        except (ConnectionError, HTTPClientError) as exc:  # unreachable, timed out
            if last:
                raise MTurkError(f"MTurk {operation}: cannot reach MTurk ({exc})") from exc
        except ParamValidationError as exc:  # refused by the client before sending
            raise MTurkError(f"MTurk {operation}: {exc}") from exc
        delay = RETRY_BASE_SECONDS * 2**attempt
        logger.info("MTurk %s: retrying in %.1f s", operation, delay)
        time.sleep(delay)
    raise AssertionError("unreachable")


def _pages(client: Any, method: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
    """Yield every element of a paginated list, following NextToken."""
    token = None
    while True:
        page = _call(
            client,
            method,
            MaxResults=PAGE_SIZE,
            **params,
            **({"NextToken": token} if token else {}),
        )
        yield from page.get(key, [])
        token = page.get("NextToken")
        if not token:
            return


# --- state kept in Batch.mturk ----------------------------------------------------------


def _state_update(batch_id: int, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Change Batch.mturk under the batch's row lock (sync, the UI and tasks share it)."""
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch_id)
        state = dict(locked.mturk or {})
        mutate(state)
        locked.mturk = state
        locked.save(update_fields=["mturk", "updated_at"])
    return state


def _state(batch: Batch) -> dict[str, Any]:
    return dict(Batch.objects.values_list("mturk", flat=True).get(pk=batch.pk) or {})


def _now_iso(now: datetime) -> str:
    return now.astimezone(UTC).isoformat(timespec="seconds")


# --- signed links: the HIT page and its images, for people without an account ------------


def hit_signature(hit_id: int) -> str:
    return Signer(salt=_HIT_SALT).signature(str(hit_id))


def image_signature(item_id: int) -> str:
    return Signer(salt=_IMAGE_SALT).signature(str(item_id))


def signature_valid(*, kind: str, pk: int, signature: str) -> bool:
    expected = hit_signature(pk) if kind == "hit" else image_signature(pk)
    return constant_time_compare(expected, signature)


def hit_page_path(hit: HIT) -> str:
    return reverse("frontend:mturk-hit", args=[hit.pk, hit_signature(hit.pk)])


def image_path(item_id: int) -> str:
    return reverse("frontend:mturk-image", args=[item_id, image_signature(item_id)])


# --- settings and cost ------------------------------------------------------------------


def batch_hit_settings(batch: Batch) -> mturk.HitTypeSettings:
    """Return the batch's HIT type settings: the stored ones over the defaults."""
    minutes = parse_batch_config(batch.config).assignment_minutes
    defaults = mturk.HitTypeSettings(assignment_minutes=minutes)
    return mturk.parse_hit_type_settings((batch.mturk or {}).get("settings", {}), defaults=defaults)


def mturk_batch_cost(*, batch: Batch, hit_settings: mturk.HitTypeSettings) -> CostEstimate:
    """Estimate the batch's MTurk bill: rewards of every assignment plus the commission."""
    config = parse_batch_config(batch.config)
    return mturk_cost(
        hits=batch.hits.count(),
        assignments_per_hit=config.assignments_per_hit,
        items_per_hit=config.items_per_hit,
        reward_per_assignment=hit_settings.reward,
    )


def _published(batch: Batch) -> bool:
    return batch.hits.filter(external_id__isnull=False).exists()


def mturk_settings_save(*, batch: Batch, raw: dict[str, Any]) -> mturk.HitTypeSettings:
    """Validate and store (some of) the batch's HIT type settings, and the cost they give."""
    if _published(batch):
        raise MTurkError(
            f"batch {batch.pk} already has HITs on MTurk: its HIT type settings can no "
            "longer change (MTurk keeps one HIT type per batch)"
        )
    try:  # keys left out keep their stored (or default) values
        hit_settings = mturk.parse_hit_type_settings(raw, defaults=batch_hit_settings(batch))
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    cost = mturk_batch_cost(batch=batch, hit_settings=hit_settings)

    def store(state: dict[str, Any]) -> None:
        state["settings"] = hit_settings.to_json()
        state["cost_estimate"] = cost.to_json()

    batch.mturk = _state_update(batch.pk, store)
    return hit_settings


# --- publishing -------------------------------------------------------------------------


@dataclass
class PublishResult:
    environment: str
    hit_type_id: str
    created: int = 0
    already: int = 0
    recovered: int = 0  # created by an interrupted run, found again on MTurk
    full: int = 0  # every slot already taken on the platform: left off MTurk
    cost: dict[str, Any] = field(default_factory=dict)
    preview_url: str = ""
    warnings: list[str] = field(default_factory=list)


def mturk_publish(
    *,
    batch: Batch,
    production: bool = False,
    client: Any = None,
    base_url: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    now: datetime | None = None,
) -> PublishResult:
    """Publish every HIT of an annotating batch as an MTurk ExternalQuestion.

    Idempotent: a HIT that has its HITId is never created again, and a run interrupted
    between MTurk's answer and our write finds its HITs again (by RequesterAnnotation)
    instead of creating them twice; UniqueRequestToken guards the same window on MTurk's
    side. The HITTypeId, environment and cost estimate are stored on the batch.
    """
    batch = Batch.objects.get(pk=batch.pk)
    now = now or timezone.now()
    environment = mturk.PRODUCTION if production else mturk.SANDBOX
    if batch.state != BatchState.ANNOTATING:
        raise MTurkError(
            f"batch {batch.pk} is {batch.state}: only a batch in the annotating state, with "
            "its HITs built, can be published (run `batch_run BATCH --until annotating`)"
        )
    hits = list(batch.hits.order_by("index"))
    if not hits:
        raise MTurkError(f"batch {batch.pk} has no HITs to publish")
    state = batch.mturk or {}
    published = [hit for hit in hits if hit.external_id]
    if published and state.get("environment") not in (None, environment):
        raise MTurkError(_other_environment_message(batch, state["environment"]))
    try:
        base = mturk.external_base_url(
            settings.MTURK_EXTERNAL_BASE_URL if base_url is None else base_url,
            production=production,
        )
        hit_settings = batch_hit_settings(batch)
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    result = PublishResult(environment=environment, hit_type_id="", already=len(published))
    if not base.startswith("https://"):
        result.warnings.append(
            f"{base} is not HTTPS: MTurk's sandbox may refuse it, and workers' browsers "
            "block a plain HTTP page inside MTurk's HTTPS site"
        )
    if not production and (hit_settings.min_approval_rate or hit_settings.min_approved_hits):
        result.warnings.append(
            "sandbox: the approval-rate and approved-HITs requirements are left out "
            "(sandbox workers have no history); production applies them"
        )
    cost = mturk_batch_cost(batch=batch, hit_settings=hit_settings)
    result.cost = cost.to_json()
    client = client or mturk_client(production=production)
    hit_type_id = state.get("hit_type_id") if published else None
    if not hit_type_id:  # MTurk answers the same HITTypeId for the same settings
        request = mturk.hit_type_request(hit_settings, sandbox=not production)
        hit_type_id = _call(client, "create_hit_type", **request)["HITTypeId"]
    result.hit_type_id = hit_type_id
    resumed = "publish_started_at" in state

    def started(state: dict[str, Any]) -> None:
        state.update(
            environment=environment,
            hit_type_id=hit_type_id,
            settings=hit_settings.to_json(),
            cost_estimate=cost.to_json(),
        )
        state.setdefault("publish_started_at", _now_iso(now))

    nonce = mturk.publication_nonce(_state_update(batch.pk, started)["publish_started_at"])
    todo = [hit for hit in hits if not hit.external_id]
    if todo and resumed:
        result.recovered = _recover_published(client, batch, todo, hit_type_id, now)
        recovered = set(batch.hits.filter(external_id__isnull=False).values_list("pk", flat=True))
        todo = [hit for hit in todo if hit.pk not in recovered]
    group_id = state.get("hit_group_id", "")
    common = {"HITTypeId": hit_type_id, "LifetimeInSeconds": hit_settings.lifetime_hours * 3600}
    for done, hit in enumerate(todo, start=1):
        # Same publication, same token: a resumed publish repeats it; a new one does not.
        token = mturk.request_token("mitl", environment, nonce, batch.pk, hit.pk)
        try:
            outcome, created = _publish_hit(
                client,
                batch,
                hit,
                common=common,
                url=base + hit_page_path(hit),
                token=token,
                now=now,
            )
        except MTurkError as exc:
            total = result.already + result.recovered + result.created
            raise MTurkError(
                f"{total} of {len(hits)} HITs are on MTurk; then {exc}. Run the publish "
                "again to resume: published HITs are not created twice"
            ) from exc
        if outcome == "full":  # platform annotators filled it before publication
            result.full += 1
            continue
        if outcome == "already":  # a concurrent publish got there first
            result.already += 1
            continue
        group_id = group_id or created.get("HITGroupId", "")
        result.created += 1
        logger.info("batch %s: HIT %s published as %s", batch.pk, hit.index, created["HITId"])
        if progress:
            progress(done, len(todo))

    def finished(state: dict[str, Any]) -> None:
        state["published_at"] = _now_iso(now)
        if group_id:
            state["hit_group_id"] = group_id

    _state_update(batch.pk, finished)
    if group_id:
        result.preview_url = mturk.worker_preview_url(environment, group_id)
    return result


def _publish_hit(
    client: Any,
    batch: Batch,
    hit: HIT,
    *,
    common: dict[str, Any],
    url: str,
    token: str,
    now: datetime,
) -> tuple[str, dict[str, Any]]:
    """Create one HIT on MTurk with the slots platform work left free.

    Returns ("created", MTurk's HIT), ("full", {}) or ("already", {}) (published meanwhile).
    The free slots are counted under the HIT's row lock, which is held until the HITId is
    stored: platform annotators keep taking HITs while a publication runs (minutes of calls),
    and from the moment the HIT has its HITId they no longer get it.
    """
    with transaction.atomic():
        locked = HIT.objects.select_for_update().get(pk=hit.pk)
        if locked.external_id:
            return "already", {}
        held = Assignment.objects.filter(hit=locked, status__in=ACTIVE_STATUSES).count()
        slots = locked.max_assignments - held
        if slots < 1:
            return "full", {}
        answer = _call(
            client,
            "create_hit_with_hit_type",
            **common,
            MaxAssignments=slots,
            Question=mturk.external_question_xml(url),
            RequesterAnnotation=mturk.requester_annotation(batch.pk, locked.pk),
            UniqueRequestToken=token,
        )
        created = answer["HIT"]
        HIT.objects.filter(pk=locked.pk).update(external_id=created["HITId"], published_at=now)
        if slots != locked.max_assignments:
            _state_update(batch.pk, partial(_note_capacity, hit=locked, slots=slots))
    return "created", created


def _note_capacity(state: dict[str, Any], *, hit: HIT, slots: int) -> None:
    capacity = dict(state.get("max_assignments", {}))
    capacity[str(hit.pk)] = slots
    state["max_assignments"] = capacity


def mturk_publish_recorded(*, batch: Batch, production: bool, client: Any = None) -> list[str]:
    """Publish (see `mturk_publish`) and keep the outcome in Batch.mturk["last_publish"].

    The admin page queues this as a task: the person who pressed "Publish" reads the
    outcome on the page later, whether it ran on a worker or in-process.
    """
    try:
        result = mturk_publish(batch=batch, production=production, client=client)
    except MTurkError as exc:
        lines = [f"PROBLEM {exc}"]
    else:
        lines = [
            f"{result.environment}: {result.created} HITs published now, {result.already} "
            f"before, {result.recovered} found again, {result.full} full here; HIT type "
            f"{result.hit_type_id}",
            *result.warnings,
        ]
        if result.preview_url:
            lines.append(f"workers see them at {result.preview_url}")

    def store(state: dict[str, Any]) -> None:
        state["last_publish"] = {"at": _now_iso(timezone.now()), "lines": lines}

    _state_update(batch.pk, store)
    if lines[0].startswith("PROBLEM"):
        raise MTurkError(lines[0].removeprefix("PROBLEM "))
    return lines


def _other_environment_message(batch: Batch, environment: str) -> str:
    if environment == mturk.SANDBOX:
        return (
            f"batch {batch.pk} is published on the sandbox: reset it first "
            f"(`mturk_publish {batch.pk} --reset-sandbox` expires the sandbox HITs and deletes "
            "their test assignments), then publish on production"
        )
    return f"batch {batch.pk} is published on production: it cannot go to the sandbox too"


def _recover_published(
    client: Any, batch: Batch, todo: list[HIT], hit_type_id: str, now: datetime
) -> int:
    """Find HITs an interrupted run created but did not record, by their annotation."""
    wanted = {mturk.requester_annotation(batch.pk, hit.pk): hit for hit in todo}
    found = 0
    for remote in _pages(client, "list_hits", "HITs"):
        hit = wanted.pop(remote.get("RequesterAnnotation", ""), None)
        if hit is not None and remote.get("HITTypeId") == hit_type_id:
            HIT.objects.filter(pk=hit.pk).update(external_id=remote["HITId"], published_at=now)
            found += 1
        if not wanted:
            break
    return found


def mturk_sandbox_reset(*, batch: Batch, client: Any = None) -> int:
    """Expire a batch's sandbox HITs and forget them, with their MTurk test assignments.

    The sandbox is for trying the HITs out; its work must not reach the verdicts. Returns
    how many test assignments were deleted.
    """
    state = _state(batch)
    if state.get("environment") != mturk.SANDBOX:
        raise MTurkError(f"batch {batch.pk} is not published on the sandbox: nothing to reset")
    client = client or mturk_client(production=False)
    for hit in batch.hits.filter(external_id__isnull=False).order_by("index"):
        try:
            _call(client, "update_expiration_for_hit", HITId=hit.external_id, ExpireAt=EXPIRED_AT)
        except MTurkError as exc:  # gone already: nothing left to expire
            logger.info("batch %s: %s", batch.pk, exc)
    with transaction.atomic():
        hit_ids = hits_lock(hit_ids=batch.hits.values_list("pk", flat=True))  # HITs first
        _, deleted_by_model = Assignment.objects.filter(
            hit__batch=batch, worker__source=WorkerSource.MTURK
        ).delete()
        deleted = deleted_by_model.get(Assignment._meta.label, 0)
        batch.hits.update(external_id=None, published_at=None)
        hits_recount_slots(hit_ids=hit_ids)
        kept = {"settings": state["settings"]} if "settings" in state else {}
        Batch.objects.filter(pk=batch.pk).update(mturk=kept)
    return deleted


# --- the HIT page inside MTurk ----------------------------------------------------------


def mturk_assignment_open(
    *, hit: HIT, worker_id: str, assignment_id: str, now: datetime | None = None
) -> Assignment:
    """Return the platform assignment of an accepted MTurk assignment, created on first use.

    MTurk decides who may accept; the platform still refuses a blocked worker, a worker
    who already did this HIT under another assignment, and a HIT full of other work. A
    worker who returned the HIT and accepted it again arrives with a new AssignmentId: the
    open assignment follows it. A HIT that looks full only because of unsubmitted MTurk
    assignments gives up the oldest of them (see `_free_returned_slot`).
    """
    if not (mturk.valid_id(worker_id) and mturk.valid_id(assignment_id)):
        raise ServiceError("this page needs MTurk's workerId and assignmentId")
    now = now or timezone.now()
    worker, _ = Worker.objects.get_or_create(source=WorkerSource.MTURK, external_id=worker_id)
    if worker.is_blocked:
        raise ServiceError(
            "your worker ID is blocked from these HITs: please return this HIT on MTurk"
        )
    existing = _by_external_id(assignment_id)
    if existing is not None:
        if existing.hit_id != hit.pk or existing.worker_id != worker.pk:
            raise ServiceError("this assignment belongs to another HIT or worker")
        return _reclaim(existing, now)
    previous = Assignment.objects.filter(hit=hit, worker=worker).first()
    if previous is not None:
        return _follow_new_assignment(previous, assignment_id, now)
    deadline = now + timedelta(minutes=batch_hit_settings(hit.batch).assignment_minutes)
    try:
        with transaction.atomic():  # the HIT stays locked until the MTurk id is on it
            # The HIT's row before any assignment's (see assignments.hits_lock).
            locked = HIT.objects.select_for_update().get(pk=hit.pk)
            _free_returned_slot(locked)
            created = assignment_create(hit=locked, worker=worker, now=now)
            Assignment.objects.filter(pk=created.pk).update(
                external_id=assignment_id, deadline=deadline
            )
    except (ServiceError, IntegrityError):
        again = _by_external_id(assignment_id)  # the same page opened twice at once
        if again is not None and again.hit_id == hit.pk and again.worker_id == worker.pk:
            return again
        raise
    return Assignment.objects.select_related("hit__batch", "worker").get(pk=created.pk)


def _free_returned_slot(hit: HIT) -> None:
    """Expire the oldest unsubmitted MTurk assignment of a HIT that looks full.

    MTurk frees a slot the moment a worker returns (or abandons) a HIT, tells the
    platform nothing, and never has more than MaxAssignments out at once: a newly accepted
    AssignmentId on a full HIT means an earlier MTurk assignment was given up. If that
    guess picks a worker who is still at it, that worker's next page load or submit takes
    a slot back the same way (`_reclaim`). Platform and submitted work is never touched.
    The caller holds the HIT's row lock, taken before any assignment's: writers that lock
    an assignment of the HIT first (expiry, submission, review) would otherwise wait
    crosswise with this one (see assignments.hits_lock).
    """
    active = Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()
    if active < hit.max_assignments:
        return
    stale = (
        Assignment.objects.filter(
            hit=hit,
            status=AssignmentStatus.ACCEPTED,
            worker__source=WorkerSource.MTURK,
            external_id__isnull=False,
        )
        .order_by("accepted_at", "pk")
        .first()
    )
    if stale is None:
        return
    Assignment.objects.filter(pk=stale.pk).update(status=AssignmentStatus.EXPIRED)
    hits_recount_slots(hit_ids=[hit.pk])
    logger.info("%s: MTurk assignment %s given up for a new one", hit, stale.external_id)


def _taken_over(assignment: Assignment, now: datetime) -> bool:
    """Say whether MTurk work was expired for another worker's slot, not for its time."""
    return (
        assignment.status == AssignmentStatus.EXPIRED
        and assignment.submitted_at is None
        and assignment.deadline is not None
        and assignment.deadline >= now
        and not assignment.worker.is_blocked
    )


def _reclaim(assignment: Assignment, now: datetime) -> Assignment:
    """Reopen MTurk work that `_free_returned_slot` expired while its worker was still on it."""
    if not _taken_over(assignment, now):
        return assignment
    with transaction.atomic():
        # The HIT's row before its assignments' (see assignments.hits_lock).
        hit = HIT.objects.select_for_update().get(pk=assignment.hit_id)
        locked = (
            Assignment.objects.select_for_update().select_related("worker").get(pk=assignment.pk)
        )
        if _taken_over(locked, now):
            _free_returned_slot(hit)
            active = Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()
            if active >= hit.max_assignments:
                raise ServiceError(f"{hit} already has all {hit.max_assignments} assignments")
            locked.status = AssignmentStatus.ACCEPTED
            locked.save(update_fields=["status"])
            hits_recount_slots(hit_ids=[hit.pk])
    return Assignment.objects.select_related("hit__batch", "worker").get(pk=assignment.pk)


def _by_external_id(assignment_id: str) -> Assignment | None:
    return (
        Assignment.objects.select_related("hit__batch", "worker")
        .filter(external_id=assignment_id)
        .first()
    )


def _follow_new_assignment(previous: Assignment, assignment_id: str, now: datetime) -> Assignment:
    if previous.status not in (AssignmentStatus.ACCEPTED, AssignmentStatus.EXPIRED):
        raise ServiceError(
            "you already submitted this HIT under another assignment: please return this one"
        )
    deadline = now + timedelta(minutes=batch_hit_settings(previous.hit.batch).assignment_minutes)
    with transaction.atomic():
        # The HIT's row before its assignments' (see assignments.hits_lock).
        hit = HIT.objects.select_for_update().get(pk=previous.hit_id)
        locked = Assignment.objects.select_for_update().get(pk=previous.pk)
        if locked.status == AssignmentStatus.EXPIRED:
            _free_returned_slot(hit)
            active = Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()
            if active >= hit.max_assignments:
                raise ServiceError(f"{hit} already has all {hit.max_assignments} assignments")
        locked.status = AssignmentStatus.ACCEPTED
        locked.external_id = assignment_id
        locked.confirmed_at = None  # MTurk has yet to confirm the new AssignmentId
        locked.deadline = deadline
        locked.save(update_fields=["status", "external_id", "confirmed_at", "deadline"])
        hits_recount_slots(hit_ids=[hit.pk])
    return Assignment.objects.select_related("hit__batch", "worker").get(pk=locked.pk)


def mturk_assignment_submit(
    *, assignment: Assignment, answers: Sequence[AnswerInput], now: datetime | None = None
) -> SubmissionResult:
    """Store the answers that an MTurk worker sent from the HIT page, as submitted work.

    The page is public and MTurk's ids in its URL cannot be checked here, so nothing is
    approved or rejected now: the answers are stored with the golden check's result
    (`golden_passed`, `flagged`) and `mturk_sync` applies the batch's golden policy once
    MTurk lists the assignment (same AssignmentId, WorkerId and HITId). Work that was given
    up for another worker's slot while its worker was still on it is reopened first.
    """
    now = now or timezone.now()
    assignment = _reclaim(
        Assignment.objects.select_related("hit__batch", "worker").get(pk=assignment.pk), now
    )
    return assignment_submit(
        assignment=assignment,
        answers=answers,
        followups_required=assignment.hit.batch.config.get("followups", True),
        golden_policy="review_all",  # the sync applies the batch's policy once MTurk confirms
        worker=assignment.worker,
        now=now,
    )


def mturk_assignment_find(*, assignment_id: str, worker_id: str, hit_id: str) -> Assignment | None:
    """Return the assignment that MTurk's id triple names, or None when any part differs."""
    if not all(mturk.valid_id(value) for value in (assignment_id, worker_id, hit_id)):
        return None
    return (
        Assignment.objects.select_related("hit__batch", "worker")
        .filter(
            external_id=assignment_id,
            worker__source=WorkerSource.MTURK,
            worker__external_id=worker_id,
            hit__external_id=hit_id,
        )
        .first()
    )


def hit_page_items(hit: HIT) -> list[dict[str, Any]]:
    """Return the pairs of the MTurk HIT page, in order, without roles, with signed images."""
    items = HITItem.objects.filter(hit=hit).select_related("image", "caption").order_by("position")
    return [
        {
            "id": item.pk,
            "position": item.position,
            "image_url": image_path(item.pk) if item.image.file else None,
            "caption": item.caption.text,
        }
        for item in items
    ]


# --- sync -------------------------------------------------------------------------------


@dataclass
class SyncReport:
    hits_checked: int = 0
    hits_settled: int = 0  # every possible assignment decided: not asked again
    approved: list[str] = field(default_factory=list)  # AssignmentIds approved now
    rejected: list[str] = field(default_factory=list)  # rejected now (missing ones included)
    replaced: list[str] = field(default_factory=list)  # rejected work re-posted
    waiting: list[str] = field(default_factory=list)  # wait for a person here
    missing: list[str] = field(default_factory=list)  # on MTurk, no judgements here (yet)
    missing_rejected: list[str] = field(default_factory=list)  # ...past MISSING_GRACE: rejected
    unconfirmed: list[str] = field(default_factory=list)  # stored here, not on MTurk yet
    dropped: list[str] = field(default_factory=list)  # never on MTurk in time: rejected here
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """Return the report as a person reads it, one line per fact."""
        out = [
            f"HITs checked: {self.hits_checked} (settled, skipped: {self.hits_settled})",
            f"approved on MTurk: {len(self.approved)}, rejected: {len(self.rejected)}, "
            f"re-posted: {len(self.replaced)}, waiting for review here: {len(self.waiting)}",
        ]
        for assignment_id in self.missing:
            out.append(
                f"MISSING {assignment_id}: submitted on MTurk, but its answers never reached "
                "the platform; decide by hand (it was not approved)"
            )
        grace = _hours(MISSING_GRACE)
        for assignment_id in self.missing_rejected:
            out.append(
                f"REJECTED {assignment_id} on MTurk: submitted there over {grace} ago, but no "
                "answers reached the platform"
            )
        for assignment_id in self.unconfirmed:
            out.append(
                f"not on MTurk yet: {assignment_id} (stored here, not submitted there; "
                "not approved until MTurk lists it)"
            )
        for assignment_id in self.dropped:
            out.append(
                f"NOT ON MTURK {assignment_id}: stored here, but MTurk never listed it before its "
                "time ran out; rejected here, not counted"
            )
        out += [f"PROBLEM {problem}" for problem in self.problems]
        return out


def _hours(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:g} hour" + ("" if hours == 1 else "s")


def mturk_sync(
    *, batch: Batch, client: Any = None, replace_rejected: bool = True, now: datetime | None = None
) -> SyncReport:
    """Bring MTurk and the platform in line on a batch's published HITs.

    Lists every MTurk assignment (all pages). Work that MTurk lists with the same
    AssignmentId, WorkerId and HITId as the platform stored is confirmed: the batch's
    golden policy decides it now (the HIT page only stores it), and the decision goes to
    MTurk: approve, reject with feedback naming the failed check pairs, or leave it to a
    person (whose later decision the next sync sends). Rejected work is re-posted
    (CreateAdditionalAssignmentsForHIT) while the batch still needs it. A submission
    whose answers never reached the platform is reported, never approved blindly, and
    rejected once `MISSING_GRACE` has passed since MTurk's SubmitTime, before MTurk's
    auto-approval pays for it. Work stored here that MTurk does not list stays
    unapproved. What was sent is recorded, so a second run sends nothing again; a HIT
    whose every possible assignment is decided is not listed again. Two syncs of one
    batch never overlap: the second raises `SyncRunning` before any call.
    """
    now = now or timezone.now()
    if not _state(batch).get("environment"):
        raise MTurkError(f"batch {batch.pk} is not published on MTurk")
    with _sync_lease(batch.pk):
        batch = Batch.objects.get(pk=batch.pk)
        state = dict(batch.mturk or {})
        client = client or mturk_client(production=state["environment"] == mturk.PRODUCTION)
        policy = batch.config.get("golden_policy", "approve_or_flag")
        report = SyncReport()
        hits = list(batch.hits.filter(external_id__isnull=False).order_by("index"))
        for hit in hits:
            sent = state.get("sent", {}).values()
            decided = sum(1 for entry in sent if entry.get("hit") == hit.pk)
            capacity = _mturk_capacity(state, hit)
            due = replace_rejected and batch.state == BatchState.ANNOTATING
            if decided >= capacity and not (due and _replacements_due(state, hit)):
                report.hits_settled += 1
                continue
            report.hits_checked += 1
            try:
                remote = list(
                    _pages(client, "list_assignments_for_hit", "Assignments", HITId=hit.external_id)
                )
            except MTurkError as exc:
                report.problems.append(f"HIT {hit.index} ({hit.external_id}): {exc}")
                continue
            state = _sync_hit(client, batch, hit, remote, report, policy, now)
            if replace_rejected:
                state = _replace_rejected(client, batch, hit, state, report, now)

        def finished(state: dict[str, Any]) -> None:
            state["last_sync_at"] = _now_iso(now)
            state["report"] = report.to_json()

        _state_update(batch.pk, finished)
    return report


@contextmanager
def _sync_lease(batch_id: int) -> Iterator[None]:
    """Hold the batch's sync lease (in Batch.mturk) for the block; SyncRunning if taken.

    Kept in the batch's row rather than in a database lock so that it works on every
    database and frees nothing while MTurk is called; a lease that its sync never gave back
    (a killed worker) lapses after SYNC_LEASE.
    """
    token = secrets.token_hex(8)
    start = timezone.now()
    holder: dict[str, Any] = {}

    def claim(state: dict[str, Any]) -> None:
        held = state.get("sync_lease") or {}
        if held and _parse_iso(held.get("until")) > start:
            holder.update(held)
            return
        state["sync_lease"] = {
            "token": token,
            "since": _now_iso(start),
            "until": _now_iso(start + SYNC_LEASE),
        }

    _state_update(batch_id, claim)
    if holder:
        raise SyncRunning(
            f"a sync of batch {batch_id} is already running (since {holder.get('since')}): "
            "this one sent nothing to MTurk"
        )
    try:
        yield
    finally:

        def release(state: dict[str, Any]) -> None:
            if (state.get("sync_lease") or {}).get("token") == token:
                del state["sync_lease"]

        _state_update(batch_id, release)


def _parse_iso(value: Any) -> datetime:
    """Return a stored ISO time; an unreadable one counts as long past."""
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return EXPIRED_AT
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _mturk_capacity(state: dict[str, Any], hit: HIT) -> int:
    """Return how many assignments MTurk may ever give out for a HIT (published + re-posted)."""
    published = state.get("max_assignments", {}).get(str(hit.pk), hit.max_assignments)
    return published + state.get("extra", {}).get(str(hit.pk), 0)


def _replacements_due(state: dict[str, Any], hit: HIT) -> bool:
    replaced = set(state.get("replaced", []))
    return any(
        entry.get("hit") == hit.pk and entry.get("decision") == "rejected" and aid not in replaced
        for aid, entry in state.get("sent", {}).items()
    )


# The platform's decisions as MTurk names them; work that waits for a person has none.
_MTURK_STATUS = {AssignmentStatus.APPROVED: "Approved", AssignmentStatus.REJECTED: "Rejected"}


def _sync_hit(
    client: Any,
    batch: Batch,
    hit: HIT,
    remote: list[dict[str, Any]],
    report: SyncReport,
    policy: str,
    now: datetime,
) -> dict[str, Any]:
    state = _state(batch)
    sent = state.get("sent", {})
    listed = {entry["AssignmentId"] for entry in remote}
    local = {
        a.external_id: a
        for a in Assignment.objects.select_related("worker").filter(
            hit=hit, external_id__isnull=False
        )
    }
    for entry in remote:
        aid, mturk_status = entry["AssignmentId"], entry.get("AssignmentStatus", "")
        if aid in sent:
            continue
        platform = local.get(aid)
        if platform is not None and platform.worker.external_id != entry.get("WorkerId"):
            report.problems.append(
                f"{aid}: MTurk names worker {entry.get('WorkerId')}, the platform "
                f"{platform.worker.external_id}"
            )
            continue
        if platform is not None and entry.get("HITId") != hit.external_id:
            report.problems.append(
                f"{aid}: MTurk lists it for HIT {entry.get('HITId')}, the platform for "
                f"{hit.external_id}"
            )
            continue
        if platform is None or platform.submitted_at is None:
            state = _sync_missing(client, batch, hit, entry, platform, report, now) or state
            continue
        # Confirmed by MTurk: now, and only now, the golden policy may decide the work
        # (not over a rejection made on MTurk's site: that disagreement goes to a person),
        # and a person may approve it.
        platform = _mark_confirmed(platform, now)
        if mturk_status in ("Submitted", "Approved"):
            platform = assignment_decide_confirmed(assignment=platform, policy=policy)
        if mturk_status != "Submitted":  # auto-approved, or decided in MTurk's web UI
            if _MTURK_STATUS.get(platform.status) != mturk_status:
                report.problems.append(
                    f"{aid}: {mturk_status} on MTurk, but {platform.status} here"
                )
            state = _record(batch, aid, hit, mturk_status.lower(), "mturk", now)
            continue
        if platform.status == AssignmentStatus.APPROVED:
            params = {"AssignmentId": aid}
            if platform.feedback.strip():
                params["RequesterFeedback"] = platform.feedback.strip()[: mturk.FEEDBACK_MAX]
            decision, method, bucket = "approved", "approve_assignment", report.approved
        elif platform.status == AssignmentStatus.REJECTED:
            feedback = mturk.rejection_feedback(
                reviewer_text=platform.feedback,
                misses=assignment_golden_misses(assignment_id=platform.pk),
            )
            params = {"AssignmentId": aid, "RequesterFeedback": feedback}
            decision, method, bucket = "rejected", "reject_assignment", report.rejected
        else:  # submitted: flagged or review_all, a person decides on the review page
            report.waiting.append(aid)
            continue
        try:
            _call(client, method, **params)
        except MTurkError as exc:
            report.problems.append(f"{aid}: {exc}")
            continue
        bucket.append(aid)
        state = _record(batch, aid, hit, decision, "platform", now)
    for aid, platform in local.items():
        if aid in listed or aid in sent or platform.submitted_at is None:
            continue
        if platform.confirmed_at is not None:  # in MTurk's results CSV: MTurk work for sure
            continue
        if _drop_unconfirmed(platform, now):
            report.dropped.append(aid)
        else:
            report.unconfirmed.append(aid)
    return state


def _mark_confirmed(assignment: Assignment, now: datetime) -> Assignment:
    """Record (once) that MTurk confirmed this work: from now on it may be approved."""
    if assignment.confirmed_at is None:
        Assignment.objects.filter(pk=assignment.pk, confirmed_at__isnull=True).update(
            confirmed_at=now
        )
        assignment.confirmed_at = now
    return assignment


def _sync_missing(
    client: Any,
    batch: Batch,
    hit: HIT,
    entry: dict[str, Any],
    platform: Assignment | None,
    report: SyncReport,
    now: datetime,
) -> dict[str, Any] | None:
    """Handle an MTurk submission without answers here; return the state if it changed.

    Decided on MTurk already: recorded. Still `Submitted` there and older than
    MISSING_GRACE (the answers are not merely on their way): rejected on MTurk, or MTurk's
    auto-approval would pay for work nobody can check (a worker may post to externalSubmit
    without ever using the HIT page). Otherwise reported, and nothing is sent.
    """
    aid, mturk_status = entry["AssignmentId"], entry.get("AssignmentStatus", "")
    if mturk_status != "Submitted":  # decided on MTurk already: nothing left to send
        report.missing.append(aid)
        return _record(batch, aid, hit, mturk_status.lower(), "mturk", now)
    submitted = entry.get("SubmitTime")
    if not isinstance(submitted, datetime) or submitted + MISSING_GRACE > now:
        report.missing.append(aid)
        return None
    try:
        _call(
            client, "reject_assignment", AssignmentId=aid, RequesterFeedback=mturk.MISSING_FEEDBACK
        )
    except MTurkError as exc:
        report.missing.append(aid)
        report.problems.append(f"{aid}: {exc}")
        return None
    if platform is not None:  # its page was opened but never sent answers: no late ones now
        with transaction.atomic():
            hits_lock(hit_ids=[hit.pk])  # before the assignment (see assignments.hits_lock)
            closed = Assignment.objects.filter(
                pk=platform.pk,
                status__in=[AssignmentStatus.ACCEPTED, AssignmentStatus.EXPIRED],
                submitted_at__isnull=True,
            ).update(status=AssignmentStatus.EXPIRED, deadline=now)  # never reclaimed
            if closed:
                hits_recount_slots(hit_ids=[hit.pk])
    report.rejected.append(aid)
    report.missing_rejected.append(aid)
    return _record(batch, aid, hit, "rejected", "platform", now)


def _drop_unconfirmed(assignment: Assignment, now: datetime) -> bool:
    """Reject (here only) stored work that MTurk never listed before its time ran out.

    MTurk abandons an assignment at the end of its duration, so work it still does not
    list by the deadline plus MISSING_GRACE never was MTurk work (made-up ids on the public
    page) or was given up: its slot goes back to the HIT, and it is never counted.
    """
    if (
        assignment.status != AssignmentStatus.SUBMITTED
        or assignment.deadline is None
        or assignment.deadline + MISSING_GRACE > now
    ):
        return False
    try:
        assignment_review(
            assignment=assignment,
            approve=False,
            feedback="Not submitted on MTurk: MTurk does not list this assignment for its HIT.",
        )
    except ServiceError:  # a person decided meanwhile
        return False
    return True


def _record(
    batch: Batch, aid: str, hit: HIT, decision: str, by: str, now: datetime
) -> dict[str, Any]:
    def store(state: dict[str, Any]) -> None:
        sent = dict(state.get("sent", {}))
        sent[aid] = {"decision": decision, "hit": hit.pk, "by": by, "at": _now_iso(now)}
        state["sent"] = sent

    return _state_update(batch.pk, store)


def _replace_rejected(
    client: Any, batch: Batch, hit: HIT, state: dict[str, Any], report: SyncReport, now: datetime
) -> dict[str, Any]:
    """Re-post one assignment per rejected one, while the HIT lacks approved work."""
    if batch.state != BatchState.ANNOTATING:
        return state
    replaced = set(state.get("replaced", []))
    due = [
        aid
        for aid, entry in state.get("sent", {}).items()
        if entry.get("hit") == hit.pk
        and entry.get("decision") == "rejected"
        and aid not in replaced
    ]
    for aid in due:
        active = Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()
        if active >= hit.max_assignments:  # the other slots hold (or will hold) enough work
            state = _state_update(batch.pk, partial(_mark_replaced, aid=aid, hit=hit, extra=0))
            continue
        try:
            _call(
                client,
                "create_additional_assignments_for_hit",
                HITId=hit.external_id,
                NumberOfAdditionalAssignments=1,
                UniqueRequestToken=mturk.request_token("mitl-replace", aid),
            )
        except MTurkError as exc:
            report.problems.append(f"re-posting HIT {hit.index} for {aid}: {exc}")
            continue
        report.replaced.append(aid)
        state = _state_update(batch.pk, partial(_mark_replaced, aid=aid, hit=hit, extra=1))
    return state


def _mark_replaced(state: dict[str, Any], *, aid: str, hit: HIT, extra: int) -> None:
    """Record a rejected assignment as handled: re-posted (extra=1) or not needed."""
    state["replaced"] = [*state.get("replaced", []), aid]
    if extra:
        counts = dict(state.get("extra", {}))
        counts[str(hit.pk)] = counts.get(str(hit.pk), 0) + extra
        state["extra"] = counts


def mturk_sync_recorded(*, batch: Batch, client: Any = None) -> list[str]:
    """Sync (see `mturk_sync`) and return the report's lines; a failure is kept as the
    batch's last report too, so the admin page shows it."""
    try:
        return mturk_sync(batch=batch, client=client).lines()
    except SyncRunning as exc:  # the running sync writes its own report
        return [str(exc)]
    except MTurkError as exc:
        message = str(exc)

    def failed(state: dict[str, Any]) -> None:
        state["report"] = {**SyncReport().to_json(), "problems": [message]}
        state["last_sync_at"] = _now_iso(timezone.now())

    _state_update(batch.pk, failed)
    return [f"PROBLEM {message}"]


def mturk_sync_published(*, clients: dict[str, Any] | None = None) -> dict[int, list[str]]:
    """Sync every batch published through the API; return each one's report lines.

    Batches whose HITs came back through the offline CSV path have HITIds but no
    environment: MTurk's web UI, not this sync, decides their work.
    """
    clients = dict(clients or {})
    reports: dict[int, list[str]] = {}
    batch_ids = (
        HIT.objects.filter(external_id__isnull=False).values_list("batch_id", flat=True).distinct()
    )
    for batch in Batch.objects.filter(pk__in=list(batch_ids)).order_by("pk"):
        environment = (batch.mturk or {}).get("environment")
        if environment is None:
            continue
        if environment not in clients:
            clients[environment] = mturk_client(production=environment == mturk.PRODUCTION)
        reports[batch.pk] = mturk_sync_recorded(batch=batch, client=clients[environment])
    return reports


# --- money, time and workers ------------------------------------------------------------


def _client_for(batch: Batch, client: Any) -> tuple[dict[str, Any], Any]:
    state = _state(batch)
    if not state.get("environment"):
        raise MTurkError(f"batch {batch.pk} is not published on MTurk")
    return state, client or mturk_client(production=state["environment"] == mturk.PRODUCTION)


def mturk_bonus_send(
    *,
    assignment: Assignment,
    amount: Decimal | str,
    reason: str,
    client: Any = None,
    now: datetime | None = None,
) -> bool:
    """Pay a bonus for an MTurk assignment, once; return False when it was already paid."""
    now = now or timezone.now()
    assignment = Assignment.objects.select_related("worker", "hit__batch").get(pk=assignment.pk)
    if assignment.worker.source != WorkerSource.MTURK or not assignment.external_id:
        raise MTurkError(f"{assignment} was not done on MTurk: no bonus can be sent there")
    try:
        money = mturk.parse_money(amount, what="the bonus")
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    reason = reason.strip()
    if not reason:
        raise MTurkError("say why the bonus is paid: the worker reads the reason")
    token = mturk.request_token("mitl-bonus", assignment.external_id)
    batch = assignment.hit.batch
    state, client = _client_for(batch, client)
    if token in state.get("bonuses", {}):
        return False
    _call(
        client,
        "send_bonus",
        WorkerId=assignment.worker.external_id,
        AssignmentId=assignment.external_id,
        BonusAmount=str(money),
        Reason=reason[: mturk.FEEDBACK_MAX],
        UniqueRequestToken=token,
    )

    def store(state: dict[str, Any]) -> None:
        bonuses = dict(state.get("bonuses", {}))
        bonuses[token] = {
            "assignment": assignment.external_id,
            "worker": assignment.worker.external_id,
            "amount": str(money),
            "reason": reason,
            "at": _now_iso(now),
        }
        state["bonuses"] = bonuses

    _state_update(batch.pk, store)
    return True


def mturk_hits_expire(*, batch: Batch, client: Any = None, now: datetime | None = None) -> int:
    """Take a batch's HITs off the market now (work already accepted can still be sent)."""
    return _hits_expiration(batch=batch, until=EXPIRED_AT, client=client, now=now)


def mturk_hits_extend(
    *, batch: Batch, hours: int, client: Any = None, now: datetime | None = None
) -> int:
    """Keep a batch's HITs on the market until `hours` from now."""
    if not 1 <= hours <= 365 * 24:
        raise MTurkError(f"extend by 1 to {365 * 24} hours (got {hours})")
    now = now or timezone.now()
    return _hits_expiration(batch=batch, until=now + timedelta(hours=hours), client=client, now=now)


def _hits_expiration(*, batch: Batch, until: datetime, client: Any, now: datetime | None) -> int:
    now = now or timezone.now()
    _, client = _client_for(batch, client)
    problems, changed = [], 0
    for hit in batch.hits.filter(external_id__isnull=False).order_by("index"):
        try:
            _call(client, "update_expiration_for_hit", HITId=hit.external_id, ExpireAt=until)
            changed += 1
        except MTurkError as exc:
            problems.append(f"HIT {hit.index} ({hit.external_id}): {exc}")

    def store(state: dict[str, Any]) -> None:
        state["expires_at"] = _now_iso(max(until, now) if until != EXPIRED_AT else now)

    _state_update(batch.pk, store)
    if problems:
        raise MTurkError(f"{changed} HITs changed; " + "; ".join(problems))
    return changed


def mturk_worker_block(
    *, worker: Worker, reason: str, production: bool, client: Any = None
) -> Worker:
    """Block a worker on MTurk (CreateWorkerBlock) and on the platform."""
    if worker.source != WorkerSource.MTURK:
        raise MTurkError(f"{worker} is not an MTurk worker")
    reason = reason.strip()
    if not reason:
        raise MTurkError("say why the worker is blocked: MTurk shows the reason to the worker")
    client = client or mturk_client(production=production)
    _call(client, "create_worker_block", WorkerId=worker.external_id, Reason=reason[:1024])
    return worker_block(worker=worker, blocked=True)


# --- the offline path: export for MTurk's web UI, import its results ---------------------


@dataclass(frozen=True)
class ExportFiles:
    input_csv: str
    layout_html: str
    hits: int
    skipped: int  # published through the API already


def mturk_export(*, batch: Batch, base_url: str | None = None) -> ExportFiles:
    """Return a batch's MTurk batch-input CSV and crowd-form layout (HITs not yet published)."""
    if batch.state != BatchState.ANNOTATING:
        raise MTurkError(f"batch {batch.pk} is {batch.state}: export a batch in annotating state")
    try:
        base = mturk.external_base_url(
            settings.MTURK_EXTERNAL_BASE_URL if base_url is None else base_url, production=True
        )
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    rows, skipped = [], 0
    items_of: dict[int, list[mturk.InputItem]] = {}
    for item in (
        HITItem.objects.filter(hit__batch=batch)
        .select_related("image", "caption")
        .order_by("hit__index", "position")
    ):
        url = base + image_path(item.pk) if item.image.file else ""
        items_of.setdefault(item.hit_id, []).append(
            mturk.InputItem(item_id=item.pk, image_url=url, caption=item.caption.text)
        )
    for hit in batch.hits.order_by("index"):
        if hit.external_id:
            skipped += 1
            continue
        rows.append(
            mturk.InputHit(batch_id=batch.pk, hit_id=hit.pk, items=items_of.get(hit.pk, []))
        )
    if not rows:
        raise MTurkError(f"batch {batch.pk} has no HIT left to export")
    width = max(len(row.items) for row in rows)
    layout = mturk.layout_html(pairs=width, followups=parse_batch_config(batch.config).followups)
    return ExportFiles(
        input_csv=mturk.batch_input_csv(rows), layout_html=layout, hits=len(rows), skipped=skipped
    )


@dataclass
class ImportReport:
    imported: int = 0
    already: int = 0
    errors: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    # AssignmentId → (approve, feedback), or None while the work waits for a person
    decisions: dict[str, tuple[bool, str] | None] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)


def mturk_results_import(
    *, batch: Batch, text: str, source: str, now: datetime | None = None
) -> ImportReport:
    """Store the assignments of MTurk's batch-results CSV through the submit service.

    Each row becomes an assignment of its MTurk worker with its judgements, and the golden
    check applies as for any submission. A row already imported (same AssignmentId) is
    counted, not stored again. A file that does not parse imports nothing; a row the
    service refuses is reported as `file:line: why`, and the others are imported.
    """
    if batch.state != BatchState.ANNOTATING:
        raise MTurkError(
            f"batch {batch.pk} is {batch.state}: import results while it is annotating, "
            "before its verdicts are aggregated"
        )
    rows, errors = mturk.parse_results_csv(text, source=source)
    report = ImportReport(errors=errors)
    if errors:
        return report
    config = parse_batch_config(batch.config)
    hits = batch.hits.in_bulk([row.hit_id for row in rows])
    for row in rows:
        where = f"{source}:{row.line}"
        hit = hits.get(row.hit_id)
        if hit is None:
            report.errors.append(f"{where}: HIT {row.hit_id} is not a HIT of batch {batch.pk}")
            continue
        if hit.external_id not in (None, row.hit_external_id):
            report.errors.append(
                f"{where}: HIT {row.hit_id} is MTurk HIT {hit.external_id}, not "
                f"{row.hit_external_id}"
            )
            continue
        try:
            assignment, created = _import_row(hit, row, config, now)
        except (ServiceError, IntegrityError) as exc:
            report.errors.append(f"{where}: {exc}")
            continue
        hit.external_id = row.hit_external_id
        if created:
            report.imported += 1
        else:
            report.already += 1
        report.statuses[assignment.status] += 1
        report.decisions[row.assignment_external_id] = _decision(assignment)
        if row.status != "Submitted" and _MTURK_STATUS.get(assignment.status) != row.status:
            report.disagreements.append(
                f"{where}: {row.assignment_external_id} is {row.status} on MTurk but "
                f"{assignment.status} here"
            )
    return report


def _import_row(
    hit: HIT, row: mturk.ResultRow, config: Any, now: datetime | None
) -> tuple[Assignment, bool]:
    existing = _by_external_id(row.assignment_external_id)
    if existing is not None:
        if existing.hit_id != hit.pk or existing.worker.external_id != row.worker_external_id:
            raise ServiceError(
                f"assignment {row.assignment_external_id} is stored for another HIT or worker"
            )
        if existing.submitted_at is None or existing.confirmed_at is not None:
            return existing, False
        # Stored from the HIT page and now in MTurk's own results: confirmed, so the
        # batch's golden policy decides it, as the sync would.
        confirmed = _mark_confirmed(existing, now or timezone.now())
        return assignment_decide_confirmed(assignment=confirmed, policy=config.golden_policy), False
    worker, _ = Worker.objects.get_or_create(
        source=WorkerSource.MTURK, external_id=row.worker_external_id
    )
    submitted = row.submit_time or now or timezone.now()
    answers = answers_from_rows(row.answers)
    with transaction.atomic():  # all of the row, or nothing
        if hit.external_id is None:
            HIT.objects.filter(pk=hit.pk).update(external_id=row.hit_external_id)
        assignment = assignment_create(hit=hit, worker=worker, now=submitted)
        Assignment.objects.filter(pk=assignment.pk).update(
            external_id=row.assignment_external_id,
            confirmed_at=now or timezone.now(),  # the file comes from MTurk's results page
            **({"accepted_at": row.accept_time} if row.accept_time else {}),
        )
        result = assignment_submit(
            assignment=assignment,
            answers=answers,
            followups_required=config.followups,
            golden_policy=config.golden_policy,
            worker=worker,
            now=submitted,
        )
    return result.assignment, True


def _decision(assignment: Assignment) -> tuple[bool, str] | None:
    if assignment.status == AssignmentStatus.APPROVED:
        return True, ""
    if assignment.status == AssignmentStatus.REJECTED:
        feedback = mturk.rejection_feedback(
            reviewer_text=assignment.feedback,
            misses=assignment_golden_misses(assignment_id=assignment.pk),
        )
        return False, feedback
    return None
