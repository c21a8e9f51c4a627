"""Asking MTurk itself about an AssignmentId that arrived through the public HIT page.

The page cannot tell a real (assignmentId, workerId) pair from a made-up one. MTurk can, but
only once the worker has submitted there: `GetAssignment` answers for Submitted, Approved
and Rejected assignments, and not for one still being worked on. The HIT page posts the
answers here first and to MTurk right after, so a genuine submission is known to MTurk
seconds after it is stored here; `VERIFY_AFTER` leaves it a margin. A short one: while a
HIT's pool is full its newcomers wait (`hit_page`), and only work that was asked about
leaves the pool; asking a little early costs genuine work nothing (set apart, kept, still
confirmed by the sync).

The answers (`MTurkCheck`) never delete anything and never decide anything: MTurk-confirmed
work leaves the HIT's unverified pool (the sync would confirm it anyway); work MTurk did not
know, or has for another HIT or worker, is set apart from the pool, kept, and still
confirmed by the sync if MTurk lists it later. Calls are short (one try, seconds-long
timeouts: `client.QUICK_TIMEOUTS_S`) because a page request waits for them; MTurk out of
reach leaves all as it was.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db.models import QuerySet
from redis.exceptions import RedisError

from annotation.models import HIT, Assignment, AssignmentStatus, MTurkCheck, mturk_unconfirmed

from .client import mturk_client
from .confirmation import assignment_mark_confirmed
from .state import is_production, state_read

logger = logging.getLogger(__name__)

# A genuine worker's browser submits to MTurk right after storing the answers here. Not
# minutes: a flood's fresh submissions would lock a HIT's newcomers out until then (the soak's
# `mturk` part: genuine workers refused for the 2 minutes this once was).
VERIFY_AFTER = timedelta(seconds=10)
# One page request spends at most this long asking MTurk, once per HIT per interval.
VERIFY_BUDGET_S = 5.0
VERIFY_EVERY_S = 30
# MTurk's answer for an AssignmentId it does not have (or not in a state it shows).
NOT_FOUND_CODES = frozenset({"RequestError", "ResourceNotFoundException"})


@dataclass
class PoolCheck:
    """What one round of questions to MTurk found (AssignmentIds)."""

    confirmed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    unreachable: bool = False


def unverified_pool(hit: HIT) -> QuerySet[Assignment]:
    """Return a HIT's submitted MTurk work that MTurk has neither confirmed nor been asked
    about: the work whose count per HIT is bounded (`hit_page.UNVERIFIED_SPARE`)."""
    return Assignment.objects.filter(
        mturk_unconfirmed(),
        hit=hit,
        status=AssignmentStatus.SUBMITTED,
        mturk_check=MTurkCheck.UNCHECKED,
    )


def hit_pool_verify(
    hit: HIT, *, now: datetime, client: Any = None, budget_s: float = VERIFY_BUDGET_S
) -> PoolCheck:
    """Ask MTurk about a HIT's unverified pool (work stored at least `VERIFY_AFTER` ago),
    oldest first, within `budget_s`; at most once per `VERIFY_EVERY_S` per HIT."""
    check = PoolCheck()
    asked = list(
        unverified_pool(hit)
        .filter(submitted_at__lte=now - VERIFY_AFTER)
        .select_related("worker")
        .order_by("submitted_at", "pk")
    )
    if not asked or not _verify_turn(hit):
        return check
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        production = is_production(state_read(hit.batch))
        client = client or mturk_client(production=production, quick=True)
    except BotoCoreError as exc:
        logger.warning("%s: no MTurk client to verify with (%s)", hit, exc)
        check.unreachable = True
        return check
    started = time.monotonic()
    for assignment in asked:
        if time.monotonic() - started > budget_s:
            break
        try:
            entry = client.get_assignment(AssignmentId=assignment.external_id)["Assignment"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in NOT_FOUND_CODES:
                check.unreachable = True  # throttled, refused, down: ask another time
                break
            _check_record(assignment, MTurkCheck.UNKNOWN, check.unknown)
        except BotoCoreError as exc:  # unreachable, timed out, no credentials
            logger.warning("%s: MTurk cannot be asked now (%s)", hit, exc)
            check.unreachable = True
            break
        else:
            _entry_record(hit, assignment, entry, now, check)
    return check


def _entry_record(
    hit: HIT, assignment: Assignment, entry: dict[str, Any], now: datetime, check: PoolCheck
) -> None:
    """Confirm work MTurk has for this HIT and worker; set apart work it has for others."""
    if entry.get("HITId") == hit.external_id and entry.get("WorkerId") == (
        assignment.worker.external_id
    ):
        assignment_mark_confirmed(assignment, now)
        check.confirmed.append(assignment.external_id)
    else:
        _check_record(assignment, MTurkCheck.DENIED, check.denied)


def _check_record(assignment: Assignment, answer: str, bucket: list[str]) -> None:
    Assignment.objects.filter(pk=assignment.pk, confirmed_at__isnull=True).update(
        mturk_check=answer
    )
    bucket.append(assignment.external_id)


def _verify_turn(hit: HIT) -> bool:
    """Claim this HIT's turn to ask MTurk (once per `VERIFY_EVERY_S`); a cache that does not
    answer gives the turn (the budget still bounds the call)."""
    try:
        return bool(cache.add(f"mturk-verify:{hit.pk}", 1, timeout=VERIFY_EVERY_S))
    except RedisError as exc:
        logger.warning("MTurk verification turns: the cache does not answer (%s)", exc)
        return True
