"""A HIT's capacity on MTurk, and re-posting work the platform rejected.

MTurk gives out at most MaxAssignments per HIT; work rejected here frees nothing there, so
the sync asks for one more assignment (CreateAdditionalAssignmentsForHIT) per rejection
while the HIT still lacks the work it needs. Recorded in `Batch.mturk` (`extra`,
`replaced`), so nothing is re-posted twice.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from annotation.models import HIT, BatchState

from .client import mturk_call
from .errors import MTurkError
from .hit_page import mturk_slots_taken
from .protocol import request_token
from .state import state_update
from .sync_report import SyncRun


def hit_settled(state: dict[str, Any], hit: HIT, *, reposting: bool) -> bool:
    """Say whether every assignment MTurk may give out for a HIT is decided (and no
    rejected one waits to be re-posted): the sync then need not list it again."""
    sent = state.get("sent", {}).values()
    decided = sum(1 for entry in sent if entry.get("hit") == hit.pk)
    return decided >= _mturk_capacity(state, hit) and not (
        reposting and bool(_replacements_due(state, hit))
    )


def _mturk_capacity(state: dict[str, Any], hit: HIT) -> int:
    """Return how many assignments MTurk may ever give out for a HIT (published + re-posted)."""
    published = state.get("max_assignments", {}).get(str(hit.pk), hit.max_assignments)
    return published + state.get("extra", {}).get(str(hit.pk), 0)


def _replacements_due(state: dict[str, Any], hit: HIT) -> list[str]:
    """Return the HIT's rejected AssignmentIds that are not re-posted (or settled) yet."""
    replaced = set(state.get("replaced", []))
    return [
        aid
        for aid, entry in state.get("sent", {}).items()
        if entry.get("hit") == hit.pk
        and entry.get("decision") == "rejected"
        and aid not in replaced
    ]


def rejected_repost(run: SyncRun, hit: HIT, state: dict[str, Any]) -> dict[str, Any]:
    """Re-post one assignment per rejected one, while the HIT lacks approved work."""
    batch = run.batch
    if batch.state != BatchState.ANNOTATING:
        return state
    for aid in _replacements_due(state, hit):
        # Made-up ids on the public page count for nothing: only platform work, confirmed
        # MTurk work and open MTurk work (see hit_page.mturk_slots_taken).
        if mturk_slots_taken(hit) >= hit.max_assignments:  # the others hold (or will) enough
            state = state_update(batch.pk, partial(_mark_replaced, aid=aid, hit=hit, extra=0))
            continue
        try:
            mturk_call(
                run.client,
                "create_additional_assignments_for_hit",
                HITId=hit.external_id,
                NumberOfAdditionalAssignments=1,
                UniqueRequestToken=request_token("mitl-replace", aid),
            )
        except MTurkError as exc:
            run.report.problems.append(f"re-posting HIT {hit.pk} for {aid}: {exc}")
            continue
        run.report.replaced.append(aid)
        state = state_update(batch.pk, partial(_mark_replaced, aid=aid, hit=hit, extra=1))
    return state


def _mark_replaced(state: dict[str, Any], *, aid: str, hit: HIT, extra: int) -> None:
    """Record a rejected assignment as handled: re-posted (extra=1) or not needed."""
    state["replaced"] = [*state.get("replaced", []), aid]
    if extra:
        counts = dict(state.get("extra", {}))
        counts[str(hit.pk)] = counts.get(str(hit.pk), 0) + extra
        state["extra"] = counts
