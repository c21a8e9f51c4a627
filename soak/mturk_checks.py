"""After the forged flood: the page's verification and the sync, then the database against
what genuine workers and forged clients were told (docs/soak.md, part `mturk`).

Run in the soak's own process, through Django, after the load (`mturk.MTurkFlood.load`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .mturk import FloodStats, GenuineWork, MTurkFlood


def mturk_report(flood: MTurkFlood) -> dict[str, Any]:
    """The part's figures: promised zeros first, then what happened (see docs/soak.md)."""
    from django.db import connections

    from annotation.models import Batch
    from annotation.mturk.sync import mturk_sync

    connections.close_all()  # this process's connections may have died with PostgreSQL
    stats = flood.stats
    genuine_ids = {work.assignment_id for work in stats.genuine}
    pools = _unverified_pools(flood.batch_id)
    verified = _verify_as_later(flood.batch_id)
    sync = mturk_sync(batch=Batch.objects.get(pk=flood.batch_id))
    lost = _genuine_lost(stats.genuine)
    forged = _forged_rows(flood.batch_id, genuine_ids)
    return {
        "genuine_lost": len(lost),
        "genuine_lost_examples": lost[:3],
        "genuine_refused": len(stats.refused),
        "genuine_refused_examples": stats.refused[:3],
        "genuine_longest_busy_wait_s": round(stats.longest_busy_wait_s, 1),
        "forged_confirmed": forged["confirmed"],
        "server_errors_other_than_503": sum(
            n
            for key, n in stats.statuses.items()
            if key.split()[-1].startswith("5") and not key.endswith(" 503")
        ),
        "genuine_workers": len(stats.genuine)
        + sum(1 for what in stats.refused if what.startswith("accept")),
        "genuine_accepted": sum(1 for work in stats.genuine if work.answers is not None),
        "forged_attempts": stats.forged_attempts,
        "forged_429": _count(stats, "forged", "429"),
        "forged_rows_stored": forged["rows"],
        "forged_submitted": forged["submitted"],
        "max_unverified_on_one_hit": max(pools, default=0),
        "unverified_bound": _pool_bound(),
        "verified_later": verified,
        "sync": {
            "approved": len(sync.approved),
            "waiting_for_review": len(sync.waiting),
            "rejected": len(sync.rejected),
            "unconfirmed": len(sync.unconfirmed),
            "missing": len(sync.missing),
            "problems": len(sync.problems),
            "problem_examples": sync.problems[:3],
        },
        "mturk_calls": dict(sorted(flood.standin.calls.items())),
        "seconds": stats.seconds,
        "statuses": dict(sorted(stats.statuses.items())),
    }


def _count(stats: FloodStats, side: str, status: str) -> int:
    return sum(
        n for key, n in stats.statuses.items() if key.startswith(side) and key.endswith(status)
    )


def _pool_bound() -> int:
    from annotation.mturk.hit_page import UNVERIFIED_SPARE

    from .mturk import MAX_ASSIGNMENTS

    return MAX_ASSIGNMENTS + UNVERIFIED_SPARE


def _unverified_pools(batch_id: int) -> list[int]:
    """Each HIT's unverified pool (submitted MTurk work MTurk has not vouched for) now."""
    from annotation.models import HIT
    from annotation.mturk.verify import unverified_pool

    return [unverified_pool(hit).count() for hit in HIT.objects.filter(batch_id=batch_id)]


def _verify_as_later(batch_id: int) -> dict[str, int]:
    """Ask the stand-in about every HIT's unverified pool, as the page does once the work is
    `VERIFY_AFTER` old (the run is shorter than that): forged work must come back unknown,
    never confirmed. The page's once-per-HIT turn in the cache is given back first."""
    from django.core.cache import cache
    from django.utils import timezone

    from annotation.models import HIT
    from annotation.mturk.verify import VERIFY_AFTER, hit_pool_verify

    later = timezone.now() + VERIFY_AFTER + timedelta(seconds=1)
    found = {"confirmed": 0, "unknown": 0, "denied": 0, "unreachable": 0}
    for hit in HIT.objects.filter(batch_id=batch_id).select_related("batch"):
        cache.delete(f"mturk-verify:{hit.pk}")  # verify._verify_turn's key
        check = hit_pool_verify(hit, now=later, budget_s=60.0)
        found["confirmed"] += len(check.confirmed)
        found["unknown"] += len(check.unknown)
        found["denied"] += len(check.denied)
        found["unreachable"] += int(check.unreachable)
    return found


def _genuine_lost(genuine: list[GenuineWork]) -> list[str]:
    """Genuine work answered 2xx whose answers are not all stored as sent, or that neither
    the verification nor the sync confirmed."""
    from annotation.models import Judgement
    from annotation.mturk.hit_page import mturk_assignment_find
    from annotation.pages import page_numbers

    lost = []
    for work in genuine:
        if work.answers is None:
            continue  # refused, counted there
        stored = mturk_assignment_find(
            assignment_id=work.assignment_id, worker_id=work.worker_id, hit_id=work.hit_id
        )
        if stored is None:
            lost.append(f"{work.assignment_id}: no such assignment stored")
            continue
        number = page_numbers(assignment=stored)
        mine = {
            number.get(item): level
            for item, level in Judgement.objects.filter(assignment=stored).values_list(
                "item_id", "level"
            )
        }
        sent = {answer["item"]: answer["level"] for answer in work.answers}
        if mine != sent:
            lost.append(f"{work.assignment_id}: {len(mine)} of {len(sent)} answers as sent")
        elif stored.confirmed_at is None:
            lost.append(f"{work.assignment_id}: stored, not confirmed ({stored.status})")
    return lost


def _forged_rows(batch_id: int, genuine_ids: set[str]) -> dict[str, int]:
    """The made-up work the platform stored, and how much of it counts (must be none)."""
    from django.db.models import Q

    from annotation.models import Assignment, AssignmentStatus

    forged = Assignment.objects.filter(hit__batch_id=batch_id, external_id__isnull=False).exclude(
        external_id__in=genuine_ids
    )
    return {
        "rows": forged.count(),
        "submitted": forged.filter(submitted_at__isnull=False).count(),
        "confirmed": forged.filter(
            Q(confirmed_at__isnull=False) | Q(status=AssignmentStatus.APPROVED)
        ).count(),
    }
