"""The qualification round on the batch's MTurk page: its mode and pass mark, the type made
at publication, the settings form, and the grant form of the granted mode (the real boto3
client behind botocore's Stubber); and the signed images of MTurk's test."""

from __future__ import annotations

import pytest
from botocore.stub import ANY
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Batch, Caption, QualificationPair
from annotation.mturk.links import qualification_image_path

pytestmark = pytest.mark.django_db

QUAL_ID = "3QUAL00000000000000000000000001"


@pytest.fixture(autouse=True)
def _mturk_settings(settings):
    settings.MTURK_EXTERNAL_BASE_URL = "https://mitl.example.org"


@pytest.fixture
def round_batch(annotating_batch) -> Batch:
    """The annotating batch with a round of 5 pairs, 4 of which must be right (80%)."""
    config = {**annotating_batch.config, "qualification_pairs": 5, "qualification_pass": 0.8}
    Batch.objects.filter(pk=annotating_batch.pk).update(config=config)
    captions = Caption.objects.filter(dataset=annotating_batch.dataset).order_by("pk")[:5]
    for position, caption in enumerate(captions):
        QualificationPair.objects.create(
            batch=annotating_batch,
            position=position,
            image=caption.image,
            caption=caption,
            positive=True,
            source="admin",
        )
    annotating_batch.refresh_from_db()
    return annotating_batch


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_user("boss", is_staff=True))
    return client


def page(batch: Batch) -> str:
    return reverse("frontend:mturk-batch", args=[batch.pk])


def test_a_batch_without_a_round_shows_no_qualification(staff_client, annotating_batch):
    html = staff_client.get(page(annotating_batch)).content.decode()
    assert 'id="mturk-qualification"' not in html


def test_the_page_shows_the_round_and_saves_its_mode(staff_client, round_batch):
    html = staff_client.get(page(round_batch)).content.decode()
    assert '<td id="qualification-pass">80% (4 of 5 pairs right)</td>' in html
    assert "made when the batch is published" in html
    assert 'id="qualification-mode">test' in html
    response = staff_client.post(
        page(round_batch),
        {
            "action": "settings",
            "qualification_mode": "granted",
            "qualification_retry_minutes": "120",
        },
        follow=True,
    )
    assert "Settings saved" in response.content.decode()
    settings = Batch.objects.get(pk=round_batch.pk).mturk["settings"]
    assert (settings["qualification_mode"], settings["qualification_retry_minutes"]) == (
        "granted",
        120,
    )
    assert settings["reward"] == "0.50"  # the other settings kept
    bad = staff_client.post(
        page(round_batch), {"action": "settings", "qualification_mode": "quiz"}, follow=True
    )
    assert "`qualification_mode` must be one of test, granted" in bad.content.decode()
    short = staff_client.post(
        page(round_batch),
        {"action": "settings", "qualification_retry_minutes": "5"},
        follow=True,
    )
    assert "`qualification_retry_minutes` must be between 60 and 43200" in short.content.decode()


def test_the_admin_publishes_then_grants_the_qualification(
    staff_client, round_batch, mturk_api, eager_celery, django_capture_on_commit_callbacks
):
    Batch.objects.filter(pk=round_batch.pk).update(
        mturk={"settings": {"qualification_mode": "granted"}}
    )
    mturk_api.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": QUAL_ID}},
        {"Name": ANY, "Description": ANY, "Keywords": ANY, "QualificationTypeStatus": "Active"},
    )
    mturk_api.add_response("create_hit_type", {"HITTypeId": "3TYPE1"})
    for hit in round_batch.hits.order_by("index"):
        mturk_api.add_response(
            "create_hit_with_hit_type",
            {"HIT": {"HITId": f"3HIT{hit.pk:026d}", "HITGroupId": "3GROUP1"}},
        )
    with django_capture_on_commit_callbacks(execute=True):  # the publication is queued on commit
        staff_client.post(page(round_batch), {"action": "publish", "environment": "sandbox"})
    html = staff_client.get(page(round_batch)).content.decode()
    assert f'<code id="qualification-type-id">{QUAL_ID}</code> on sandbox' in html
    assert f"qualification type {QUAL_ID}" in html  # in the last publish's outcome
    assert 'id="qualification-grant"' in html

    mturk_api.add_response(
        "associate_qualification_with_worker",
        {},
        {
            "QualificationTypeId": QUAL_ID,
            "WorkerId": "A2NEWWORKER",
            "IntegerValue": 100,
            "SendNotification": True,
        },
    )
    grant = {"action": "grant_qualification", "worker_id": " A2NEWWORKER "}
    html = staff_client.post(page(round_batch), grant, follow=True).content.decode()
    mturk_api.assert_no_pending_responses()
    assert "Qualification granted to worker A2NEWWORKER on MTurk" in html
    assert "<code>A2NEWWORKER</code>" in html
    again = staff_client.post(page(round_batch), grant, follow=True).content.decode()
    assert "was granted the qualification before: nothing sent" in again
    bad = {"action": "grant_qualification", "worker_id": "nobody"}
    refused = staff_client.post(page(round_batch), bad, follow=True).content.decode()
    assert "is not an MTurk WorkerId" in refused


def test_the_tests_images_are_signed(client, round_batch):
    pair = QualificationPair.objects.filter(batch=round_batch).order_by("position").first()
    response = client.get(qualification_image_path(pair.pk))
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'inline; filename="qualification-{pair.pk}.png"'
    forged = f"/mturk/qualification-images/{pair.pk}/forged/"
    assert client.get(forged).status_code == 404
    other = qualification_image_path(pair.pk).replace(f"/{pair.pk}/", f"/{pair.pk + 1}/")
    assert client.get(other).status_code == 404  # a signature holds for its own pair only
