"""Paying and managing published work: bonuses, the HITs' time on the market, blocks."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from annotation.models import Assignment, Batch, Worker, WorkerSource
from annotation.review import worker_block

from .client import mturk_call, mturk_client_for, mturk_pages
from .errors import MTurkError, MTurkInputError
from .feedback import FEEDBACK_MAX
from .hit_type import parse_money
from .protocol import EXPIRED_AT, request_token
from .state import is_production, now_iso, state_published, state_update


def _client_for(batch: Batch, client: Any) -> tuple[dict[str, Any], Any]:
    """Return a published batch's state and a client for its environment."""
    state = state_published(batch)
    return state, mturk_client_for(production=is_production(state), client=client)


# What a bonus is for, and the prefix of its UniqueRequestToken (also its key in
# `Batch.mturk["bonuses"]`): an assignment gets at most one of each, so a manual bonus never
# stands in the way of a top-up to the minimum wage (`annotation.mturk.wages`), nor the reverse.
BONUS = "bonus"
TOPUP = "topup"
BONUS_TOKEN_PREFIXES = {BONUS: "mitl-bonus", TOPUP: "mitl-topup"}


def bonus_token(assignment_id: str, *, purpose: str = BONUS) -> str:
    """Return the UniqueRequestToken (and state key) of an assignment's bonus for `purpose`."""
    if purpose not in BONUS_TOKEN_PREFIXES:
        known = ", ".join(BONUS_TOKEN_PREFIXES)
        raise MTurkError(f"a bonus is for one of: {known} (got {purpose!r})")
    return request_token(BONUS_TOKEN_PREFIXES[purpose], assignment_id)


def mturk_bonus_send(
    *,
    assignment: Assignment,
    amount: Decimal | str,
    reason: str,
    client: Any = None,
    now: datetime | None = None,
    purpose: str = BONUS,
) -> bool:
    """Pay a bonus for an MTurk assignment, once per `purpose` (BONUS, or TOPUP to the
    minimum wage); return False when that one was already paid.

    The bonus is noted as pending before SendBonus and as paid after it. A pending note
    left by a run that stopped in between (MTurk's answer lost, or our write) is checked
    against MTurk's ListBonusPayments before anything is sent again: the UniqueRequestToken
    alone keeps MTurk from paying twice for 24 hours only.
    """
    now = now or timezone.now()
    assignment = Assignment.objects.select_related("worker", "hit__batch").get(pk=assignment.pk)
    if assignment.worker.source != WorkerSource.MTURK or not assignment.external_id:
        raise MTurkError(f"{assignment} was not done on MTurk: no bonus can be sent there")
    token = bonus_token(assignment.external_id, purpose=purpose)
    try:
        money = parse_money(amount, what="the bonus")
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    reason = reason.strip()
    if not reason:
        raise MTurkError("say why the bonus is paid: the worker reads the reason")
    batch = assignment.hit.batch
    state, client = _client_for(batch, client)
    if token in state.get("bonuses", {}):
        return False
    pending = state.get("bonuses_pending", {}).get(token)
    if pending is not None and _bonus_listed(client, pending):
        _bonus_note(batch, token, pending, paid=True)  # paid by the run that stopped
        return False
    record = {
        "assignment": assignment.external_id,
        "worker": assignment.worker.external_id,
        "amount": str(money),
        "reason": reason,
        "purpose": purpose,
        "at": now_iso(now),
    }
    _bonus_note(batch, token, record, paid=False)
    mturk_call(
        client,
        "send_bonus",
        WorkerId=assignment.worker.external_id,
        AssignmentId=assignment.external_id,
        BonusAmount=str(money),
        Reason=reason[:FEEDBACK_MAX],
        UniqueRequestToken=token,
    )
    _bonus_note(batch, token, record, paid=True)
    return True


def _bonus_note(batch: Batch, token: str, record: dict[str, Any], *, paid: bool) -> None:
    """Note a bonus as about to be sent (pending) or as paid, under the batch's lock."""

    def store(state: dict[str, Any]) -> None:
        pending = dict(state.get("bonuses_pending", {}))
        pending.pop(token, None)
        if paid:
            state["bonuses"] = {**state.get("bonuses", {}), token: record}
        else:
            pending[token] = record
        state["bonuses_pending"] = pending

    state_update(batch.pk, store)


def _bonus_listed(client: Any, record: dict[str, Any]) -> bool:
    """Say whether MTurk lists the pending bonus `record` as paid (same amount and reason)."""
    amount, reason = Decimal(record["amount"]), record["reason"][:FEEDBACK_MAX]
    return any(
        Decimal(payment["BonusAmount"]) == amount and payment.get("Reason") == reason
        for payment in mturk_pages(
            client, "list_bonus_payments", "BonusPayments", AssignmentId=record["assignment"]
        )
    )


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
    """Move the expiry of every published HIT of the batch; say which ones MTurk refused."""
    now = now or timezone.now()
    _, client = _client_for(batch, client)
    problems, changed = [], 0
    for hit in batch.hits.filter(external_id__isnull=False).order_by("index"):
        try:
            mturk_call(client, "update_expiration_for_hit", HITId=hit.external_id, ExpireAt=until)
            changed += 1
        except MTurkError as exc:
            problems.append(f"HIT {hit.pk} ({hit.external_id}): {exc}")

    def store(state: dict[str, Any]) -> None:
        state["expires_at"] = now_iso(max(until, now) if until != EXPIRED_AT else now)

    state_update(batch.pk, store)
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
    client = mturk_client_for(production=production, client=client)
    mturk_call(client, "create_worker_block", WorkerId=worker.external_id, Reason=reason[:1024])
    return worker_block(worker=worker, blocked=True)
