"""An admin uploads a dataset, creates a batch in the wizard, watches it run, downloads it.

How the pipeline runs during this test, and why:

- With the services (PostgreSQL through DATABASE_URL, and Redis; CI demands them with
  REQUIRE_SERVICES=1), a real `celery worker` process runs the import, the automatic stages
  and the simulated crowd against the test database, as `tests/test_celery_worker.py` does.
  The pages answer at once and poll while the worker works, so the test sees the bars move
  (at least one state before "released", on the same page, without a reload).
- Without them, Celery is eager: each task runs inside the request that queued it (the
  upload, the wizard's submit), so the import page and the batch page open on finished
  work. The test then checks what a person sees on a batch that ran fast: every stage's
  bar drawn to its end, the state "released", and the page no longer polling.

Either way the same pages, scripts and services run; only the moment the work happens
differs. Screenshots of each page go to var/screenshots/.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Batch, Dataset, ImportJob, Release
from mitl.costs import candidates_at_most, hits_for, mturk_cost
from mitl.synthetic.files import write
from mitl.synthetic.generation import generate
from pipeline.annotators import annotator_create
from tests.conftest import services_available

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "a long admin password"
N_IMAGES = 30
PIPELINE_TIMEOUT_MS = 180_000
STAGES = ("retrieving", "pooling", "building", "annotating", "aggregating")
ESTIMATE_OUTPUTS = (
    *("est-queries", "est-candidates", "est-hits", "est-assignments", "est-judgements"),
    *("est-rate", "est-rewards", "est-commission", "est-total"),
)


# --- how tasks run -------------------------------------------------------------------------


@pytest.fixture
def runner(request, settings, tmp_path: Path) -> str:
    """Start a real Celery worker when the services answer ("worker"), else stay "eager"."""
    settings.VAR_DIR = tmp_path / "var"  # import jobs stage their uploads there
    available, reason = services_available()
    if not available:
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail(f"REQUIRE_SERVICES=1 but the services are missing: {reason}")
        return "eager"
    request.getfixturevalue("celery_worker_process")
    return "worker"


@pytest.fixture
def celery_worker_process(settings, tmp_path: Path) -> Iterator[subprocess.Popen]:
    """Point this process's Celery app at Redis on a queue of its own and start a worker."""
    from config.celery import app
    from tests.test_celery_worker import _forget_broker_state

    broker_url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    queue = f"test-{uuid.uuid4().hex[:8]}"
    overrides = {
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_ALWAYS_EAGER": False,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
    }
    saved = {key: app.conf[key] for key in overrides}
    app.conf.update(overrides)
    _forget_broker_state(app)
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "CELERY_BROKER_URL": broker_url,
        "CELERY_QUEUE": queue,
        "MITL_VAR_DIR": str(settings.VAR_DIR),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "RELEASES_DIR": str(settings.RELEASES_DIR),
        "PYTHONUNBUFFERED": "1",
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "config", "worker"),
                *("--pool", "solo", "--queues", queue, "--loglevel", "info"),
                *("--without-gossip", "--without-mingle"),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
            app.conf.update(saved)
            _forget_broker_state(app)


# --- data ----------------------------------------------------------------------------------


@pytest.fixture
def upload_files(tmp_path: Path) -> tuple[Path, Path]:
    """A small synthetic dataset as an admin would upload it: captions TSV and images zip."""
    folder = tmp_path / "shapes"
    write(generate(n_images=N_IMAGES, seed=11), folder)
    archive = tmp_path / "shapes-images.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for image in sorted((folder / "images").iterdir()):
            out.write(image, image.name)
    return folder / "captions.tsv", archive


@pytest.fixture
def admin_user(db):
    for name, config in (("tfidf", {}), ("bow-plain", {"stop_words": False})):
        annotator_create(name=name, kind="bow", config=config)
    return get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)


# --- helpers -------------------------------------------------------------------------------


def log_in(page) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")


def expected_estimate(
    *, queries: int, k: int, annotators: int, hit_size: int, per_hit: int, reward: str
) -> dict[str, str]:
    """What the wizard must show, from mitl/costs.py (one golden pair of each kind)."""
    candidates = candidates_at_most(queries=queries, k=k, annotators=annotators)
    cost = mturk_cost(
        hits=hits_for(candidates, hit_size),
        assignments_per_hit=per_hit,
        items_per_hit=hit_size + 2,
        reward_per_assignment=Decimal(reward),
    )
    return {
        "est-queries": f"{queries:,}",
        "est-candidates": f"{candidates:,}",
        "est-hits": f"{cost.hits:,}",
        "est-assignments": f"{cost.assignments:,}",
        "est-judgements": f"{cost.judgements:,}",
        "est-rate": f"{cost.commission_rate * 100:.0f}%",
        "est-rewards": f"${cost.rewards:,.2f}",
        "est-commission": f"${cost.commission:,.2f}",
        "est-total": f"${cost.total:,.2f}",
    }


