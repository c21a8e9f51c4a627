"""The relevance calibration page's form (issue 28): it runs what `relevance_calibrate` runs,
keeps the report for the page, and shows the service's refusal instead of a server error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotation.models import Dataset, RelevanceCalibration
from tests.pipeline.test_relevance_service import rated_pairs, sits_file

pytestmark = pytest.mark.django_db


def client_of(*, staff: bool) -> Client:
    client = Client()
    user = get_user_model().objects.create_user("boss" if staff else "ann", is_staff=staff)
    client.force_login(user)
    return client


def page(dataset: Dataset) -> str:
    return reverse("frontend:dataset-relevance", args=[dataset.pk])


def upload(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile("sits_test.csv", path.read_bytes(), content_type="text/csv")


def test_without_a_calibration_the_page_says_how_to_make_one(dataset):
    html = client_of(staff=True).get(page(dataset)).content.decode()
    assert 'id="no-calibration"' in html and "Make one with the form below" in html
    assert 'id="calibration-form"' in html and 'data-wait="Calibrating…"' in html
    assert re.search(
        r"value=\"bow\"[^>]*checked", html
    )  # every proxy that runs here, as the command


def test_the_form_runs_the_calibration_and_shows_the_new_report(dataset, tmp_path):
    ratings = upload(sits_file(tmp_path, rated_pairs(dataset, 40)))
    data = {"sits": ratings, "proxies": ["bow", "rouge_l"], "combination": "on"}

    response = client_of(staff=True).post(page(dataset), data, follow=True)

    assert response.redirect_chain[-1][0] == page(dataset)
    stored = RelevanceCalibration.objects.get(dataset=dataset)
    rows = {row["proxy"] for row in stored.report["sits"]["table"]}
    assert {"bow/max", "rouge_l/mean", "combination"} <= rows
    html = response.content.decode()
    assert "Calibrated against sits" in html
    assert 'id="calibration-sits"' in html and "<svg" in html and 'id="no-calibration"' not in html


def test_a_bad_ratings_line_is_refused_with_the_services_message(dataset, tmp_path):
    bad = sits_file(tmp_path, [("COCO_val2014:sentid:999999999", "synthetic_000001.png", 1.0)])
    response = client_of(staff=True).post(page(dataset), {"sits": upload(bad), "proxies": ["bow"]})

    assert response.status_code == 200
    html = response.content.decode()
    assert "sits.csv:2: " in html and "not in the dataset" in html
    assert str(tmp_path) not in html  # the upload's own name, not where it was kept
    assert not RelevanceCalibration.objects.exists()


def test_no_ratings_at_all_is_refused_saying_what_to_upload(dataset):
    response = client_of(staff=True).post(page(dataset), {"proxies": ["bow"]})
    assert response.status_code == 200
    assert "No ratings to calibrate against" in response.content.decode()
    assert not RelevanceCalibration.objects.exists()


def test_only_staff_may_calibrate(dataset):
    path = page(dataset)
    assert (
        Client().post(path, {"proxies": ["bow"]})["Location"] == f"{reverse('login')}?next={path}"
    )
    assert client_of(staff=False).post(path, {"proxies": ["bow"]}).status_code == 403
