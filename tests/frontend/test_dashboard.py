"""The admin dashboard: staff only; dataset statistics, upload, batch wizard, releases."""

from __future__ import annotations

import io
import zipfile
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import (
    Batch,
    BatchState,
    Caption,
    Dataset,
    ImportJob,
    ImportStatus,
    InvalidReason,
    Query,
    Ranking,
    Release,
)
from mitl.costs import candidates_at_most, hits_for, mturk_cost
from pipeline.autopilot import REPORT_KEY

pytestmark = pytest.mark.django_db
# Starting a batch or an import queues Celery tasks on commit; with no broker they run then,
# inside the request, as in the embedded default.
ON_COMMIT = pytest.mark.django_db(transaction=True)

STAFF_PAGES = [
    ("frontend:dashboard", False),
    ("frontend:datasets", False),
    ("frontend:dataset-upload", False),
    ("frontend:batch-new", False),
    ("frontend:releases", False),
    ("frontend:dataset", True),
]


@pytest.fixture(autouse=True)
def _own_var_dir(settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path / "var"  # import jobs stage their uploads there


@pytest.fixture
def staff(client):
    client.force_login(get_user_model().objects.create_user("boss", is_staff=True))
    return client


def page_url(name: str, needs_dataset: bool, dataset: Dataset) -> str:
    return reverse(name, args=[dataset.pk]) if needs_dataset else reverse(name)


def wizard_post(**overrides) -> dict:
    """A good wizard submission on the small dataset with the two bow annotators."""
    data = {
        "name": "round 1",
        "annotators": ["tfidf", "bow-plain"],
        "query_mode": "sample",
        "n_image_queries": "8",
        "n_caption_queries": "8",
        "image_ids": "",
        "caption_ids": "",
        "k": "3",
        "hit_size": "8",
        "golden_tp": "1",
        "golden_tn": "1",
        "assignments_per_hit": "2",
        "reward": "0.12",
        "golden_negative_depth": "10",
        "aggregation": "eccv",
        "golden_policy": "approve_or_flag",
        "seed": "1",
    }
    data.update(overrides)
    return data


# --- who may open the pages --------------------------------------------------------------


@pytest.mark.parametrize(("name", "needs_dataset"), STAFF_PAGES)
def test_anonymous_visitors_are_sent_to_log_in(client, dataset, name, needs_dataset):
    url = page_url(name, needs_dataset, dataset)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize(("name", "needs_dataset"), STAFF_PAGES)
def test_annotators_are_refused(client, dataset, name, needs_dataset):
    client.force_login(get_user_model().objects.create_user("ann"))
    assert client.get(page_url(name, needs_dataset, dataset)).status_code == 403


@pytest.mark.parametrize(("name", "needs_dataset"), STAFF_PAGES)
def test_staff_open_every_page(staff, dataset, annotators, name, needs_dataset):
    response = staff.get(page_url(name, needs_dataset, dataset))
    assert response.status_code == 200
    assert 'class="site"' in response.content.decode()  # inside the shared layout


def test_the_import_job_pages_are_staff_only(client, staff):
    job = ImportJob.objects.create(kind="dataset", params={"name": "x"})
    for url in (
        reverse("frontend:import-job", args=[job.pk]),
        reverse("frontend:import-job-status", args=[job.pk]),
    ):
        assert staff.get(url).status_code == 200
    staff.logout()
    client.force_login(get_user_model().objects.create_user("ann"))
    assert client.get(reverse("frontend:import-job-status", args=[job.pk])).status_code == 403


def test_the_main_navigation_links_the_dashboard_for_staff_only(client, staff):
    assert reverse("frontend:dashboard") in staff.get(reverse("frontend:work")).content.decode()
    staff.logout()
    client.force_login(get_user_model().objects.create_user("ann"))
    assert (
        reverse("frontend:dashboard") not in client.get(reverse("frontend:work")).content.decode()
    )


# --- datasets ----------------------------------------------------------------------------


def test_datasets_show_images_captions_invalid_captions_and_positive_sets(staff, dataset):
    Caption.objects.filter(pk=dataset.captions.order_by("pk").first().pk).update(
        is_invalid=True, invalid_reason=InvalidReason.MEANINGLESS
    )
    pairs = dataset.positive_sets.get(name="original").pairs.count()

    html = staff.get(reverse("frontend:datasets")).content.decode()

    row = html.split(f'id="dataset-{dataset.pk}"', 1)[1].split("</tr>", 1)[0]
    cells = [cell.split(">", 1)[1] for cell in row.split("<td")[1:]]
    assert cells[1].startswith(f"{dataset.images.count()}<")
    assert cells[2].startswith(f"{dataset.captions.count()}<")
    assert cells[3].startswith("1<")
    assert f'original <span class="muted">({pairs})</span>' in cells[4]
    assert dataset.images.count() == 40 and pairs == 200  # 5 captions per image


def test_the_dataset_page_lists_its_positive_sets_with_pair_counts(staff, dataset):
    html = staff.get(reverse("frontend:dataset", args=[dataset.pk])).content.decode()
    table = html.split('id="positive-sets"', 1)[1].split("</table>", 1)[0]
    assert "<td>original</td>" in table
    assert '<td class="num">200</td>' in table


def test_the_dashboard_links_quality_control_bias_and_releases(staff, batch):
    release = Release.objects.create(
        dataset=batch.dataset, name="small", version=1, rule="eccv", path="/nowhere", manifest={}
    )
    release.batches.add(batch)

    html = staff.get(reverse("frontend:dashboard")).content.decode()

    for url in (
        reverse("frontend:workers"),
        reverse("frontend:review"),
        reverse("frontend:invalid-captions"),
        reverse("frontend:batch-bias", args=[batch.pk]),
        reverse("frontend:release-download", args=[release.pk]),
        reverse("frontend:leaderboard", args=[release.pk]),
        reverse("frontend:dataset-upload"),
        reverse("frontend:batch-new"),
    ):
        assert f'href="{url}"' in html, url


# --- upload --------------------------------------------------------------------------------


def images_zip(folder: Path) -> SimpleUploadedFile:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    return SimpleUploadedFile("images.zip", out.getvalue(), content_type="application/zip")


@ON_COMMIT
def test_an_upload_imports_the_dataset_and_shows_the_job(staff, synthetic_files):
    response = staff.post(
        reverse("frontend:dataset-upload"),
        {
            "name": "uploaded",
            "format": "tsv",
            "description": "",
            "captions": SimpleUploadedFile(
                "captions.tsv", (synthetic_files / "captions.tsv").read_bytes()
            ),
            "images": images_zip(synthetic_files / "images"),
        },
    )

    job = ImportJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("frontend:import-job", args=[job.pk])
    assert job.status == ImportStatus.DONE  # no broker: the task ran inside the request
    dataset = Dataset.objects.get(name="uploaded")
    assert dataset.images.count() == 40 and dataset.captions.count() == 200
    assert all(image.file for image in dataset.images.all())
    status = staff.get(reverse("frontend:import-job-status", args=[job.pk])).json()
    assert status == {
        "state": "done",
        "error": "",
        "progress": [{"stage": "importing", "done": 40, "total": 40, "finished": True}],
        "next_url": reverse("frontend:dataset", args=[dataset.pk]),
    }


def test_a_bad_captions_file_is_refused_on_the_form(staff):
    response = staff.post(
        reverse("frontend:dataset-upload"),
        {
            "name": "broken",
            "format": "tsv",
            "captions": SimpleUploadedFile("captions.tsv", b"id\ttext\n1\tA cat.\n"),
        },
    )

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "captions" in errors and "captions.tsv" in errors["captions"][0]
    assert not ImportJob.objects.exists() and not Dataset.objects.filter(name="broken").exists()


def test_a_failed_import_shows_its_error_and_stops_polling(staff):
    job = ImportJob.objects.create(
        kind="dataset",
        params={"name": "x", "format": "tsv"},
        status=ImportStatus.FAILED,
        error="captions.tsv:3: image_id must be an integer id, got 'abc'",
    )

    html = staff.get(reverse("frontend:import-job", args=[job.pk])).content.decode()

    assert "captions.tsv:3: image_id must be an integer id, got &#x27;abc&#x27;" in html
    assert 'data-stop-states="done failed"' in html and 'data-state="failed"' in html


# --- the batch wizard ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"k": "0"}, "k", "batch config: `k` must be between 1 and 100 (got 0)"),
        (
            {"k": "12"},
            "golden_negative_depth",
            "batch config: `golden_negative_depth` (10) must be at least `k` (12)",
        ),
        (
            {"n_image_queries": "0", "n_caption_queries": "0"},
            None,
            "batch config: ask for at least one query (n_image_queries or n_caption_queries)",
        ),
        ({"n_image_queries": "41"}, None, "has 40 images and 200 valid captions"),
        ({"reward": "0"}, "reward", "the reward must be at least $0.01 per assignment"),
        ({"reward": "abc"}, "reward", "Enter a number."),
        ({"annotators": []}, "annotators", "This field is required."),
        ({"query_mode": "list"}, "image_ids", "List at least one image id or caption id."),
        (
            {"query_mode": "list", "image_ids": "1 2 999"},
            None,
            "the dataset has no image with id 999",
        ),
        ({"query_mode": "list", "caption_ids": "1, x"}, "caption_ids", "'x' is not an id"),
    ],
)
def test_a_bad_configuration_is_shown_on_the_form_and_creates_no_batch(
    staff, dataset, annotators, overrides, field, message
):
    response = staff.post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, **overrides)
    )

    assert response.status_code == 400
    errors = response.context["form"].errors.get(field or "__all__", [])
    assert any(message in error for error in errors), response.context["form"].errors
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert not Batch.objects.exists()


