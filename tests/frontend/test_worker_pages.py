"""The curators' pages on workers and review (issue 28): a worker's page, the workers
page's flags and filters, blocking after a confirmation, co-workers' answers side by side,
next/previous, and approving several submissions at once."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Assignment, Caption, Dataset, Image, ItemRole, Worker
from tests.annotation.crowd_factories import (
    MINUTE,
    N_PAIRS,
    RIGHT,
    T0,
    batch_make,
    hit_make,
    work_done,
    worker_make,
)

pytestmark = pytest.mark.django_db

YES = {**RIGHT, "task": "yes"}
NO = {**RIGHT, "task": "no"}


@pytest.fixture
def tiny() -> Dataset:
    dataset = Dataset.objects.create(name="tiny")
    for i in range(N_PAIRS):
        image = Image.objects.create(dataset=dataset, ext_id=i)
        Caption.objects.create(dataset=dataset, ext_id=100 + i, image=image, text=f"caption {i}")
    return dataset


@pytest.fixture
def admin(client, db):
    user = get_user_model().objects.create_user("boss", password="pw", is_staff=True)
    client.force_login(user)
    return client


@pytest.fixture
def crowd(tiny):
    """Three careful workers say YES to a HIT's task pair; a hasty fourth says NO at 0.3 s a
    pair. Everyone's work waits for review."""
    batch = batch_make(tiny)
    hit = hit_make(batch, 0, max_assignments=4)
    work = []
    for i in range(4):
        levels, ms = (YES, 20_000) if i < 3 else (NO, 300)
        worker = worker_make(f"w{i}")
        work.append(
            work_done(
                hit, worker, levels, elapsed_ms=ms, policy="review_all", now=T0 + (i + 1) * MINUTE
            )
        )
    return hit, work


def close_checks(monkeypatch) -> list[int]:
    """Record the batches the review pages ask to close a round of."""
    checked: list[int] = []
    monkeypatch.setattr(
        "frontend.views.review.annotation_close_check_queue",
        lambda *, batch_id: checked.append(batch_id),
    )
    return checked


def test_the_workers_page_flags_a_hasty_worker_and_filters(admin, crowd):
    hasty = Worker.objects.get(external_id="w3")

    page = admin.get(reverse("frontend:workers")).content.decode()

    assert "too fast to have looked" in page
    assert "the measured time is probably wrong" in page
    assert "$2000.00/h" in page
    assert reverse("frontend:worker", args=[hasty.pk]) in page
    fast = admin.get(reverse("frontend:workers"), {"flag": "fast"}).content.decode()
    assert "platform:w3" in fast and "platform:w0" not in fast
    turk = admin.get(reverse("frontend:workers"), {"source": "mturk"}).content.decode()
    assert "No worker matches this filter." in turk
    other = admin.get(reverse("frontend:workers"), {"batch": crowd[0].batch_id + 1}).content
    assert "No worker matches this filter." in other.decode()
    # a filter it does not know is ignored rather than refused
    assert admin.get(reverse("frontend:workers"), {"flag": "<x>"}).status_code == 200


def test_a_worker_page_shows_answers_over_time_agreement_and_flags(admin, crowd):
    careful = Worker.objects.get(external_id="w0")
    hasty = Worker.objects.get(external_id="w3")

    page = admin.get(reverse("frontend:worker", args=[careful.pk])).content.decode()
    hasty_page = admin.get(reverse("frontend:worker", args=[hasty.pk])).content.decode()

    assert "100% of 1 task answer equal the majority" in page
    assert "<td>2025-01-06</td><td>2</td><td>0</td><td>0</td><td>1</td><td>3</td>" in page
    assert "20.0 s per pair" in page and "too fast" not in page
    assert "0% of 1 task answer equal the majority" in hasty_page
    assert "too fast to have looked" in hasty_page


def test_blocking_asks_to_confirm_first(admin, crowd):
    worker = Worker.objects.get(external_id="w3")
    url = reverse("frontend:worker-block", args=[worker.pk])
    assert url in admin.get(reverse("frontend:worker", args=[worker.pk])).content.decode()

    confirm = admin.get(url).content.decode()

    assert "Block worker platform:w3?" in confirm and 'id="confirm-block"' in confirm
    worker.refresh_from_db()
    assert worker.is_blocked is False  # asking is not blocking
    response = admin.post(url, {"blocked": "1"}, follow=True)
    assert "Worker platform:w3 blocked." in response.content.decode()
    worker.refresh_from_db()
    assert worker.is_blocked is True


def test_the_review_page_shows_co_workers_answers_and_next_previous(admin, crowd):
    hit, work = crowd
    task = hit.items.get(role=ItemRole.TASK)

    page = admin.get(reverse("frontend:review-detail", args=[work[1].pk])).content.decode()

    for name in ("platform:w0", "platform:w2", "platform:w3"):
        assert f'<th class="coworker">{name}</th>' in page
    assert '<td class="coworker differs">100% NO</td>' in page  # w3 on the task pair
    assert task.caption.text in page
    assert f'href="{reverse("frontend:review-detail", args=[work[0].pk])}" id="previous"' in page
    assert f'href="{reverse("frontend:review-detail", args=[work[2].pk])}" id="next"' in page
    assert "frontend/review.js" in page


def test_an_approval_opens_the_next_submission_of_the_queue(admin, crowd, monkeypatch):
    _, work = crowd
    checked = []
    monkeypatch.setattr(
        "frontend.views.review.annotation_close_check_queue",
        lambda *, batch_id: checked.append(batch_id),
    )

    response = admin.post(
        reverse("frontend:review-detail", args=[work[0].pk]), {"decision": "approve"}
    )

    assert response.url == reverse("frontend:review-detail", args=[work[1].pk])
    assert checked == [work[0].hit.batch_id]


def test_bulk_approve_approves_the_ticked_and_refuses_what_cannot_be(admin, crowd, monkeypatch):
    hit, work = crowd
    checked = []
    monkeypatch.setattr(
        "frontend.views.review.annotation_close_check_queue",
        lambda *, batch_id: checked.append(batch_id),
    )
    Assignment.objects.filter(pk=work[2].pk).update(status="rejected")  # decided meanwhile
    queue = admin.get(reverse("frontend:review")).content.decode()
    assert f'name="assignment" value="{work[0].pk}"' in queue and "Approve selected" in queue

    response = admin.post(
        reverse("frontend:review-bulk-approve"),
        {"assignment": [work[0].pk, work[1].pk, work[2].pk]},
        follow=True,
    )

    page = response.content.decode()
    assert f"Approved 2 assignments: {work[0].pk}, {work[1].pk}." in page
    assert f"Assignment {work[2].pk} not approved: only submitted work can be reviewed" in page
    statuses = dict(Assignment.objects.values_list("pk", "status"))
    assert [statuses[a.pk] for a in work] == ["approved", "approved", "rejected", "submitted"]
    assert checked == [hit.batch_id]


def test_bulk_approve_with_nothing_ticked_says_so(admin, crowd):
    response = admin.post(reverse("frontend:review-bulk-approve"), follow=True)

    assert "Tick the submissions to approve first." in response.content.decode()
