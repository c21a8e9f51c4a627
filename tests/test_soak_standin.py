"""The soak's MTurk stand-in speaks MTurk's protocol: boto3's own client, unchanged, talks
to it, and it shows assignments as MTurk does (only once submitted)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from annotation.mturk.client import mturk_pages
from annotation.mturk.protocol import REGION, external_question_xml
from soak.mturk_standin import MTurkStandIn

PAGE_URL = "http://127.0.0.1:1/mturk/hits/7/sig/?a=1&b=2"


@pytest.fixture
def standin() -> Iterator[MTurkStandIn]:
    running = MTurkStandIn().start()
    yield running
    running.stop()


@pytest.fixture
def client(standin: MTurkStandIn, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "SOAKTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "soak-test")
    return boto3.client("mturk", region_name=REGION, endpoint_url=standin.url)


def _hit(client, max_assignments: int = 2) -> str:
    type_id = client.create_hit_type(
        Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=600
    )["HITTypeId"]
    return client.create_hit_with_hit_type(
        HITTypeId=type_id,
        MaxAssignments=max_assignments,
        LifetimeInSeconds=3600,
        Question=external_question_xml(PAGE_URL),
    )["HIT"]["HITId"]


def test_an_assignment_shows_once_submitted_and_is_decided_once(standin, client):
    hit_id = _hit(client)
    assert standin.external_url(hit_id) == PAGE_URL
    assignment_id = standin.accept(hit_id, "AWORKER1")
    with pytest.raises(ClientError) as refused:  # MTurk: not while the worker is at it
        client.get_assignment(AssignmentId=assignment_id)
    assert refused.value.response["Error"]["Code"] == "RequestError"
    assert client.list_assignments_for_hit(HITId=hit_id)["Assignments"] == []

    standin.submit(assignment_id)
    entry = client.get_assignment(AssignmentId=assignment_id)["Assignment"]
    assert (entry["HITId"], entry["WorkerId"], entry["AssignmentStatus"]) == (
        hit_id,
        "AWORKER1",
        "Submitted",
    )
    client.approve_assignment(AssignmentId=assignment_id)
    with pytest.raises(ClientError):  # approved already
        client.reject_assignment(AssignmentId=assignment_id, RequesterFeedback="no")
    assert standin.calls["ApproveAssignment"] == 1


def test_lists_page_and_hits_keep_their_max_assignments(standin, client):
    hit_id = _hit(client, max_assignments=3)
    for worker in ("AW1", "AW2", "AW3"):
        standin.submit(standin.accept(hit_id, worker))
    with pytest.raises(Exception, match="no assignment left"):
        standin.accept(hit_id, "AW4")
    listed = list(mturk_pages(client, "list_assignments_for_hit", "Assignments", HITId=hit_id))
    assert len(listed) == 3
    # MTurk's pages, two at a time: the token leads to the rest.
    first = client.list_assignments_for_hit(HITId=hit_id, MaxResults=2)
    rest = client.list_assignments_for_hit(HITId=hit_id, MaxResults=2, NextToken=first["NextToken"])
    assert len(first["Assignments"]) + len(rest["Assignments"]) == 3
    assert "NextToken" not in rest
    client.create_additional_assignments_for_hit(
        HITId=hit_id, NumberOfAdditionalAssignments=1, UniqueRequestToken="more-1"
    )
    standin.accept(hit_id, "AW4")
