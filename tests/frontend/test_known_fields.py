"""Web forms refuse a posted field they do not have (frontend/views/known_fields.py), as the
API does, yet take Django's CSRF token and the fields of the other forms on their page."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Batch, ImportJob
from frontend.views.known_fields import form_field_names
from frontend.views.wizard import BatchWizardForm
from frontend.views.wizard_instructions import InstructionsExamplesForm

from .test_dashboard import wizard_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    client.force_login(get_user_model().objects.create_user("boss", is_staff=True))
    return client


def test_the_wizard_refuses_an_unknown_field_on_the_form(staff, dataset, annotators):
    data = wizard_post(dataset=dataset.pk, golden_tps="3")

    response = staff.post(reverse("frontend:batch-new"), data)

    assert response.status_code == 400
    errors = response.context["form"].non_field_errors()
    assert errors == [
        "This form has no field 'golden_tps': nothing was done. Reload the page and try again."
    ]
    assert "This form has no field &#x27;golden_tps&#x27;" in response.content.decode()
    assert not Batch.objects.exists()


def test_every_input_of_the_wizard_page_is_a_field_it_knows(staff, dataset, annotators):
    html = staff.get(reverse("frontend:batch-new")).content.decode()
    posted = set(re.findall(r'<(?:input|select|textarea|button)[^>]*\bname="([^"]+)"', html))

    known = {"csrfmiddlewaretoken", *BatchWizardForm.base_fields}
    known |= set(form_field_names(InstructionsExamplesForm()))
    assert {"csrfmiddlewaretoken", "name", "examples-yes_image"} <= posted
    assert posted <= known, posted - known


def test_the_wizard_takes_the_csrf_token_and_the_examples_rows(dataset, annotators):
    examples = InstructionsExamplesForm()
    data = wizard_post(dataset=dataset.pk, csrfmiddlewaretoken="token")
    data |= {name: "" for name in form_field_names(examples)}

    form = BatchWizardForm(data, also_known=form_field_names(examples))

    assert form.is_valid(), form.errors


def test_the_plan_panel_names_an_unknown_parameter(staff, dataset, annotators):
    params = wizard_post(dataset=dataset.pk, csrfmiddlewaretoken="token", colour="red")
    params["examples-yes_note"] = ""  # wizard.js sends the examples' rows too

    response = staff.get(reverse("frontend:batch-plan-preview"), params)

    assert response.status_code == 400
    assert "This form has no field &#x27;colour&#x27;" in response.content.decode()


def test_the_dataset_upload_refuses_an_unknown_field(staff, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    captions = SimpleUploadedFile("captions.tsv", b"caption_id\timage_id\tfile_name\tcaption\n")
    data = {"name": "fresh", "format": "tsv", "captions": captions, "labelz": "x"}

    response = staff.post(reverse("frontend:dataset-upload"), data)

    assert response.status_code == 400
    assert "This form has no field &#x27;labelz&#x27;" in response.content.decode()
    assert not ImportJob.objects.exists()