@ON_COMMIT
def test_a_good_configuration_creates_and_starts_the_batch(staff, dataset, annotators):
    response = staff.post(reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk))

    batch = Batch.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("frontend:batch", args=[batch.pk])
    assert batch.name == "round 1" and batch.dataset == dataset
    assert sorted(batch.annotators.values_list("name", flat=True)) == ["bow-plain", "tfidf"]
    assert batch.config["k"] == 3 and batch.config["assignments_per_hit"] == 2
    assert batch.state == BatchState.ANNOTATING  # no broker: the automatic stages ran
    expected = mturk_cost(
        hits=hits_for(candidates_at_most(queries=16, k=3, annotators=2), 8),
        assignments_per_hit=2,
        items_per_hit=10,
        reward_per_assignment=Decimal("0.12"),
    )
    assert batch.mturk["estimate"]["hits"] == expected.hits == 12
    assert batch.mturk["estimate"]["total"] == str(expected.total) == "3.36"
    assert REPORT_KEY not in batch.reports
    followed = staff.get(response["Location"]).content.decode()
    assert f"Batch {batch.pk} started: at most 12 HITs, 240 judgements, $3.36 on MTurk." in followed


@ON_COMMIT
def test_an_explicit_query_list_becomes_the_batch_queries(staff, dataset, annotators):
    images = list(dataset.images.order_by("ext_id").values_list("ext_id", flat=True)[:3])
    caption = dataset.captions.order_by("ext_id").last().ext_id

    staff.post(
        reverse("frontend:batch-new"),
        wizard_post(
            dataset=dataset.pk,
            query_mode="list",
            image_ids=f"{images[0]}, {images[1]}\n{images[2]} {images[0]}",
            caption_ids=str(caption),
        ),
    )

    batch = Batch.objects.get()
    queries = Query.objects.filter(batch=batch)
    assert sorted(queries.filter(direction="i2t").values_list("image__ext_id", flat=True)) == images
    assert list(queries.filter(direction="t2i").values_list("caption__ext_id", flat=True)) == [
        caption
    ]
    assert (batch.config["n_image_queries"], batch.config["n_caption_queries"]) == (3, 1)
    # retrieval ranked exactly these queries, with each annotator
    assert Ranking.objects.filter(query__batch=batch).count() == 4 * 2
    assert batch.state == BatchState.ANNOTATING