def shown_estimate(page) -> dict[str, str]:
    return {key: page.locator(f"#{key}").text_content() for key in ESTIMATE_OUTPUTS}


def fill_numbers(page, values: dict[str, str]) -> None:
    for label, value in values.items():
        page.get_by_label(label, exact=True).fill(value)


def watch_states(page, until: str, timeout_s: float) -> list[str]:
    """Read the page's state while progress.js updates it; return the states seen, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = page.locator("#live-state").text_content().strip()
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == until:
            return seen
        page.wait_for_timeout(100)
    pytest.fail(f"the page still shows {seen[-1]!r} after {timeout_s} s (seen: {seen})")


# --- the test ------------------------------------------------------------------------------


def test_an_admin_goes_from_upload_to_release_download(
    new_page, admin_user, runner, upload_files, screenshots_dir
):
    from playwright.sync_api import expect

    captions_tsv, images_zip = upload_files
    page = new_page()
    log_in(page)

    # 1. Upload the dataset; the import page follows the job until it is done.
    page.goto("/dashboard/")
    page.get_by_role("link", name="Upload a dataset").first.click()
    page.get_by_label("Name", exact=True).fill("shapes")
    page.get_by_label("Captions file", exact=True).set_input_files(captions_tsv)
    page.get_by_label("Images (zip)", exact=True).set_input_files(images_zip)
    page.screenshot(path=screenshots_dir / "dataset_upload.png", full_page=True)
    with page.expect_navigation(url="**/imports/*/", timeout=PIPELINE_TIMEOUT_MS):
        page.get_by_role("button", name="Upload and import").click()
    import_states = watch_states(page, "done", timeout_s=120)
    assert "failed" not in import_states
    expect(page.locator("[data-stage=importing] .count")).to_have_text(f"{N_IMAGES}/{N_IMAGES}")
    job = ImportJob.objects.get()
    assert job.status == "done" and job.error == ""

    # 2. The dataset page shows its statistics.
    page.get_by_role("link", name="Open the dataset").click()
    page.wait_for_url("**/datasets/*/")
    stats = dict(
        page.eval_on_selector_all(
            "#dataset-stats div",
            "items => items.map(d => [d.querySelector('dt').textContent, "
            "d.querySelector('dd').textContent.trim()])",
        )
    )
    assert stats == {
        "Images": f"{N_IMAGES}",
        "Captions": f"{N_IMAGES * 5}",
        "Invalid captions": "0",
        "Positive sets": "1",
    }
    cells = page.locator("#positive-sets tbody tr").first.locator("td")
    expect(cells.nth(0)).to_have_text("original")
    expect(cells.nth(2)).to_have_text(f"{N_IMAGES * 5}")  # one pair per caption
    dataset = Dataset.objects.get(name="shapes")
    assert dataset.images.filter(file="").count() == 0  # every image came from the zip

    # 3. The wizard estimates as the admin types, with the formulas of mitl/costs.py.
    page.get_by_role("link", name="New batch on shapes").click()
    page.wait_for_url("**/batches/new/?dataset=*")
    expect(page.get_by_label("Dataset", exact=True)).to_have_value(str(dataset.pk))
    page.get_by_label("Name", exact=True).fill("shapes round 1")
    page.get_by_label("tfidf (bow v1)").check()
    page.get_by_label("bow-plain (bow v1)").check()
    page.locator("summary", has_text="More settings").click()
    numbers = {
        "Image queries": "6",
        "Caption queries": "6",
        "k": "3",  # candidates per query and annotator
        "Pairs to judge per HIT": "8",
        "Golden positives per HIT": "1",
        "Golden negatives per HIT": "1",
        "Golden negative depth": "10",
    }
    fill_numbers(page, numbers)
    for per_hit, reward in (("10", "0.12"), ("2", "0.01"), ("3", "1234.56"), ("2", "0.12")):
        fill_numbers(page, {"Assignments per HIT": per_hit, "Reward per assignment ($)": reward})
        expected = expected_estimate(
            queries=12, k=3, annotators=2, hit_size=8, per_hit=int(per_hit), reward=reward
        )
        assert shown_estimate(page) == expected, (per_hit, reward)
    assert expected["est-total"] == "$2.52" and expected["est-hits"] == "9"
    page.get_by_label("Use these queries", exact=True).check()  # a list counts its ids once
    page.get_by_label("Image ids", exact=True).fill("1 2, 2\n3")
    expect(page.locator("#est-queries")).to_have_text("3")
    expect(page.get_by_label("Image queries", exact=True)).to_be_hidden()
    page.get_by_label("Sample queries at random", exact=True).check()
    expect(page.locator("#est-queries")).to_have_text("12")
    # Adaptive: the estimate is what the budget pays for, 200 // (10 pairs x 2 workers).
    expect(page.get_by_label("Budget (judgements)", exact=True)).to_be_hidden()
    page.get_by_label("Adaptive: rounds until the budget is spent", exact=True).check()
    page.get_by_label("Budget (judgements)", exact=True).fill("200")
    expect(page.locator("#est-hits")).to_have_text("10")
    expect(page.locator("#est-judgements")).to_have_text("200")
    # The plan panel: what this config buys under each strategy, drawn by the server.
    page.get_by_role("button", name="Predict what it buys").click()
    expect(page.locator("#plan-preview")).to_contain_text("adaptive")
    expect(page.locator("#plan-panel svg")).to_be_visible()
    page.screenshot(path=screenshots_dir / "batch_wizard_plan.png", full_page=True)
    page.get_by_label("Fixed: every annotator's top k, judged once", exact=True).check()
    expect(page.locator("#est-hits")).to_have_text("9")
    page.get_by_label("Simulated crowd (demos and tests)", exact=True).check()
    page.screenshot(path=screenshots_dir / "batch_wizard.png", full_page=True)
    with page.expect_navigation(url="**/batches/*/", timeout=PIPELINE_TIMEOUT_MS):
        page.get_by_role("button", name="Create and start the batch").click()

    # 4. The batch page draws one bar per stage and follows the batch to its release.
    batch = Batch.objects.get()
    expect(page.locator(".messages")).to_contain_text(
        f"Batch {batch.pk} started: at most 9 HITs, 180 judgements, $2.52 on MTurk."
    )
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    states = watch_states(page, "released", timeout_s=PIPELINE_TIMEOUT_MS / 1000)
    assert page.evaluate("window.loadedOnce === true")
    if runner == "worker":
        assert len(states) >= 2, states  # the bars moved on this page while the worker ran
    expect(page.locator("#live-progress")).to_have_attribute("data-live", "stopped")
    for stage in STAGES:
        bar = page.locator(f"[data-stage={stage}] progress")
        done, total = page.locator(f"[data-stage={stage}] .count").text_content().split("/")
        assert int(total) > 0 and done == total, stage
        assert bar.evaluate("b => b.value === b.max"), stage
    expect(page.locator("#live-error")).to_be_hidden()
    page.screenshot(path=screenshots_dir / "batch_progress.png", full_page=True)
    # What the server drew for the state at load says so, and a reload brings it up to date.
    if states[0] != "released":
        expect(page.locator("#live-stale")).to_be_visible()
        with page.expect_navigation():
            page.locator("#live-stale a").click()
        expect(page.locator("#live-stale")).to_be_hidden()
        expect(page.locator("#live-progress")).to_contain_text("simulated crowd (done)")
    batch.refresh_from_db()
    assert batch.state == "released" and batch.reports["simulated_crowd"]["status"] == "done"

    # 5. Releases: download the zip; it holds the ECCV Caption files.
    page.get_by_role("link", name="download it from the releases").click()
    page.wait_for_url("**/releases/")
    release = Release.objects.get(batches=batch)
    expect(page.locator("#releases")).to_contain_text(f"{release.name} v{release.version}")
    page.screenshot(path=screenshots_dir / "releases.png", full_page=True)
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download zip").click()
    download = download_info.value
    assert download.suggested_filename == f"shapes-v{release.version}.zip"
    with zipfile.ZipFile(download.path()) as archive:
        names = archive.namelist()
    assert f"shapes-v{release.version}/image_to_caption.json" in names
    assert f"shapes-v{release.version}/caption_to_image.json" in names

    # 6. The dashboard sums it up.
    page.get_by_role("link", name="Dashboard").first.click()
    expect(page.locator(f"#dataset-{dataset.pk}")).to_contain_text("shapes")
    expect(page.locator("#batches")).to_contain_text("released")
    page.screenshot(path=screenshots_dir / "dashboard.png", full_page=True)
    (screenshots_dir / "dashboard_run.json").write_text(
        json.dumps({"runner": runner, "import_states": import_states, "batch_states": states})
    )
