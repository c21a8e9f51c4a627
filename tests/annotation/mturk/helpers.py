"""What the MTurk service tests share: ids, the Stubber's expected requests, a published
batch, and MTurk work submitted through the HIT page."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime
from typing import Any

from botocore.stub import Stubber

from annotation.models import HIT, Batch, HITItem, items_shown_to
from annotation.mturk.hit_page import mturk_assignment_open, mturk_assignment_submit
from annotation.mturk.hit_type import HitTypeSettings, hit_type_request
from annotation.mturk.links import hit_page_path
from annotation.mturk.protocol import EXPIRED_AT, external_question_xml
from annotation.mturk.publish import mturk_publish
from annotation.submissions import AnswerInput

BASE = "https://mitl.example.org"
TYPE_ID = "3TYPE00000000000000000000000001"
GROUP_ID = "3GROUP0000000000000000000000001"


def hits_of(batch: Batch) -> list[HIT]:
    return list(batch.hits.order_by("index"))


def remote_hit_id(hit: HIT) -> str:
    return f"3HIT{hit.pk:026d}"


def expect_hit_type(stub: Stubber, *, production: bool = False) -> None:
    request = hit_type_request(HitTypeSettings(), sandbox=not production)
    stub.add_response("create_hit_type", {"HITTypeId": TYPE_ID}, request)


class PublicationToken:
    """Equals the UniqueRequestToken of a HIT's CreateHIT in whichever publication."""

    def __init__(self, environment: str, batch: Batch, hit: HIT) -> None:
        self.pattern = re.compile(rf"mitl-{environment}-[0-9]+-{batch.pk}-{hit.pk}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.pattern.fullmatch(other) is not None

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return f"<token matching {self.pattern.pattern}>"


def create_hit_params(
    batch: Batch,
    hit: HIT,
    *,
    production: bool = False,
    slots: int | None = None,
    token: str | None = None,
) -> dict:
    environment = "production" if production else "sandbox"
    return {
        "HITTypeId": TYPE_ID,
        "MaxAssignments": hit.max_assignments if slots is None else slots,
        "LifetimeInSeconds": 72 * 3600,
        "Question": external_question_xml(BASE + hit_page_path(hit)),
        "RequesterAnnotation": f"mitl:batch={batch.pk}:hit={hit.pk}",
        "UniqueRequestToken": token or PublicationToken(environment, batch, hit),
    }


def expect_create_hit(stub: Stubber, batch: Batch, hit: HIT, **params) -> None:
    stub.add_response(
        "create_hit_with_hit_type",
        {"HIT": {"HITId": remote_hit_id(hit), "HITTypeId": TYPE_ID, "HITGroupId": GROUP_ID}},
        create_hit_params(batch, hit, **params),
    )


def publish(batch: Batch, client, stub: Stubber) -> list[HIT]:
    expect_hit_type(stub)
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    mturk_publish(batch=batch, client=client)
    stub.assert_no_pending_responses()
    return hits_of(batch)


def level_for(item: HITItem, wrong_golden: bool) -> str:
    if item.role == "golden_tn":
        return "yes" if wrong_golden else "no"
    return "yes"


def accept_and_submit(hit: HIT, worker_id: str, assignment_id: str, *, wrong_golden=False):
    """Open the HIT page as MTurk would and submit its answers, as the page does."""
    assignment = mturk_assignment_open(hit=hit, worker_id=worker_id, assignment_id=assignment_id)
    answers = [
        AnswerInput(item_id=item.pk, level=level_for(item, wrong_golden), elapsed_ms=900)
        for item in hit.items.filter(items_shown_to(assignment.pk)).order_by("position")
    ]
    mturk_assignment_submit(assignment=assignment, answers=answers)
    assignment.refresh_from_db()
    return assignment


def listed(hit: HIT, *entries: tuple[str, str, str]) -> list[dict]:
    return [
        {
            "AssignmentId": aid,
            "WorkerId": wid,
            "HITId": hit.external_id,
            "AssignmentStatus": status,
        }
        for aid, wid, status in entries
    ]


def expect_listing(stub: Stubber, hit: HIT, *pages: list[dict]) -> None:
    for number, page in enumerate(pages):
        params = {"HITId": hit.external_id, "MaxResults": 100}
        if number:
            params["NextToken"] = f"page-{number}"
        response = {"NumResults": len(page), "Assignments": page}
        if number + 1 < len(pages):
            response["NextToken"] = f"page-{number + 1}"
        stub.add_response("list_assignments_for_hit", response, params)


def expect_reject_and_repost(stub: Stubber, hit: HIT, assignment_id: str, feedback: Any) -> None:
    """MTurk rejects the assignment with `feedback`, then gives its HIT one assignment back."""
    stub.add_response(
        "reject_assignment", {}, {"AssignmentId": assignment_id, "RequesterFeedback": feedback}
    )
    stub.add_response(
        "create_additional_assignments_for_hit",
        {},
        {
            "HITId": hit.external_id,
            "NumberOfAdditionalAssignments": 1,
            "UniqueRequestToken": f"mitl-replace-{assignment_id}",
        },
    )


def stub_past() -> datetime:
    return EXPIRED_AT


def results_from_export(input_csv: str, plans: list[tuple[str, str, str, bool]]) -> str:
    """Fill MTurk's results CSV the way its web UI would, for the first HITs of the export."""
    rows = list(csv.DictReader(io.StringIO(input_csv)))
    out = io.StringIO()
    header = [
        "HITId", "HITTypeId", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime",
        "SubmitTime", *[f"Input.{key}" for key in rows[0]], "Answer.answers", "Answer.hit_id",
        "Approve", "Reject",
    ]  # fmt: skip
    writer = csv.DictWriter(out, header)
    writer.writeheader()
    for row, (hit_remote, assignment_id, worker_id, wrong_golden) in zip(rows, plans, strict=False):
        answers = []
        n = 1
        while row.get(f"item_{n}"):
            item = HITItem.objects.get(pk=int(row[f"item_{n}"]))
            answers.append(
                {"item": item.pk, "level": level_for(item, wrong_golden), "elapsed_ms": 700}
            )
            n += 1
        writer.writerow(
            {
                "HITId": hit_remote,
                "AssignmentId": assignment_id,
                "WorkerId": worker_id,
                "AssignmentStatus": "Submitted",
                "AcceptTime": "Thu Oct 09 07:30:20 PDT 2025",
                "SubmitTime": "Thu Oct 09 07:41:02 PDT 2025",
                **{f"Input.{key}": value for key, value in row.items()},
                "Answer.answers": json.dumps(answers),
                "Answer.hit_id": row["hit_id"],
            }
        )
    return out.getvalue()


def with_row(text: str, changes: dict[str, str]) -> str:
    """Append a copy of the first result row with some cells changed."""
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    out = io.StringIO()
    writer = csv.DictWriter(out, reader.fieldnames)
    writer.writeheader()
    writer.writerows([*rows, {**rows[0], **changes}])
    return out.getvalue()
