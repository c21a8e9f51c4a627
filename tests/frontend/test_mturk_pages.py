"""The MTurk pages through Django's test client: the HIT page in its three modes, framing
only by MTurk, the session-less submit endpoint, signed images, and the admin's page (with
the real boto3 client behind botocore's Stubber)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from annotation.answers import ANSWERED_OTHERWISE
from annotation.models import HIT, Assignment, Batch, Judgement, Worker
from annotation.mturk.links import hit_page_path, image_path
from annotation.mturk.protocol import PREVIEW_ASSIGNMENT_ID
from annotation.pages import page_items
from tests.mturk_published import published_on_sandbox
from tests.page_answers import page_answers

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
SANDBOX_SUBMIT = "https://workersandbox.mturk.com/mturk/externalSubmit"
FRAME_ANCESTORS = (
    "frame-ancestors https://www.mturk.com https://workersandbox.mturk.com https://worker.mturk.com"
)


@pytest.fixture(autouse=True)
def _mturk_settings(settings, monkeypatch):
    settings.MTURK_EXTERNAL_BASE_URL = "https://mitl.example.org"
    settings.MTURK_ALLOWED_SUBMIT_HOSTS = []

    def no_default_client(**kwargs):
        pytest.fail("a page made its own MTurk client: this test gives none")

    monkeypatch.setattr("annotation.mturk.client.mturk_client", no_default_client)


@pytest.fixture
def published(annotating_batch):
    """The annotating batch as if published on the sandbox (no MTurk call needed here)."""
    return published_on_sandbox(annotating_batch, hit_type_id="3TYPE1")


def first_hit(batch: Batch) -> HIT:
    return batch.hits.order_by("index").first()


def page_url(hit: HIT, **params: str) -> str:
    return f"{hit_page_path(hit)}?{urlencode(params)}"


def accepted(hit: HIT, worker: str = "A1WORKER", assignment: str = "3ASG1", **extra) -> str:
    params = {
        "assignmentId": assignment,
        "hitId": hit.external_id,
        "workerId": worker,
        "turkSubmitTo": "https://workersandbox.mturk.com",
        **extra,
    }
    return page_url(hit, **params)


def answers_for(hit: HIT, external: str = "3ASG1", *, wrong_golden: bool = False) -> dict:
    """Answers to the page of the HIT's MTurk assignment `external` (opened already), each
    pair named by its number there: tasks YES, goldens right (or the golden TN wrong)."""
    level_of = {"golden_tp": "yes", "golden_tn": "yes" if wrong_golden else "no", "task": "yes"}
    assignment = Assignment.objects.get(hit=hit, external_id=external)
    return {"answers": page_answers(assignment, level_of, elapsed_ms=800)}


# --- the HIT page -----------------------------------------------------------------------


def test_a_preview_shows_every_pair_with_inputs_off_and_stores_nothing(client, published):
    hit = first_hit(published)
    response = client.get(page_url(hit, assignmentId=PREVIEW_ASSIGNMENT_ID, hitId=hit.external_id))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-preview="1"' in html
    assert "Accept the HIT on MTurk to answer" in html
    assert html.count('class="pair"') == hit.items.count()
    assert "golden" not in html.lower()
    assert "data-submit-url" not in html
    assert not Assignment.objects.exists() and not Worker.objects.exists()


def test_only_mturk_may_frame_the_hit_page(client, published):
    hit = first_hit(published)
    response = client.get(page_url(hit, assignmentId=PREVIEW_ASSIGNMENT_ID))
    assert "X-Frame-Options" not in response
    assert response["Content-Security-Policy"] == FRAME_ANCESTORS


@pytest.mark.parametrize("name", ["login", "frontend:home", "frontend:mturk-submit"])
def test_every_other_page_still_refuses_framing(client, name):
    response = client.get(reverse(name))
    assert response["X-Frame-Options"] == "DENY"
    assert "Content-Security-Policy" not in response


def test_a_forged_signature_or_another_hits_id_is_not_found(client, published):
    hit = first_hit(published)
    assert client.get(f"/mturk/hits/{hit.pk}/forged/").status_code == 404
    other = published.hits.order_by("index")[1]
    response = client.get(accepted(hit, hitId=other.external_id))
    assert response.status_code == 404
    assert "not on MTurk" in response.content.decode()
    assert not Assignment.objects.exists()


def test_accepting_opens_the_workers_assignment_without_an_account(client, published):
    hit = first_hit(published)
    response = client.get(accepted(hit))
    html = response.content.decode()
    assert response.status_code == 200
    assignment = Assignment.objects.get(external_id="3ASG1")
    assert (assignment.hit_id, assignment.worker.source) == (hit.pk, "mturk")
    assert assignment.worker.external_id == "A1WORKER"
    assert f'data-mturk-submit-to="{SANDBOX_SUBMIT}"' in html
    assert 'data-mturk-assignment-id="3ASG1"' in html
    assert "/mturk/submit/?assignmentId=3ASG1&amp;workerId=A1WORKER&amp;hitId=3HIT" in html
    assert 'data-preview="1"' not in html
    assert response["Content-Security-Policy"] == FRAME_ANCESTORS
    assert client.get(accepted(hit)).status_code == 200  # a reload resumes the same work
    assert Assignment.objects.count() == 1


def test_the_page_names_its_pairs_and_their_images_by_number_not_item_id(client, published):
    # An item id would point at a golden that replaced a suspended one: it is newer.
    hit = first_hit(published)
    html = client.get(accepted(hit)).content.decode()
    assignment = Assignment.objects.get(external_id="3ASG1")
    rows = page_items(hit_id=hit.pk, assignment=assignment, fields=("image__file",))

    assert re.findall(r'data-item="(\d+)"', html) == [str(n) for n in range(1, len(rows) + 1)]
    links = re.findall(r'src="(/mturk/hits/[^"]+)"', html)
    assert len(links) == len(rows)
    for number, (link, (_pk, stored)) in enumerate(zip(links, rows, strict=True), start=1):
        assert f"/mturk/hits/{hit.pk}/pages/{assignment.pk}/pairs/{number}/" in link
        served = client.get(link)
        assert served["Content-Disposition"] == f'inline; filename="pair-{number}.png"'
        with default_storage.open(stored) as handle:
            assert b"".join(served.streaming_content) == handle.read()
    assert client.get(links[0].replace("/pairs/1/", "/pairs/2/")).status_code == 404  # forged
    preview = client.get(page_url(hit, assignmentId=PREVIEW_ASSIGNMENT_ID)).content.decode()
    assert f"/mturk/hits/{hit.pk}/pages/0/pairs/1/" in preview


def test_turk_submit_to_must_be_one_of_mturks_sites(client, published, settings):
    hit = first_hit(published)
    response = client.get(accepted(hit, turkSubmitTo="https://evil.example"))
    assert response.status_code == 400
    assert "must be opened from MTurk" in response.content.decode()
    assert not Assignment.objects.exists()
    settings.MTURK_ALLOWED_SUBMIT_HOSTS = ["http://127.0.0.1:8765"]  # a local stand-in
    response = client.get(accepted(hit, turkSubmitTo="http://127.0.0.1:8765"))
    assert response.status_code == 200
    assert 'data-mturk-submit-to="http://127.0.0.1:8765/mturk/externalSubmit"' in (
        response.content.decode()
    )
    assert response["Content-Security-Policy"] == f"{FRAME_ANCESTORS} http://127.0.0.1:8765"


def test_an_accepted_page_without_mturks_hit_id_is_refused(client, published):
    url = accepted(first_hit(published)).replace("hitId=", "hitIdx=")
    response = client.get(url)
    assert response.status_code == 400
    assert "hitId is missing" in response.content.decode()
    assert not Assignment.objects.exists()


def test_a_blocked_worker_is_told_why(client, published):
    Worker.objects.create(source="mturk", external_id="A1BAD", is_blocked=True)
    response = client.get(accepted(first_hit(published), worker="A1BAD"))
    assert response.status_code == 403
    assert "blocked from these HITs: please return this HIT" in response.content.decode()
    assert not Assignment.objects.exists()


def test_a_closed_batch_asks_to_return_the_hit(client, published):
    Batch.objects.filter(pk=published.pk).update(state="aggregating")
    response = client.get(accepted(first_hit(published)))
    assert response.status_code == 410
    assert "This HIT is closed" in response.content.decode()


def test_the_submit_needs_no_session_nor_csrf_token_and_stores_once_unapproved(published):
    hit = first_hit(published)
    worker = Client(enforce_csrf_checks=True)  # a third-party frame sends no cookie
    assert worker.get(accepted(hit)).status_code == 200
    query = urlencode({"assignmentId": "3ASG1", "workerId": "A1WORKER", "hitId": hit.external_id})
    url = f"{reverse('frontend:mturk-submit')}?{query}"
    body = json.dumps(answers_for(hit))
    first = worker.post(url, body, content_type="application/json")
    assert first.status_code == 201
    assert first.json() == {
        "assignment": Assignment.objects.get().pk,
        "status": "submitted",  # the sync decides once MTurk lists the assignment
        "created": True,
        "judgements": hit.items.count(),
    }  # no golden result: the ids may be made up (made-up ids used to learn the check pairs)
    again = worker.post(url, body, content_type="application/json")
    assert (again.status_code, again.json()["created"]) == (200, False)
    assert Judgement.objects.count() == hit.items.count()


def test_made_up_ids_on_the_public_page_never_get_work_approved(published):
    hit = first_hit(published)  # its URL is public: any MTurk worker's preview shows it
    forger = Client(enforce_csrf_checks=True)
    assert forger.get(accepted(hit, worker="A1MADEUP", assignment="3MADEUP")).status_code == 200
    query = urlencode({"assignmentId": "3MADEUP", "workerId": "A1MADEUP", "hitId": hit.external_id})
    response = forger.post(
        f"{reverse('frontend:mturk-submit')}?{query}",
        json.dumps(answers_for(hit, "3MADEUP")),  # even every check pair right
        content_type="application/json",
    )
    assert response.status_code == 201
    stored = Assignment.objects.get(external_id="3MADEUP")
    assert (stored.status, stored.golden_passed, stored.reviewed_at) == ("submitted", True, None)
    assert not Assignment.objects.filter(status="approved").exists()  # aggregation counts these


def submit_url(hit: HIT, worker: str, assignment: str) -> str:
    query = urlencode({"assignmentId": assignment, "workerId": worker, "hitId": hit.external_id})
    return f"{reverse('frontend:mturk-submit')}?{query}"


def test_a_resubmit_with_other_answers_is_a_409_that_keeps_the_stored_ones(published):
    hit = first_hit(published)
    worker = Client(enforce_csrf_checks=True)
    assert worker.get(accepted(hit)).status_code == 200
    url = submit_url(hit, "A1WORKER", "3ASG1")
    first = worker.post(url, json.dumps(answers_for(hit)), content_type="application/json")
    stored = sorted(Judgement.objects.values_list("item_id", "level"))

    again = worker.post(
        url, json.dumps(answers_for(hit, wrong_golden=True)), content_type="application/json"
    )

    assert again.status_code == 409
    assert again.json() == {
        "detail": ANSWERED_OTHERWISE,
        "stored": {**first.json(), "created": False},  # still nothing about the check
    }
    assert sorted(Judgement.objects.values_list("item_id", "level")) == stored


def test_forged_ids_are_bounded_per_hit_and_never_push_out_stored_work(published):
    hit = first_hit(published)
    HIT.objects.filter(pk=hit.pk).update(max_assignments=1)
    real = Client(enforce_csrf_checks=True, REMOTE_ADDR="198.51.100.4")
    assert real.get(accepted(hit, worker="A1REAL", assignment="3REAL")).status_code == 200
    response = real.post(
        submit_url(hit, "A1REAL", "3REAL"),
        json.dumps(answers_for(hit, "3REAL")),
        content_type="application/json",
    )
    assert response.status_code == 201
    stored = sorted(Judgement.objects.values_list("pk", "level"))
    forger = Client(enforce_csrf_checks=True, REMOTE_ADDR="203.0.113.9")
    statuses = []
    for n in range(30):
        worker, assignment = f"A1FORGED{n}", f"3FORGED{n}"
        page = forger.get(accepted(hit, worker=worker, assignment=assignment))
        statuses.append(page.status_code)
        if page.status_code == 429:
            assert int(page["Retry-After"]) > 0
            continue
        response = forger.post(
            submit_url(hit, worker, assignment),
            json.dumps(answers_for(hit, assignment)),
            content_type="application/json",
        )
        assert response.status_code == 201
    assert statuses == [200] * 10 + [429] * 20  # 1 + 10 unverified submissions per HIT
    assert Assignment.objects.get(external_id="3REAL").status == "submitted"
    assert set(stored) <= set(Judgement.objects.values_list("pk", "level"))  # kept, all
    assert Worker.objects.filter(source="mturk").count() == 11  # bounded, whatever forgers do


def test_the_submit_and_the_page_after_it_never_tell_the_golden_result(published):
    hit = first_hit(published)
    bodies = {}
    for name, wrong_golden in (("A1RIGHT", False), ("A1WRONG", True)):
        worker = Client(enforce_csrf_checks=True)
        assignment = f"3{name[2:]}"
        worker.get(accepted(hit, worker=name, assignment=assignment))
        answers = answers_for(hit, assignment, wrong_golden=wrong_golden)
        response = worker.post(
            submit_url(hit, name, assignment), json.dumps(answers), content_type="application/json"
        )
        assert response.status_code == 201
        assert "golden" not in response.content.decode().lower()
        bodies[name] = {k: v for k, v in response.json().items() if k != "assignment"}
        page = worker.get(accepted(hit, worker=name, assignment=assignment)).content.decode()
        assert "golden" not in page.lower() and "passed" not in page.lower()
    assert bodies["A1RIGHT"] == bodies["A1WRONG"]  # the same answer, pass or fail
    assert Assignment.objects.get(external_id="3WRONG").golden_passed is False  # kept here


@pytest.mark.parametrize(
    "wrong", [{"workerId": "A1OTHER"}, {"hitId": "3HITOTHER"}, {"assignmentId": "3ASG9"}]
)
def test_a_submit_naming_another_worker_hit_or_assignment_is_not_found(client, published, wrong):
    hit = first_hit(published)
    client.get(accepted(hit))
    params = {"assignmentId": "3ASG1", "workerId": "A1WORKER", "hitId": hit.external_id}
    url = f"{reverse('frontend:mturk-submit')}?{urlencode(params | wrong)}"
    response = client.post(url, json.dumps(answers_for(hit)), content_type="application/json")
    assert response.status_code == 404
    assert not Judgement.objects.exists()


def test_a_stored_hit_offers_to_finish_on_mturk(client, published):
    hit = first_hit(published)
    client.get(accepted(hit))
    query = urlencode({"assignmentId": "3ASG1", "workerId": "A1WORKER", "hitId": hit.external_id})
    client.post(
        f"{reverse('frontend:mturk-submit')}?{query}",
        json.dumps(answers_for(hit)),
        content_type="application/json",
    )
    html = client.get(accepted(hit)).content.decode()
    assert "Your answers to this HIT are saved" in html
    assert f'action="{SANDBOX_SUBMIT}"' in html
    # externalSubmit needs a field besides assignmentId: the summary hit.js also posts
    assignment = Assignment.objects.get(external_id="3ASG1")
    for name, value in (
        ("assignmentId", "3ASG1"),
        ("platform_assignment", assignment.pk),
        ("judgements", hit.items.count()),
        ("status", "submitted"),
    ):
        assert f'<input type="hidden" name="{name}" value="{value}">' in html


def test_signed_images_are_served_and_unsigned_ones_are_not(client, published):
    item = first_hit(published).items.order_by("position").first()
    response = client.get(image_path(item.pk))
    assert response.status_code == 200
    assert b"".join(response.streaming_content).startswith(b"\x89PNG")
    assert client.get(f"/mturk/images/{item.pk}/forged/").status_code == 404


def test_a_signed_image_does_not_reveal_its_stored_file_name(client, published):
    hit = first_hit(published)
    for item in hit.items.select_related("image"):
        stored = Path(item.image.file.name)
        response = client.get(image_path(item.pk))

        assert response["Content-Disposition"] == f'inline; filename="item-{item.pk}.png"'
        assert stored.stem not in image_path(item.pk)


# --- the admin's page -------------------------------------------------------------------


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user("boss", password=PASSWORD, is_staff=True)


def batch_page(batch: Batch) -> str:
    return reverse("frontend:mturk-batch", args=[batch.pk])


def post_queued(client, batch: Batch, data: dict, capture) -> HttpResponse:
    """POST an action that queues a task, let the commit send it (eager: it runs), then
    show the page (the redirect's target)."""
    with capture(execute=True):
        client.post(batch_page(batch), data)
    return client.get(batch_page(batch))


def test_the_admin_page_is_for_staff_only(client, annotating_batch):
    assert client.get(batch_page(annotating_batch)).status_code == 302
    annotator = get_user_model().objects.create_user("ann", password=PASSWORD)
    client.force_login(annotator)
    assert client.get(batch_page(annotating_batch)).status_code == 403
    assert client.post(batch_page(annotating_batch), {"action": "sync"}).status_code == 403


def test_the_admin_sees_the_cost_and_saves_settings(client, staff, annotating_batch):
    client.force_login(staff)
    hits = annotating_batch.hits.count()
    html = client.get(batch_page(annotating_batch)).content.decode()
    assert f'<strong id="mturk-total">${Decimal("0.60") * hits * 2}</strong>' in html
    assert 'name="reward" value="0.50"' in html
    response = client.post(
        batch_page(annotating_batch),
        {
            "action": "settings",
            "title": "Match images and descriptions",
            "description": "Judge 18 pairs.",
            "keywords": "image",
            "reward": "1.00",
            "assignment_minutes": "40",
            "lifetime_hours": "24",
            "auto_approval_hours": "48",
            "min_approval_rate": "98",
            "min_approved_hits": "",
            "locales": "US GB",
        },
        follow=True,
    )
    total = str(Decimal("1.20") * hits * 2)
    assert f"Settings saved. Estimated cost: ${total}" in response.content.decode()
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["settings"]["reward"] == "1.00"
    assert state["settings"]["min_approved_hits"] is None
    assert state["settings"]["locales"] == ["US", "GB"]
    assert state["cost_estimate"]["total"] == total
    bad = client.post(
        batch_page(annotating_batch), {"action": "settings", "reward": "x"}, follow=True
    )
    assert "must be a dollar amount" in bad.content.decode()


def test_production_needs_the_typed_confirmation(client, staff, annotating_batch):
    client.force_login(staff)
    response = client.post(
        batch_page(annotating_batch),
        {"action": "publish", "environment": "production", "confirm": "yes"},
        follow=True,
    )
    assert "type PRODUCTION in the confirmation box" in response.content.decode()
    assert not annotating_batch.hits.filter(external_id__isnull=False).exists()


def test_the_admin_publishes_on_the_sandbox_then_decides_and_pays(
    client, staff, annotating_batch, mturk_api, eager_celery, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    client.force_login(staff)
    hits = list(annotating_batch.hits.order_by("index"))
    mturk_api.add_response("create_hit_type", {"HITTypeId": "3TYPE1"})
    for hit in hits:
        mturk_api.add_response(
            "create_hit_with_hit_type",
            {"HIT": {"HITId": f"3HIT{hit.pk:026d}", "HITGroupId": "3GROUP1"}},
        )
    response = post_queued(
        client, annotating_batch, {"action": "publish", "environment": "sandbox"}, capture
    )
    mturk_api.assert_no_pending_responses()
    html = response.content.decode()
    assert "Publishing on the sandbox" in html
    assert f"sandbox: {len(hits)} HITs published now, 0 before" in html
    assert "https://workersandbox.mturk.com/mturk/preview?groupId=3GROUP1" in html
    assert not annotating_batch.hits.filter(external_id__isnull=True).exists()

    hit = HIT.objects.get(pk=hits[0].pk)
    worker = Client()
    worker.get(accepted(hit))
    wrong = answers_for(hit, wrong_golden=True)
    query = urlencode({"assignmentId": "3ASG1", "workerId": "A1WORKER", "hitId": hit.external_id})
    worker.post(
        f"{reverse('frontend:mturk-submit')}?{query}",
        json.dumps(wrong),
        content_type="application/json",
    )
    assignment = Assignment.objects.get(external_id="3ASG1")
    assert (assignment.status, assignment.flagged) == ("submitted", True)
    html = client.get(batch_page(annotating_batch)).content.decode()
    assert "3ASG1" in html
    assert "waiting for MTurk" in html  # no approve button until MTurk confirms it
    decide = {"action": "review", "assignment": assignment.pk, "decision": "approve"}

    # Its ids may be made up: nobody approves it before MTurk lists it.
    html = client.post(batch_page(annotating_batch), decide, follow=True).content.decode()
    assert "MTurk has not confirmed assignment 3ASG1 yet" in html
    assert f"Run `mturk_sync {annotating_batch.pk}` first" in html
    assert Assignment.objects.get(pk=assignment.pk).status == "submitted"

    # The sync finds it on MTurk: confirmed, and (flagged) left to a person.
    listing = {
        "Assignments": [
            {
                "AssignmentId": "3ASG1",
                "WorkerId": "A1WORKER",
                "HITId": hit.external_id,
                "AssignmentStatus": "Submitted",
            }
        ]
    }
    mturk_api.add_response("list_assignments_for_hit", listing)
    for _ in hits[1:]:
        mturk_api.add_response("list_assignments_for_hit", {"Assignments": []})
    html = post_queued(client, annotating_batch, {"action": "sync"}, capture).content
    mturk_api.assert_no_pending_responses()
    assert "0 approved, 0 rejected, 0 re-posted, 1 waiting for review here." in html.decode()

    response = client.post(batch_page(annotating_batch), decide, follow=True)
    assert "Assignment 3ASG1 approved; the next sync tells MTurk." in response.content.decode()
    mturk_api.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "A1WORKER",
            "AssignmentId": "3ASG1",
            "BonusAmount": "0.30",
            "Reason": "Thanks",
            "UniqueRequestToken": "mitl-bonus-3ASG1",
        },
    )
    response = client.post(
        batch_page(annotating_batch),
        {"action": "bonus", "assignment": assignment.pk, "amount": "0.3", "reason": "Thanks"},
        follow=True,
    )
    mturk_api.assert_no_pending_responses()
    assert "Bonus of $0.30 sent for 3ASG1." in response.content.decode()

    mturk_api.add_response("list_assignments_for_hit", listing)
    mturk_api.add_response("approve_assignment", {}, {"AssignmentId": "3ASG1"})
    for _ in hits[1:]:
        mturk_api.add_response("list_assignments_for_hit", {"Assignments": []})
    response = post_queued(client, annotating_batch, {"action": "sync"}, capture)
    mturk_api.assert_no_pending_responses()
    html = response.content.decode()
    assert "1 approved, 0 rejected, 0 re-posted, 0 waiting for review here." in html
    assert "approved (platform)" in html
