"""Paying the top-ups that bring approved MTurk work to the batch's minimum hourly wage.

Through the bonus path (`mturk_bonus_send` with purpose TOPUP): each top-up has its own
UniqueRequestToken, `mitl-topup-<AssignmentId>`, distinct from a manual bonus's, and is
recorded in `Batch.mturk["bonuses"]` under it. So running it again pays nothing twice (also
after a run that stopped between MTurk's answer and our write: see `mturk_bonus_send`), and
a worker who got a manual bonus still gets a top-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from annotation.models import Batch

from .client import mturk_client_for
from .errors import MTurkError
from .payments import TOPUP, mturk_bonus_send
from .state import is_production, state_published
from .wages import topups_proposed


@dataclass(frozen=True)
class TopUpResult:
    paid: int  # top-ups sent now
    already: int  # top-ups paid before (or by a concurrent run): not sent again
    total: Decimal  # what was sent now, USD


def mturk_topups_pay(*, batch: Batch, client: Any = None) -> TopUpResult:
    """Pay every proposed top-up not paid yet (`annotation.mturk.wages.topups_proposed`).

    Stops at the first one MTurk refuses, saying how many went out before: run it again to
    pay the rest.
    """
    proposed = topups_proposed(batch=batch)
    due = [topup for topup in proposed if not topup.paid]
    if not due:
        return TopUpResult(paid=0, already=len(proposed), total=Decimal("0.00"))
    production = is_production(state_published(batch))  # refuses an unpublished batch
    client = mturk_client_for(production=production, client=client)  # one for all
    paid, already, total = 0, len(proposed) - len(due), Decimal("0.00")
    for topup in due:
        try:
            sent = mturk_bonus_send(
                assignment=topup.assignment,
                amount=topup.amount,
                reason=topup.reason(),
                client=client,
                purpose=TOPUP,
            )
        except MTurkError as exc:
            raise MTurkError(
                f"{paid} top-ups paid (${total}) before MTurk refused the one for "
                f"{topup.assignment.external_id}: {exc}. Run it again to pay the rest."
            ) from exc
        if sent:
            paid, total = paid + 1, total + topup.amount
        else:
            already += 1
    return TopUpResult(paid=paid, already=already, total=total)
