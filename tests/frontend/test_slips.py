"""Every number says what it counts, and the small slips of a new user's first hour (issue 28).

Each test failed before its fix: the review queue's HIT number, the submit message, the
empty plan chart, the recall's truth and a too-wide interval, positive sets that claimed
the whole dataset, "rejectd", the admin's "progresss", the bare 403 page, the leaderboard's
escaped format hint and scrolling table, and a sandbox publish without a public URL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import (
    Assignment,
    Batch,
    Dataset,
    PositiveSet,
    PositiveSource,
    Release,
)
from mitl.release_files import I2T_FILE, T2I_FILE
from pipeline.plan import Plan
from tests.page_answers import page_answers

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
CHECK_MISSED = "a check pair was answered differently from its known answer"
WIDE = {"found": 12, "unfound": 40.0, "unfound_low": 0.0, "unfound_high": 228.0}
WIDE |= {"recall": 0.23, "recall_low": 0.05, "recall_high": 1.0, "rounds_used": 1}


@pytest.fixture
def annotator(db):
    return get_user_model().objects.create_user("ann", password=PASSWORD)


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user("boss", password=PASSWORD, is_staff=True)


def logged_in(client, user):
    client.force_login(user)
    return client


def take_hit(client) -> Assignment:
    response = client.post(reverse("frontend:work-next"))
    return Assignment.objects.get(pk=int(response.url.rstrip("/").rsplit("/", 1)[1]))


def submit(client, assignment: Assignment, *, wrong_golden: bool = False):
    level_of = {"golden_tp": "yes", "golden_tn": "yes" if wrong_golden else "no", "task": "yes"}
    body = {"answers": page_answers(assignment, level_of)}
    return client.post(
        reverse("api:assignment-submit", args=[assignment.pk]),
        body,
        content_type="application/json",
    )


# --- 1. one HIT number everywhere ------------------------------------------------------------


def test_the_review_pages_show_the_hit_number_the_worker_saw(
    client, annotator, staff, annotating_batch
):
    worker = logged_in(client, annotator)
    assignment = take_hit(worker)
    hit_page = worker.get(reverse("frontend:hit", args=[assignment.pk])).content.decode()
    assert f"<title>HIT {assignment.hit_id} ·" in hit_page  # what the worker sees
    submit(worker, assignment, wrong_golden=True)  # flagged: it waits in the queue
    assert assignment.hit.index != assignment.hit_id  # the position would not do

    admin = logged_in(type(client)(), staff)
    queue = admin.get(reverse("frontend:review")).content.decode()
    detail = admin.get(reverse("frontend:review-detail", args=[assignment.pk])).content.decode()

    assert f"{annotating_batch.name} · HIT {assignment.hit_id}</td>" in queue
    assert f" · HIT {assignment.hit_id} ·" in detail


# --- 2. the submit answer says what happened ---------------------------------------------------


def test_the_submit_answer_says_plainly_what_became_of_the_hit(client, annotator, annotating_batch):
    worker = logged_in(client, annotator)
    passed = submit(worker, take_hit(worker)).json()
    flagged_assignment = take_hit(worker)
    flagged = submit(worker, flagged_assignment, wrong_golden=True).json()

    assert (passed["status"], passed["message"]) == (
        "approved",
        "Submitted and approved. Thank you!",
    )
    assert (flagged["status"], flagged["message"]) == (
        "submitted",
        f"Submitted; it waits for a review because {CHECK_MISSED}.",
    )
    tn = flagged_assignment.hit.items.get(role="golden_tn")
    assert str(tn.pk) not in flagged["message"]  # never which pair was the check


def test_an_automatic_rejection_says_so_without_naming_the_pair(
    client, annotator, annotating_batch
):
    annotating_batch.config = {**annotating_batch.config, "golden_policy": "approve_or_reject"}
    annotating_batch.save(update_fields=["config"])
    worker = logged_in(client, annotator)

    answer = submit(worker, take_hit(worker), wrong_golden=True).json()

    assert answer["status"] == "rejected"
    assert answer["message"] == f"Submitted, but not accepted: {CHECK_MISSED}. My work says more."


# --- 3. an empty plan says why instead of charting nothing -------------------------------------


EMPTY_PLAN = Plan(points=[], fixed_judgements=0, history=[], tail_rate=None)


def test_the_batch_page_explains_an_empty_plan_instead_of_charting_it(
    client, staff, annotating_batch, monkeypatch
):
    monkeypatch.setattr("frontend.views.pages.batch_plan", lambda **kwargs: EMPTY_PLAN)

    html = logged_in(client, staff).get(reverse("frontend:batch", args=[annotating_batch.pk]))
    html = html.content.decode()

    assert '<p id="plan-empty">Nothing to plan: no ranked pair is left to judge' in html
    assert "fixed has no pair left to judge" in html
    assert "once for 0 judgements" not in html
    assert 'class="plan-chart"' not in html and 'id="plan"' not in html


def test_the_wizard_explains_an_empty_plan_instead_of_charting_it(
    client, staff, dataset, annotators, monkeypatch
):
    from tests.frontend.test_dashboard import wizard_post

    monkeypatch.setattr("frontend.views.wizard.config_plan", lambda **kwargs: EMPTY_PLAN)

    response = logged_in(client, staff).get(
        reverse("frontend:batch-plan-preview"), wizard_post(dataset=dataset.pk)
    )

    html = response.content.decode()
    assert '<p id="plan-empty">Nothing to plan' in html
    assert "<svg" not in html and 'id="plan-preview"' not in html


# --- 4. recall says against which truth; a wide interval says it cannot be used ---------------


def test_the_batch_page_and_dashboard_say_what_recall_counts_and_flag_a_wide_interval(
    client, staff, annotating_batch
):
    reports = {**annotating_batch.reports, "curation": {"directions": {"i2t": {"estimate": WIDE}}}}
    Batch.objects.filter(pk=annotating_batch.pk).update(reports=reports)
    admin = logged_in(client, staff)

    page = admin.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()
    dashboard = admin.get(reverse("frontend:dashboard")).content.decode()

    truth = "measured against the crowd&#x27;s verdicts and the known positives"
    too_wide = "interval too wide to act on: judge more random pairs"
    assert f'<p class="muted" id="recall-truth">Estimated recall: {truth}' in page
    assert f'<strong class="recall-warning">{too_wide}</strong>' in page
    assert f'title="Estimated recall, {truth}' in dashboard
    assert f"(0.05–1.00) · {too_wide}" in dashboard


# --- 5. small slips ------------------------------------------------------------------------


def test_positive_sets_never_claim_the_whole_dataset(client, staff, dataset):
    PositiveSet.objects.create(dataset=dataset, name="old-cxc", source=PositiveSource.IMPORTED)
    admin = logged_in(client, staff)

    page = admin.get(reverse("frontend:dataset", args=[dataset.pk])).content.decode()
    api = admin.get("/api/positive-sets/", {"dataset": dataset.name}).json()

    assert "whole dataset" not in page
    assert '<span class="muted">every image and caption (each caption&#x27;s own image)' in page
    assert '<span class="muted">queries not recorded</span>' in page
    covers = {row["name"]: (row["query_counts"], row["covers"]) for row in api["results"]}
    assert covers["old-cxc"] == (None, "queries not recorded")
    assert covers["original"][1] == "every image and caption (each caption's own image)"


def test_a_rejection_is_reported_as_rejected(client, annotator, staff, annotating_batch):
    worker = logged_in(client, annotator)
    assignment = take_hit(worker)
    submit(worker, assignment, wrong_golden=True)
    admin = logged_in(type(client)(), staff)

    response = admin.post(
        reverse("frontend:review-detail", args=[assignment.pk]),
        {"decision": "reject", "feedback": "the pairs are answered at random"},
        follow=True,
    )

    html = response.content.decode()
    assert f"Assignment {assignment.pk} rejected." in html
    assert "rejectd" not in html


def test_the_admin_lists_batch_stage_progress_without_a_third_s(client):
    admin = get_user_model().objects.create_superuser("root", password=PASSWORD)

    html = logged_in(client, admin).get(reverse("admin:index")).content.decode()

    assert "Batch stage progress</a>" in html
    assert "progresss" not in html.lower()


def test_a_forbidden_page_has_the_site_frame_a_reason_and_a_way_back(client, annotator):
    response = logged_in(client, annotator).get(reverse("frontend:review"))

    html = response.content.decode()
    assert response.status_code == 403
    assert "frontend/base.html" in [t.name for t in response.templates]
    assert '<a class="brand"' in html  # the site's header
    assert "You are logged in as <strong>ann</strong>" in html and "(staff only)" in html
    assert f'<a href="{reverse("frontend:work")}">Back to My work</a>' in html


# --- 6. the leaderboard ----------------------------------------------------------------------


@pytest.fixture
def release(tmp_path: Path) -> Release:
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / I2T_FILE).write_text(json.dumps({"1": [11]}))
    (folder / T2I_FILE).write_text(json.dumps({"11": [1]}))
    dataset = Dataset.objects.create(name="tiny")
    return Release.objects.create(
        dataset=dataset, name="tiny", version=1, rule="eccv", path=str(folder), manifest={}
    )


def test_the_leaderboard_escapes_its_format_hint_and_scrolls_its_table_in_a_box(
    client, annotator, release
):
    html = logged_in(client, annotator).get(reverse("frontend:leaderboard", args=[release.pk]))
    html = html.content.decode()

    assert "&lt;image id&gt;" in html and "&lt;caption id&gt;" in html
    assert "<image id>" not in html
    assert (
        '<div class="table-scroll" id="leaderboard-scroll">\n'
        '<table id="leaderboard" class="sortable">' in html
    )
    css = (Path(__file__).parents[2] / "frontend/static/frontend/site.css").read_text()
    assert ".table-scroll { overflow-x: auto;" in css


# --- 7. a sandbox publish without a public URL ---------------------------------------------


def test_a_publish_without_a_public_url_is_an_error_and_queues_nothing(
    client, staff, annotating_batch, settings, django_capture_on_commit_callbacks
):
    settings.MTURK_EXTERNAL_BASE_URL = ""
    admin = logged_in(client, staff)
    url = reverse("frontend:mturk-batch", args=[annotating_batch.pk])

    with django_capture_on_commit_callbacks() as queued:
        response = admin.post(url, {"action": "publish", "environment": "sandbox"}, follow=True)

    html = response.content.decode()
    assert queued == []  # nothing was sent to a worker
    assert '<li class="error">set MTURK_EXTERNAL_BASE_URL to the public HTTPS address' in html
    assert "Publishing on the sandbox" not in html
    assert not Batch.objects.get(pk=annotating_batch.pk).mturk.get("last_publish")
