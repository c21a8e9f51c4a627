"""What one sync works with (`SyncRun`) and what it did (`SyncReport`, as stored in
`Batch.mturk["report"]` and as a person reads it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from annotation.models import Batch

# How long after MTurk's SubmitTime the platform waits for a submission's answers before
# the sync rejects it on MTurk (else MTurk's auto-approval would pay for no work); also how
# long after its deadline work stored here may still turn up on MTurk.
MISSING_GRACE = timedelta(hours=1)


@dataclass
class SyncReport:
    """What one sync of a batch found and sent, AssignmentIds by outcome."""

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
        """Return the report as kept in `Batch.mturk["report"]`."""
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
    """Return a duration in hours as the report says it ("1 hour", "1.5 hours")."""
    hours = delta.total_seconds() / 3600
    return f"{hours:g} hour" + ("" if hours == 1 else "s")


@dataclass(frozen=True)
class SyncRun:
    """What every step of one sync of a batch shares."""

    client: Any  # boto3's MTurk client
    batch: Batch
    report: SyncReport
    policy: str  # the batch's golden policy
    now: datetime
