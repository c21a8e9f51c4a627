"""The SQL of an annotator's next HIT and submission stays a fixed, short list of statements.

Every HIT a crowd worker does costs one next + one submit (or one submit with `take_next`),
so a statement added here costs every judgement (benchmarks/bench_submit.py). The counts
leave out the session's read (Redis serves it in production: `annotation.sessions`) and the
savepoints that stand for BEGIN/COMMIT inside the test's own transaction.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment

from .conftest import answers_for

pytestmark = pytest.mark.django_db

# The auth user with its worker; the worker's lock; its open work; the free HIT (locked);
# the slot count; the instructions version; the assignment's INSERT; the slot hint's
# UPDATE; the page's pairs. (Folding the count into the hint's UPDATE and the version into
# the INSERT saved two, but made the 50-worker race test deadlock now and then.)
NEXT_STATEMENTS = 9
# The auth user with its worker; the HIT's lock; the assignment's lock with its batch; the
# pairs shown; the judgements' INSERT; the assignment's UPDATE; then either the round's
# close check (approved work) or the golden pairs' answers (a golden missed).
SUBMIT_STATEMENTS = 7


def statements(captured: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"]
        for q in captured.captured_queries
        if "django_session" not in q["sql"] and "SAVEPOINT" not in q["sql"]
    ]


def request_statements(call) -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = call()
    return response, statements(captured)


@pytest.fixture
def page(ann, annotating_batch) -> dict:
    """A HIT's page after a first next + submit (the worker exists, as in steady work)."""
    first = ann.post("/api/assignments/next/").json()
    answers = answers_for(Assignment.objects.get(pk=first["id"]))
    assert ann.post(first["submit_url"], answers, format="json").status_code == 201
    return first


@pytest.mark.parametrize("golden_right", [True, False], ids=["approved", "golden_missed"])
def test_next_and_submit_take_a_bounded_number_of_statements(ann, page, golden_right):
    response, sql = request_statements(lambda: ann.post("/api/assignments/next/"))
    assert response.status_code == 200
    assert len(sql) <= NEXT_STATEMENTS, "\n".join(sql)

    body = answers_for(Assignment.objects.get(pk=response.json()["id"]), golden_right=golden_right)
    url = response.json()["submit_url"]
    response, sql = request_statements(lambda: ann.post(url, body, format="json"))
    assert response.status_code == 201
    assert response.json()["status"] == ("approved" if golden_right else "submitted")
    assert len(sql) <= SUBMIT_STATEMENTS, "\n".join(sql)


def test_a_submit_that_takes_the_next_hit_adds_only_the_hand_out(ann, page):
    response = ann.post("/api/assignments/next/").json()
    body = answers_for(Assignment.objects.get(pk=response["id"]))
    url = response["submit_url"] + "?take_next=true"

    response, sql = request_statements(lambda: ann.post(url, body, format="json"))

    assert response.status_code == 201 and response.json()["next_assignment"] is not None
    # One auth read for both: the hand-out's statements less its own.
    assert len(sql) <= SUBMIT_STATEMENTS + NEXT_STATEMENTS - 1, "\n".join(sql)