@ON_COMMIT
def test_an_adaptive_batch_from_the_wizard_spends_its_budget_in_rounds(staff, dataset, annotators):
    response = staff.post(
        reverse("frontend:batch-new"),
        wizard_post(
            dataset=dataset.pk,
            strategy="adaptive",
            adjudication="bandit",
            budget_judgements="200",
            simulated_crowd="on",
        ),
    )

    batch = Batch.objects.get()
    assert response.status_code == 302
    assert batch.config["strategy"] == "adaptive" and batch.config["budget_judgements"] == 200
    # At most the HITs the budget pays for: 200 // (10 pairs x 2 workers) = 10.
    assert batch.mturk["estimate"]["hits"] == 10
    assert batch.state == BatchState.RELEASED and batch.round >= 1
    page = staff.get(reverse("frontend:batch", args=[batch.pk])).content.decode()
    assert "Strategy <strong>adaptive</strong> (bandit adjudication)" in page
    assert 'id="rounds"' in page and "of 200 judgements spent" in page
    assert 'id="recall-estimate"' in page
    # The plan of the ranked batch: a chart and one row per strategy and budget.
    assert '<div class="plan-chart"><svg' in page
    assert page.count("<td>adaptive</td>") == page.count("<td>fixed</td>") >= 5


def test_an_adaptive_batch_needs_a_budget_on_the_wizard(staff, dataset, annotators):
    response = staff.post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, strategy="adaptive")
    )
    assert response.status_code == 400
    assert "needs `budget_judgements`" in str(response.context["form"].errors)
    assert not Batch.objects.exists()


