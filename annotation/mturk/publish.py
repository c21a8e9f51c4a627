"""Publishing a batch's HITs on MTurk as ExternalQuestions.

Idempotent: a HIT that has its HITId is never created again, a run interrupted between
MTurk's answer and our write finds its HITs again by their RequesterAnnotation, and each
CreateHIT carries a UniqueRequestToken for the same window on MTurk's side. Row locks
follow `handout.hits_lock`: the HIT's row before any of its assignments'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.handout import ACTIVE_STATUSES
from annotation.models import HIT, Assignment, Batch, BatchState
from mitl.costs import CostEstimate

from .client import mturk_call, mturk_client_for, mturk_pages
from .errors import MTurkError, MTurkInputError
from .hit_settings import batch_hit_settings, mturk_batch_cost
from .hit_type import HitTypeSettings, hit_type_request
from .links import hit_page_path, public_base_url
from .protocol import (
    PRODUCTION,
    SANDBOX,
    external_question_xml,
    publication_nonce,
    request_token,
    requester_annotation,
    worker_preview_url,
)
from .qualification import mturk_qualification_ensure, mturk_qualification_requirement
from .state import now_iso, state_update
from .wages import wage_warnings

logger = logging.getLogger(__name__)


@dataclass
class PublishResult:
    environment: str
    hit_type_id: str
    qualification_type_id: str = ""  # the batch's qualification round on MTurk, if any
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

    Resumes where an earlier run stopped (see the module's docstring). The HITTypeId,
    environment and cost estimate are stored on the batch.
    """
    batch = Batch.objects.get(pk=batch.pk)
    now = now or timezone.now()
    environment = PRODUCTION if production else SANDBOX
    hits = _hits_publishable(batch, environment=environment)
    base, hit_settings = _publication_target(batch, base_url=base_url, production=production)
    already = sum(1 for hit in hits if hit.external_id)
    result = PublishResult(
        environment=environment,
        hit_type_id="",
        already=already,
        warnings=_publication_warnings(base, hit_settings, production=production, batch=batch),
    )
    cost = mturk_batch_cost(batch=batch, hit_settings=hit_settings)
    result.cost = cost.to_json()
    client = mturk_client_for(production=production, client=client)
    state = batch.mturk or {}
    # Before the HIT type: its requirement names the qualification type.
    result.qualification_type_id = (
        mturk_qualification_ensure(batch=batch, client=client, production=production, base_url=base)
        or ""
    )
    requirement = (
        mturk_qualification_requirement(batch=batch, production=production)
        if result.qualification_type_id
        else None
    )
    result.hit_type_id = _hit_type_ensure(
        client,
        state,
        hit_settings,
        production=production,
        reuse=already > 0,
        qualification=requirement,
    )
    resumed = "publish_started_at" in state
    nonce = _publication_start(
        batch,
        environment=environment,
        hit_type_id=result.hit_type_id,
        hit_settings=hit_settings,
        cost=cost,
        now=now,
    )
    todo = [hit for hit in hits if not hit.external_id]
    if todo and resumed:
        result.recovered, todo = _hits_recover(client, batch, todo, result.hit_type_id, now)
    group_id = _hits_create(
        client,
        batch,
        todo,
        result,
        hit_settings=hit_settings,
        base=base,
        nonce=nonce,
        total=len(hits),
        group_id=state.get("hit_group_id", ""),
        progress=progress,
        now=now,
    )
    _publication_finish(batch, group_id=group_id, now=now)
    if group_id:
        result.preview_url = worker_preview_url(environment, group_id)
    return result


def mturk_publish_check(*, batch: Batch, production: bool) -> None:
    """Refuse now, without calling MTurk, what the queued publication would refuse.

    The batch's state and HITs, the public base URL the HIT pages need, the HIT settings:
    the admin page checks them before it queues the publication, so a missing
    MTURK_EXTERNAL_BASE_URL is an error message there, not a report line later.
    """
    _hits_publishable(batch, environment=PRODUCTION if production else SANDBOX)
    _publication_target(batch, base_url=None, production=production)


