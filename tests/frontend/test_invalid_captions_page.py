"""The invalid-captions page: staff review captions judged "100% NO" and mark or unmark them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from annotation.handout import assignment_create
from annotation.models import HIT, Caption, Worker
from annotation.submissions import AnswerInput, assignment_submit
from pipeline.invalid_captions import caption_mark_invalid, invalid_captions_review
from pipeline.stages import batch_run_until

pytestmark = pytest.mark.django_db
URL = "/captions/invalid/"


@pytest.fixture
def to_review(batch) -> list:
    """A worker answers "100% NO" to every pair of the first HIT, its golden TP included."""
    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    hit = HIT.objects.filter(batch=batch).order_by("index").first()
    assignment = assignment_create(
        hit=hit, worker=Worker.objects.create(source="platform", external_id="naysayer")
    )
    answers = [AnswerInput(item_id=pk, level="no") for pk in hit.items.values_list("pk", flat=True)]
    assignment_submit(assignment=assignment, answers=answers, followups_required=True)
    rows = invalid_captions_review()
    assert rows
    return rows


def as_user(client: Client, *, staff: bool) -> Client:
    client.force_login(get_user_model().objects.create_user("someone", is_staff=staff))
    return client


def test_the_url_is_named():
    assert reverse("frontend:invalid-captions") == URL


def test_anonymous_visitors_are_sent_to_log_in_and_cannot_mark(client, to_review):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    caption = to_review[0].caption
    posted = client.post(URL, {"caption": caption.pk, "action": "mark", "reason": "meaningless"})
    assert posted.status_code == 302
    caption.refresh_from_db()
    assert caption.is_invalid is False


def test_people_who_are_not_staff_are_refused(client, to_review):
    as_user(client, staff=False)
    caption = to_review[0].caption
    assert client.get(URL).status_code == 403
    posted = client.post(URL, {"caption": caption.pk, "action": "mark", "reason": "meaningless"})
    assert posted.status_code == 403
    caption.refresh_from_db()
    assert caption.is_invalid is False


def test_staff_see_each_caption_with_its_image_and_counts(client, to_review):
    response = as_user(client, staff=True).get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="site"' in html  # inside the site layout
    for row in to_review:
        caption = row.caption
        assert caption.text in html
        assert f'src="{caption.image.file.url}"' in html
        assert f"{row.no_answers} of {row.answers}" in html
    assert html.count('name="csrfmiddlewaretoken"') >= len(to_review)
    assert 'value="wrong_for_image"' in html


def test_marking_redirects_with_a_message_and_the_caption_becomes_invalid(client, to_review):
    as_user(client, staff=True)
    caption = to_review[0].caption
    response = client.post(
        URL + "?dataset=small",
        {"caption": caption.pk, "action": "mark", "reason": "wrong_for_image"},
    )
    assert response.status_code == 302
    assert response["Location"] == URL + "?dataset=small"
    caption.refresh_from_db()
    assert (caption.is_invalid, caption.invalid_reason) == (True, "wrong_for_image")
    page = client.get(response["Location"]).content.decode()
    assert f"Caption {caption.ext_id} marked invalid" in page
    assert "Unmark" in page


def test_unmarking_from_the_page(client, dataset):
    caption = Caption.objects.filter(dataset=dataset).first()
    caption_mark_invalid(caption=caption, reason="meaningless")
    as_user(client, staff=True)
    assert caption.text in client.get(URL).content.decode()  # marked captions stay listed
    response = client.post(URL, {"caption": caption.pk, "action": "unmark"}, follow=True)
    assert f"Caption {caption.ext_id} is valid again." in response.content.decode()
    caption.refresh_from_db()
    assert caption.is_invalid is False


def test_a_bad_reason_or_action_is_refused_with_a_message(client, to_review):
    as_user(client, staff=True)
    caption = to_review[0].caption
    bad_reason = client.post(
        URL, {"caption": caption.pk, "action": "mark", "reason": "ugly"}, follow=True
    )
    assert "must be one of meaningless, wrong_for_image" in bad_reason.content.decode()
    bad_action = client.post(URL, {"caption": caption.pk, "action": "delete"}, follow=True)
    assert "Choose mark or unmark." in bad_action.content.decode()
    caption.refresh_from_db()
    assert caption.is_invalid is False


def test_an_unknown_caption_is_not_found(client, dataset):
    as_user(client, staff=True)
    assert client.post(URL, {"caption": "999999", "action": "unmark"}).status_code == 404
    assert client.post(URL, {"caption": "x", "action": "unmark"}).status_code == 404


def test_a_post_without_the_csrf_token_is_refused(to_review):
    client = Client(enforce_csrf_checks=True)
    as_user(client, staff=True)
    caption = to_review[0].caption
    response = client.post(URL, {"caption": caption.pk, "action": "mark", "reason": "meaningless"})
    assert response.status_code == 403
    caption.refresh_from_db()
    assert caption.is_invalid is False


def test_the_dataset_filter_keeps_only_that_dataset(client, to_review, synthetic_files):
    from annotation.imports.datasets import dataset_import_tsv

    other = dataset_import_tsv(name="other", captions_path=synthetic_files / "captions.tsv")
    marked = Caption.objects.filter(dataset=other).order_by("pk").last()
    caption_mark_invalid(caption=marked, reason="meaningless")
    as_user(client, staff=True)
    everything = client.get(URL).content.decode()
    assert f'id="caption-{marked.pk}"' in everything
    assert f'id="caption-{to_review[0].caption.pk}"' in everything
    small = client.get(URL + "?dataset=small").content.decode()
    assert f'id="caption-{marked.pk}"' not in small
    assert f'id="caption-{to_review[0].caption.pk}"' in small
    assert '<option value="small" selected>' in small
    only_other = client.get(URL + "?dataset=other").content.decode()
    assert f'id="caption-{marked.pk}"' in only_other
    assert f'id="caption-{to_review[0].caption.pk}"' not in only_other