@ON_COMMIT
def test_the_simulated_crowd_takes_the_batch_to_a_release(staff, dataset, annotators):
    staff.post(reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, simulated_crowd="on"))

    batch = Batch.objects.get()
    assert batch.state == BatchState.RELEASED
    assert batch.reports[REPORT_KEY]["status"] == "done"
    assert batch.reports[REPORT_KEY]["approved"] > 0
    assert Release.objects.filter(batches=batch).exists()


def test_the_wizard_shows_the_servers_estimate_before_any_typing(staff, dataset, annotators):
    response = staff.get(reverse("frontend:batch-new"), {"dataset": dataset.pk})

    html = response.content.decode()
    # Defaults: 200 queries, k 5, no annotator ticked yet → nothing to judge.
    assert '<output id="est-queries">200</output>' in html
    assert '<output id="est-hits">0</output>' in html
    assert '<output id="est-rate">20%</output>' in html
    assert f'<option value="{dataset.pk}" selected>' in html
    assert 'value="tfidf"' in html and 'value="bow-plain"' in html


# --- the batch page ----------------------------------------------------------------------


def test_the_batch_page_polls_the_batch_api_for_staff_only(client, staff, batch):
    html = staff.get(reverse("frontend:batch", args=[batch.pk])).content.decode()
    assert f'data-progress-url="/api/batches/{batch.pk}/"' in html
    assert 'data-stop-states="released cancelled"' in html
    for stage in ("retrieving", "pooling", "building", "annotating", "aggregating"):
        assert f'data-stage="{stage}"' in html
    assert "frontend/progress.js" in html
    staff.logout()
    client.force_login(get_user_model().objects.create_user("ann"))
    response = client.get(f"/batches/{batch.pk}/")  # the page is staff only (test_access.py)
    assert response.status_code == 403
    assert "data-progress-url" not in response.content.decode()


def test_the_batch_api_gives_progress_js_what_it_reads(staff, annotating_batch):
    data = staff.get(f"/api/batches/{annotating_batch.pk}/").json()
    assert data["state"] == "annotating"
    assert {"stage", "done", "total", "finished"} <= set(data["progress"][0])
    assert [row["stage"] for row in data["progress"]][:3] == ["retrieving", "pooling", "building"]


def test_the_wizard_plans_a_config_before_retrieval(staff, client, dataset, annotators):
    url = reverse("frontend:batch-plan-preview")
    params = wizard_post(dataset=dataset.pk, strategy="adaptive", budget_judgements="300")
    del params["annotators"]

    response = staff.get(url, {**params, "annotators": ["tfidf", "bow-plain"]})

    assert response.status_code == 200
    html = response.content.decode()
    assert '<div class="plan-chart"><svg' in html
    assert "a generic prior (no earlier batch on this dataset has verdicts)" in html
    # Fixed at most: 16 queries x k 3 x 2 annotators = 96 pairs = 12 HITs; the default
    # budgets are shares of what that costs, and the batch's own budget, 300.
    assert "<td>300</td><td>adaptive</td>" in html and "<td>300</td><td>fixed</td>" in html
    assert not Batch.objects.exists()  # nothing created, nothing ranked

    refused = staff.get(url, {**params, "annotators": ["tfidf"], "budget_judgements": "0"})
    assert refused.status_code == 400
    assert "needs `budget_judgements`" in refused.content.decode()
    client.force_login(get_user_model().objects.create_user("someone", password="x"))
    assert client.get(url, params).status_code == 403


def test_the_wizard_asks_for_graded_qrels_of_chosen_proxies(staff, dataset, annotators):
    page = staff.get(reverse("frontend:batch-new"), {"dataset": dataset.pk}).content.decode()
    assert 'name="relevance"' in page and 'value="cider_d"' in page

    staff.post(reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, relevance=["bow"]))
    assert Batch.objects.get().config["relevance"] == ["bow"]

    response = staff.post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, relevance=["spice"])
    )
    assert response.status_code == 400 and Batch.objects.count() == 1  # refused, nothing made


def test_the_dashboard_reads_each_batch_in_a_few_queries(client, annotating_batch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(get_user_model().objects.create_user("lead", is_staff=True))

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("frontend:dashboard")).status_code == 200
        return len(captured)

    one = queries()
    for _ in range(4):  # four more annotating batches like the first, with the same HITs
        copy = Batch.objects.get(pk=annotating_batch.pk)
        copy.pk = None
        copy.save()
    per_batch = (queries() - one) / 4
    assert per_batch <= 8  # work, money, curation, stalls: counted together, not apart
