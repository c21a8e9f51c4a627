"""What a worker reads when MTurk work is rejected: the failed check pairs and the answers
given, a reviewer's own words first, within MTurk's length limit.

Pure: no Django, no boto3.
"""

from __future__ import annotations

from collections.abc import Sequence

from mitl.judgements import LEVEL_LABELS
from mitl.quality import AUTOMATIC_REJECTION_PREFIX, GoldenMiss

FEEDBACK_MAX = 1024  # RequesterFeedback and a bonus Reason: MTurk's limit

# RequesterFeedback of a submission MTurk has but the platform never received (a worker
# who posted to externalSubmit without the HIT page, or whose answers were lost).
MISSING_FEEDBACK = (
    "No answers reached the platform for this assignment: the HIT was submitted on MTurk "
    "without the answers being saved through the HIT page, so there is no work to approve."
)


def rejection_feedback(*, reviewer_text: str, misses: Sequence[GoldenMiss]) -> str:
    """Return the RequesterFeedback of a rejection: which check pairs failed, and why.

    MTurk shows this text to the worker, so it names the pairs in page order with the
    answer the worker gave; a reviewer's own words come first.
    """
    parts = []
    own = reviewer_text.strip()
    if own and not own.startswith(AUTOMATIC_REJECTION_PREFIX):
        parts.append(own)
    if misses:
        details = "; ".join(
            f"pair {miss.position} "
            f"{'matches its description' if miss.is_match else 'does not match its description'}"
            f", but you answered “{LEVEL_LABELS[miss.answered]}”"
            for miss in misses
        )
        parts.append(f"Check pairs with a known answer were answered wrongly: {details}.")
    if not parts:
        parts.append(own or "The work did not meet the task's quality checks.")
    return truncate(" ".join(parts), FEEDBACK_MAX)


def truncate(text: str, limit: int) -> str:
    """Return `text` cut to `limit` characters, with an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
