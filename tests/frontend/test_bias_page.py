"""The bias report page of a batch: staff only, the same fragment the command writes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Batch
from tests.pipeline_runs import run_to_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def released(batch) -> Batch:
    batch = run_to_release(batch)
    return batch


def as_user(client, *, staff: bool):
    client.force_login(get_user_model().objects.create_user("someone", is_staff=staff))
    return client


def report_of(response) -> str:
    """The report's fragment in a page (the rest holds a fresh CSRF token each time)."""
    html = response.content.decode()
    return html[html.index('<section class="bias-report">') : html.index("</section>")]


def test_anonymous_visitors_are_sent_to_log_in(client, batch):
    url = reverse("frontend:batch-bias", args=[batch.pk])
    response = client.get(url)
    assert response.status_code == 302
    assert f"next={url}" in response["Location"]


def test_people_who_are_not_staff_are_refused(client, batch):
    response = as_user(client, staff=False).get(reverse("frontend:batch-bias", args=[batch.pk]))
    assert response.status_code == 403


def test_staff_see_the_report_with_its_charts_inside_the_site_layout(client, released):
    response = as_user(client, staff=True).get(f"/batches/{released.pk}/bias/")

    assert response.status_code == 200
    html = response.content.decode()
    assert '<section class="bias-report">' in html
    assert html.count("<svg") == 3
    assert "Model bias" in html and "Answers per annotator" in html
    assert "<td>tfidf</td>" in html
    assert 'class="site"' in html  # the shared header of frontend/base.html
    assert ".bias-report table" in html  # the report's styles, once, in the head
    assert "<!doctype html>" in html and html.count("<!doctype html>") == 1


def test_a_batch_without_verdicts_says_so(client, batch):
    response = as_user(client, staff=True).get(f"/batches/{batch.pk}/bias/")
    assert response.status_code == 200
    assert "has no verdicts yet" in response.content.decode()
    assert "<svg" not in response.content.decode()


def test_an_unknown_batch_is_not_found(client, db):
    response = as_user(client, staff=True).get("/batches/999/bias/")
    assert response.status_code == 404


@pytest.fixture
def built(monkeypatch) -> list[int]:
    """The batches whose bias report was scored (not read from its file), in order."""
    import pipeline.bias_page

    builds: list[int] = []
    real_build = pipeline.bias_page.bias_report_build

    def counting_build(**kwargs):
        builds.append(kwargs["batch"].pk)
        return real_build(**kwargs)

    monkeypatch.setattr(pipeline.bias_page, "bias_report_build", counting_build)
    return builds


def test_the_report_is_built_once_and_served_again_until_the_work_changes(
    client, released, built, django_assert_max_num_queries
):
    client = as_user(client, staff=True)
    first = report_of(client.get(f"/batches/{released.pk}/bias/"))
    # Served again: the session, the user, the batch and the fingerprint's aggregates only.
    with django_assert_max_num_queries(10):
        second = report_of(client.get(f"/batches/{released.pk}/bias/"))
    assert built == [released.pk]
    assert first == second

    caption = released.dataset.captions.order_by("pk").first()
    caption.is_invalid, caption.invalid_reason = True, "garbled"
    caption.save(update_fields=["is_invalid", "invalid_reason"])
    client.get(f"/batches/{released.pk}/bias/")
    assert built == [released.pk, released.pk]  # a caption marked invalid: built again


def test_the_sections_after_the_summary_are_folded_the_first_open(client, released):
    html = as_user(client, staff=True).get(f"/batches/{released.pk}/bias/").content.decode()
    assert html.count('<details class="bias-section"') == 5
    assert html.count('<details class="bias-section" open>') == 1
    assert '<details class="bias-section" open><summary><h2>Answers per annotator</h2>' in html


def test_the_api_and_the_page_share_one_build_and_a_release_can_prebuild_it(
    client, released, built
):
    from pipeline.bias_page import bias_cache_warm

    assert bias_cache_warm(batch_id=released.pk) is True  # what mitl.bias_warm runs
    client = as_user(client, staff=True)
    report = client.get(f"/api/batches/{released.pk}/bias/")
    page = client.get(f"/batches/{released.pk}/bias/")
    assert (report.status_code, page.status_code) == (200, 200)
    assert built == [released.pk]  # scored once, for the API and the page alike
    assert "tfidf" in report.json()["annotators"]


def test_releasing_says_so_for_the_workers_to_prebuild_the_bias_report(batch):
    from pipeline.stages import stage_advance

    run_to_release(batch, until="aggregating")
    assert stage_advance(batch_id=batch.pk, stage="aggregating").released is True
    again = stage_advance(batch_id=batch.pk, stage="aggregating")
    assert again.released is False  # a duplicate delivery builds nothing twice