def _hits_publishable(batch: Batch, *, environment: str) -> list[HIT]:
    """Return the batch's HITs in order, or refuse a batch that cannot go to `environment`."""
    if batch.state != BatchState.ANNOTATING:
        raise MTurkError(
            f"batch {batch.pk} is {batch.state}: only a batch in the annotating state, with "
            "its HITs built, can be published (run `batch_run BATCH --until annotating`)"
        )
    hits = list(batch.hits.order_by("index"))
    if not hits:
        raise MTurkError(f"batch {batch.pk} has no HITs to publish")
    state = batch.mturk or {}
    published = any(hit.external_id for hit in hits)
    if published and state.get("environment") not in (None, environment):
        raise MTurkError(_other_environment_message(batch, state["environment"]))
    return hits


def _other_environment_message(batch: Batch, environment: str) -> str:
    if environment == SANDBOX:
        return (
            f"batch {batch.pk} is published on the sandbox: reset it first "
            f"(`mturk_publish {batch.pk} --reset-sandbox` expires the sandbox HITs and deletes "
            "their test assignments), then publish on production"
        )
    return f"batch {batch.pk} is published on production: it cannot go to the sandbox too"


def _publication_target(
    batch: Batch, *, base_url: str | None, production: bool
) -> tuple[str, HitTypeSettings]:
    """Return the public base URL the HITs point at, and the batch's HIT type settings."""
    base = public_base_url(base_url, production=production)
    try:
        return base, batch_hit_settings(batch)
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc


def _publication_warnings(
    base: str, hit_settings: HitTypeSettings, *, production: bool, batch: Batch
) -> list[str]:
    """Return what the person publishing should know, though nothing stops the publication."""
    warnings = []
    if not base.startswith("https://"):
        warnings.append(
            f"{base} is not HTTPS: MTurk's sandbox may refuse it, and workers' browsers "
            "block a plain HTTP page inside MTurk's HTTPS site"
        )
    if not production and (hit_settings.min_approval_rate or hit_settings.min_approved_hits):
        warnings.append(
            "sandbox: the approval-rate and approved-HITs requirements are left out "
            "(sandbox workers have no history); production applies them"
        )
    warnings.extend(wage_warnings(batch=batch))  # fair pay: never blocks the publication
    return warnings


def _hit_type_ensure(
    client: Any,
    state: dict[str, Any],
    hit_settings: HitTypeSettings,
    *,
    production: bool,
    reuse: bool,
    qualification: dict[str, Any] | None = None,
) -> str:
    """Return the HITTypeId: the stored one once HITs are published, else MTurk's answer."""
    hit_type_id = state.get("hit_type_id") if reuse else None
    if hit_type_id:
        return hit_type_id
    # MTurk answers the same HITTypeId for the same settings, and another one for another
    # qualification requirement.
    request = hit_type_request(hit_settings, sandbox=not production, qualification=qualification)
    return mturk_call(client, "create_hit_type", **request)["HITTypeId"]


def _publication_start(
    batch: Batch,
    *,
    environment: str,
    hit_type_id: str,
    hit_settings: HitTypeSettings,
    cost: CostEstimate,
    now: datetime,
) -> str:
    """Record the publication on the batch; return the nonce of its request tokens.

    A resumed publication keeps its start time, hence its tokens (see `publication_nonce`).
    """

    def started(state: dict[str, Any]) -> None:
        state.update(
            environment=environment,
            hit_type_id=hit_type_id,
            settings=hit_settings.to_json(),
            cost_estimate=cost.to_json(),
        )
        state.setdefault("publish_started_at", now_iso(now))

    return publication_nonce(state_update(batch.pk, started)["publish_started_at"])


