"""API fixtures: one account per role, clients logged in as each, and work in every state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, Batch, Release
from annotation.submissions import assignment_submit
from mitl.release_files import I2T_FILE, T2I_FILE
from tests.page_answers import page_answers
from tests.pipeline_runs import run_to_release

PASSWORD = "correct horse battery"
ROLES = ("anonymous", "annotator", "staff")


@pytest.fixture
def annotator_user(db):
    return get_user_model().objects.create_user("ann", password=PASSWORD)


@pytest.fixture
def staff_user(db):
    return get_user_model().objects.create_user("boss", password=PASSWORD, is_staff=True)


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


@pytest.fixture
def ann(annotator_user) -> APIClient:
    client = APIClient()
    client.force_login(annotator_user)
    return client


@pytest.fixture
def staff(staff_user) -> APIClient:
    client = APIClient()
    client.force_login(staff_user)
    return client


@pytest.fixture
def client_for(request):
    """Return the client of a role by name: anonymous, annotator or staff."""
    names = {"anonymous": "anon", "annotator": "ann", "staff": "staff"}
    return lambda role: request.getfixturevalue(names[role])


def answers_for(assignment: Assignment, *, golden_right: bool = True) -> dict:
    """Answers for a whole HIT, each pair named by its number on the worker's page: tasks
    YES, goldens right (or the golden TN wrong)."""
    level = {"golden_tp": "yes", "golden_tn": "no" if golden_right else "yes", "task": "yes"}
    return {"answers": page_answers(assignment, level)}


@pytest.fixture
def own_assignment(annotating_batch, annotator_user) -> Assignment:
    """The annotator's accepted assignment on the annotating batch."""
    assignment = hit_assign_next(worker=worker_for_user(user=annotator_user))
    assert assignment is not None
    return assignment


@pytest.fixture
def flagged_assignment(own_assignment) -> Assignment:
    """The annotator's submission that failed the golden check: it waits for review."""
    from annotation.submissions import AnswerInput

    answers = [
        AnswerInput(item_id=a["item"], level=a["level"], elapsed_ms=a["elapsed_ms"])
        for a in answers_for(own_assignment, golden_right=False)["answers"]
    ]
    result = assignment_submit(
        assignment=own_assignment, answers=answers, followups_required=True, by_page=True
    )
    assert result.assignment.status == "submitted" and result.assignment.flagged
    return result.assignment


@pytest.fixture
def released(batch) -> Batch:
    """The small batch run to the end with the simulated crowd."""
    batch = run_to_release(batch)
    return batch


@pytest.fixture
def release(released) -> Release:
    return Release.objects.get(batches=released)


def rankings_for(release: Release) -> dict:
    """Rankings of every query of the release: its positives first, then every other id."""
    folder = Path(release.path)
    i2t = json.loads((folder / I2T_FILE).read_text())
    t2i = json.loads((folder / T2I_FILE).read_text())
    captions = sorted(release.dataset.captions.values_list("ext_id", flat=True))
    images = sorted(release.dataset.images.values_list("ext_id", flat=True))

    def ranked(positives: list[int], everything: list[int]) -> list[int]:
        return positives + [x for x in everything if x not in set(positives)]

    return {
        "i2t": {q: ranked(p, captions) for q, p in i2t.items()},
        "t2i": {q: ranked(p, images) for q, p in t2i.items()},
    }
