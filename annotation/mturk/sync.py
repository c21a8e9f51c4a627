"""Bringing MTurk and the platform in line on a batch's published HITs.

A sync lists every HIT's assignments on MTurk (all pages), hands each HIT to
`sync_assignments` (confirm, decide by the golden policy, send), re-posts rejected work
(`repost`), and keeps its report in `Batch.mturk`. Two syncs of one batch never overlap:
a sync holds a lease in `Batch.mturk["sync_lease"]`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from annotation.models import HIT, Batch, BatchState
from mitl.config import ConfigError, batch_config

from .client import mturk_client_for, mturk_pages
from .errors import MTurkError, SyncRunning
from .protocol import PRODUCTION
from .repost import hit_settled, rejected_repost
from .state import is_production, now_iso, parse_iso, state_published, state_update
from .sync_assignments import hit_assignments_sync
from .sync_report import SyncReport, SyncRun

# A sync holds this lease on its batch; longer than the sync task's time limit (30 min), so
# a lease left by a killed sync lapses by itself soon after.
SYNC_LEASE = timedelta(minutes=31)


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
    state_published(batch)
    with _sync_lease(batch.pk):
        batch = Batch.objects.get(pk=batch.pk)
        state = dict(batch.mturk or {})
        client = mturk_client_for(production=is_production(state), client=client)
        policy = batch_config(batch).golden_policy
        run = SyncRun(client=client, batch=batch, report=SyncReport(), policy=policy, now=now)
        for hit in batch.hits.filter(external_id__isnull=False).order_by("index"):
            state = _hit_sync(run, hit, state, replace_rejected=replace_rejected)
        _sync_finish(batch, run.report, now)
    return run.report


def _hit_sync(
    run: SyncRun, hit: HIT, state: dict[str, Any], *, replace_rejected: bool
) -> dict[str, Any]:
    """Sync one published HIT, unless it is settled; return the new state."""
    report = run.report
    reposting = replace_rejected and run.batch.state == BatchState.ANNOTATING
    if hit_settled(state, hit, reposting=reposting):
        report.hits_settled += 1
        return state
    report.hits_checked += 1
    try:
        remote = list(
            mturk_pages(
                run.client, "list_assignments_for_hit", "Assignments", HITId=hit.external_id
            )
        )
    except MTurkError as exc:
        report.problems.append(f"HIT {hit.pk} ({hit.external_id}): {exc}")
        return state
    state = hit_assignments_sync(run, hit, remote)
    if replace_rejected:
        state = rejected_repost(run, hit, state)
    return state


def _sync_finish(batch: Batch, report: SyncReport, now: datetime) -> None:
    """Keep the sync's report and time on the batch, for the admin's page."""

    def finished(state: dict[str, Any]) -> None:
        state["last_sync_at"] = now_iso(now)
        state["report"] = report.to_json()

    state_update(batch.pk, finished)


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
        if held and parse_iso(held.get("until")) > start:
            holder.update(held)
            return
        state["sync_lease"] = {
            "token": token,
            "since": now_iso(start),
            "until": now_iso(start + SYNC_LEASE),
        }

    state_update(batch_id, claim)
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

        state_update(batch_id, release)


def mturk_sync_recorded(*, batch: Batch, client: Any = None) -> list[str]:
    """Sync (see `mturk_sync`) and return the report's lines; a failure is kept as the
    batch's last report too, so the admin page shows it."""
    try:
        return mturk_sync(batch=batch, client=client).lines()
    except SyncRunning as exc:  # the running sync writes its own report
        return [str(exc)]
    except (MTurkError, ConfigError) as exc:  # one batch's problem never stops the others
        message = str(exc)
    _sync_finish(batch, SyncReport(problems=[message]), timezone.now())
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
            clients[environment] = mturk_client_for(production=environment == PRODUCTION)
        reports[batch.pk] = mturk_sync_recorded(batch=batch, client=clients[environment])
    return reports