def _hits_recover(
    client: Any, batch: Batch, todo: list[HIT], hit_type_id: str, now: datetime
) -> tuple[int, list[HIT]]:
    """Find HITs an interrupted run created but did not record, by their annotation.

    Returns how many were found, and the HITs still to create.
    """
    wanted = {requester_annotation(batch.pk, hit.pk): hit for hit in todo}
    found = 0
    for remote in mturk_pages(client, "list_hits", "HITs"):
        hit = wanted.pop(remote.get("RequesterAnnotation", ""), None)
        if hit is not None and remote.get("HITTypeId") == hit_type_id:
            HIT.objects.filter(pk=hit.pk).update(external_id=remote["HITId"], published_at=now)
            found += 1
        if not wanted:
            break
    recovered = set(batch.hits.filter(external_id__isnull=False).values_list("pk", flat=True))
    return found, [hit for hit in todo if hit.pk not in recovered]


def _hits_create(
    client: Any,
    batch: Batch,
    todo: list[HIT],
    result: PublishResult,
    *,
    hit_settings: HitTypeSettings,
    base: str,
    nonce: str,
    total: int,
    group_id: str,
    progress: Callable[[int, int], None] | None,
    now: datetime,
) -> str:
    """Create the HITs still to publish, counting them in `result`; return the HITGroupId."""
    common = {
        "HITTypeId": result.hit_type_id,
        "LifetimeInSeconds": hit_settings.lifetime_hours * 3600,
    }
    for done, hit in enumerate(todo, start=1):
        # Same publication, same token: a resumed publish repeats it; a new one does not.
        token = request_token("mitl", result.environment, nonce, batch.pk, hit.pk)
        try:
            outcome, created = _hit_create(
                client,
                batch,
                hit,
                common=common,
                url=base + hit_page_path(hit),
                token=token,
                now=now,
            )
        except MTurkError as exc:
            on_mturk = result.already + result.recovered + result.created
            raise MTurkError(
                f"{on_mturk} of {total} HITs are on MTurk; then {exc}. Run the publish "
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
        logger.info("batch %s: HIT %s published as %s", batch.pk, hit.pk, created["HITId"])
        if progress:
            progress(done, len(todo))
    return group_id


def _hit_create(
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
        answer = mturk_call(
            client,
            "create_hit_with_hit_type",
            **common,
            MaxAssignments=slots,
            Question=external_question_xml(url),
            RequesterAnnotation=requester_annotation(batch.pk, locked.pk),
            UniqueRequestToken=token,
        )
        created = answer["HIT"]
        HIT.objects.filter(pk=locked.pk).update(external_id=created["HITId"], published_at=now)
        if slots != locked.max_assignments:
            state_update(batch.pk, partial(_note_capacity, hit=locked, slots=slots))
    return "created", created


def _note_capacity(state: dict[str, Any], *, hit: HIT, slots: int) -> None:
    """Record that a HIT went to MTurk with fewer slots than its own."""
    capacity = dict(state.get("max_assignments", {}))
    capacity[str(hit.pk)] = slots
    state["max_assignments"] = capacity


def _publication_finish(batch: Batch, *, group_id: str, now: datetime) -> None:
    """Record the end of the publication, and the HIT group for the worker preview link."""

    def finished(state: dict[str, Any]) -> None:
        state["published_at"] = now_iso(now)
        if group_id:
            state["hit_group_id"] = group_id

    state_update(batch.pk, finished)


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
        if result.qualification_type_id:
            lines.append(f"qualification type {result.qualification_type_id}")
        if result.preview_url:
            lines.append(f"workers see them at {result.preview_url}")

    def store(state: dict[str, Any]) -> None:
        state["last_publish"] = {"at": now_iso(timezone.now()), "lines": lines}

    state_update(batch.pk, store)
    if lines[0].startswith("PROBLEM"):
        raise MTurkError(lines[0].removeprefix("PROBLEM "))
    return lines
