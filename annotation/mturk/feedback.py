"""What a worker reads when MTurk work is rejected: how many check pairs failed (never
which: others will see the HIT again), a reviewer's own words first, within MTurk's length
limit.

Pure: no Django, no boto3.
"""

from __future__ import annotations

from collections.abc import Sequence

from mitl.quality import AUTOMATIC_REJECTION_PREFIX, GoldenMiss, golden_misses_summary

FEEDBACK_MAX = 1024  # RequesterFeedback and a bonus Reason: MTurk's limit

# RequesterFeedback of a submission MTurk has but the platform never received (a worker
# who posted to externalSubmit without the HIT page, or whose answers were lost).
MISSING_FEEDBACK = (
    "No answers reached the platform for this assignment: the HIT was submitted on MTurk "
    "without the answers being saved through the HIT page, so there is no work to approve."
)


def rejection_feedback(*, reviewer_text: str, misses: Sequence[GoldenMiss]) -> str:
    """Return the RequesterFeedback of a rejection: how many check pairs failed.

    MTurk shows this text to the worker; a reviewer's own words come first. The failed
    pairs are counted, not named: the HIT is re-posted to other workers.
    """
    parts = []
    own = reviewer_text.strip()
    if own and not own.startswith(AUTOMATIC_REJECTION_PREFIX):
        parts.append(own)
    if misses:
        parts.append(golden_misses_summary(misses))
    if not parts:
        parts.append(own or "The work did not meet the task's quality checks.")
    return truncate(" ".join(parts), FEEDBACK_MAX)


def truncate(text: str, limit: int) -> str:
    """Return `text` cut to `limit` characters, with an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
