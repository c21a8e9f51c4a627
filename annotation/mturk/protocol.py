"""What MTurk's API and worker sites expect: endpoints, ids, request tokens, the
ExternalQuestion that frames the HIT page, and the base-URL and `turkSubmitTo` checks.

Pure: no Django, no boto3.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import urlsplit
from xml.sax.saxutils import escape as xml_escape

from .errors import MTurkInputError

REGION = "us-east-1"  # MTurk's API exists in this region only
SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
SANDBOX, PRODUCTION = "sandbox", "production"
# Where a worker's browser posts the finished assignment (MTurk's `turkSubmitTo`).
SUBMIT_HOSTS: tuple[str, ...] = ("https://www.mturk.com", "https://workersandbox.mturk.com")
# Sites allowed to frame the HIT page: the two above, plus worker.mturk.com, the production
# worker site that shows an ExternalQuestion in its iframe today.
FRAME_ANCESTORS: tuple[str, ...] = (*SUBMIT_HOSTS, "https://worker.mturk.com")
WORKER_SITES = {
    SANDBOX: "https://workersandbox.mturk.com",
    PRODUCTION: "https://worker.mturk.com",
}
PREVIEW_ASSIGNMENT_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"  # MTurk's assignmentId in a preview
EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
TOKEN_MAX = 64  # UniqueRequestToken
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
EXPIRED_AT = datetime(2000, 1, 1, tzinfo=UTC)  # "a time in the past" expires a HIT now


def external_question_xml(url: str) -> str:
    """Return the ExternalQuestion that shows `url` in MTurk's frame (FrameHeight 0: full)."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}">'
        f"<ExternalURL>{xml_escape(url)}</ExternalURL>"
        "<FrameHeight>0</FrameHeight>"
        "</ExternalQuestion>"
    )


def external_base_url(raw: str, *, production: bool) -> str:
    """Return the platform's public base URL without a trailing slash, or say what is wrong.

    MTurk shows the HIT page inside its own HTTPS site, where browsers block plain HTTP
    frames; production therefore needs HTTPS. The sandbox also accepts HTTP, for a tunnel
    to a development machine.
    """
    url = (raw or "").strip().rstrip("/")
    if not url:
        raise MTurkInputError(
            "set MTURK_EXTERNAL_BASE_URL to the public HTTPS address of this platform "
            "(e.g. https://curation.example.org): MTurk workers open the HIT page there"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise MTurkInputError(
            f"MTURK_EXTERNAL_BASE_URL must look like https://host[/path] (got {url!r})"
        )
    if production and parts.scheme != "https":
        raise MTurkInputError(
            f"production HITs need an HTTPS base URL (got {url!r}): MTurk frames the HIT "
            "page in its HTTPS site, and browsers refuse a plain HTTP frame there"
        )
    return url


def submit_url(turk_submit_to: str, *, allowed: Iterable[str]) -> str:
    """Return where the finished assignment is posted, if `turkSubmitTo` is an allowed host."""
    parts = urlsplit((turk_submit_to or "").strip())
    origin = f"{parts.scheme}://{parts.netloc}"
    if (
        not parts.scheme
        or not parts.netloc
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or origin not in set(allowed)
    ):
        raise MTurkInputError(
            f"turkSubmitTo {turk_submit_to!r} is not one of MTurk's sites "
            f"({', '.join(SUBMIT_HOSTS)})"
        )
    return f"{origin}/mturk/externalSubmit"


def valid_id(value: str) -> bool:
    """Say whether an MTurk id (HITId, AssignmentId, WorkerId) looks well formed."""
    return bool(_ID.match(value or ""))


def request_token(*parts: object) -> str:
    """Return a UniqueRequestToken: MTurk refuses a repeat within 24 hours."""
    token = "-".join(str(part) for part in parts)
    if len(token) > TOKEN_MAX:
        raise MTurkInputError(f"request token {token!r} is longer than {TOKEN_MAX} characters")
    return token


def publication_nonce(started_at: str) -> str:
    """Return the part of CreateHIT tokens that tells publications of one batch apart.

    `started_at` is the ISO time the publication started (kept in `Batch.mturk`): a resumed
    publish has the same one, hence the same tokens, while publishing again after a sandbox
    reset gets new tokens, which MTurk would otherwise refuse as repeats for 24 hours.
    """
    try:
        moment = datetime.fromisoformat(started_at)
    except (TypeError, ValueError):
        raise MTurkInputError(f"publication start {started_at!r} is not an ISO time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return str(int(moment.timestamp()))


def requester_annotation(batch_id: int, hit_id: int) -> str:
    """Return the note stored on an MTurk HIT, so a resumed publish can find it again."""
    return f"mitl:batch={batch_id}:hit={hit_id}"


def worker_preview_url(environment: str, hit_group_id: str) -> str:
    return f"{WORKER_SITES[environment]}/mturk/preview?groupId={hit_group_id}"
