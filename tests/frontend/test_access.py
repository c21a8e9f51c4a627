"""Who may open which page: every frontend URL (and the account pages) for every role.

The web pages follow the API's rule (api/permissions.py): anonymous visitors nothing but
the login page and MTurk's signed pages, annotators their own work and read-only
summaries (releases), staff everything. An anonymous visitor of a protected page is sent
to log in, as `login_required` does; a logged-in account that may not see it gets a 403,
or a 404 where even its existence must not leak (another worker's assignment).

A role that must be refused gets a made-up id, as in tests/api/test_access.py: the
refusal has to come before any lookup, so a missing check shows up as a 404 or a 200
instead of the expected redirect or 403.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import get_resolver, reverse
from PIL import Image as PILImage

from annotation.handout import hit_assign_next, worker_for_user
from annotation.instructions import instructions_current
from annotation.models import (
    HIT,
    Assignment,
    Batch,
    Dataset,
    Evaluation,
    EvaluationJob,
    HITItem,
    Image,
    ImportJob,
    QualificationPair,
    Release,
)
from annotation.mturk.links import (
    hit_signature,
    image_signature,
    instructions_image_signature,
    page_image_signature,
    qualification_image_signature,
)
from annotation.qualification.attempts import qualification_attempt_open
from annotation.qualification.pairs import qualification_pairs_draw
from annotation.submissions import AnswerInput, assignment_submit
from mitl.release_files import I2T_FILE, MANIFEST_FILE, T2I_FILE, bundle_path
from tests.explain_data import evaluation_explanation

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "annotator", "staff")
Fixtures = pytest.FixtureRequest


# --- the accounts and the things the pages show ---------------------------------------------


@pytest.fixture
def annotator_user(db):
    return get_user_model().objects.create_user("ann", password="correct horse battery")


@pytest.fixture
def staff_user(db):
    return get_user_model().objects.create_user("boss", is_staff=True)


@pytest.fixture
def client_for(request):
    """Return a client of a role by name: anonymous, annotator or staff."""

    def make(role: str) -> Client:
        client = Client()
        if role != "anonymous":
            client.force_login(request.getfixturevalue(f"{role}_user"))
        return client

    return make


@pytest.fixture
def own_assignment(annotating_batch, annotator_user) -> Assignment:
    """The annotator's accepted assignment on the annotating batch."""
    assignment = hit_assign_next(worker=worker_for_user(user=annotator_user))
    assert assignment is not None
    return assignment


@pytest.fixture
def flagged_assignment(own_assignment) -> Assignment:
    """The annotator's submission with a golden pair wrong: it waits for review."""
    level = {"golden_tp": "yes", "golden_tn": "yes", "task": "yes"}
    answers = [
        AnswerInput(item_id=item.pk, level=level[item.role], elapsed_ms=900)
        for item in HITItem.objects.filter(hit=own_assignment.hit).order_by("position")
    ]
    result = assignment_submit(assignment=own_assignment, answers=answers, followups_required=True)
    assert result.assignment.flagged
    return result.assignment


@pytest.fixture
def practice_batch(annotating_batch, annotator_user) -> Batch:
    """The annotating batch with a qualification round that the annotator has started."""
    config = {**annotating_batch.config, "qualification_pairs": 4}
    Batch.objects.filter(pk=annotating_batch.pk).update(config=config)
    annotating_batch.refresh_from_db()
    assert qualification_pairs_draw(batch=annotating_batch) == 8  # 4 a try, 2 tries
    worker = worker_for_user(user=annotator_user)
    qualification_attempt_open(batch=annotating_batch, worker=worker)
    return annotating_batch


def _practice_pair(request: Fixtures) -> int:
    batch = request.getfixturevalue("practice_batch")
    return batch.qualification_attempts.get().pair_ids[0]  # a pair of the annotator's try


@pytest.fixture
def published_hit(annotating_batch) -> HIT:
    """A HIT of the annotating batch as if published on MTurk (no MTurk call needed)."""
    hit = annotating_batch.hits.order_by("index").first()
    HIT.objects.filter(pk=hit.pk).update(external_id=f"3HIT{hit.pk:026d}")
    return hit


@pytest.fixture
def qualification_pair(batch) -> QualificationPair:
    """A pair of the batch's qualification round (MTurk's test shows its image)."""
    caption = batch.dataset.captions.select_related("image").order_by("pk").first()
    return QualificationPair.objects.create(
        batch=batch, position=0, image=caption.image, caption=caption, positive=True, source="admin"
    )


@pytest.fixture
def release(tmp_path: Path) -> Release:
    """A small release with its positives and its zip (no pipeline run needed)."""
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / I2T_FILE).write_text(json.dumps({"1": [11]}))
    (folder / T2I_FILE).write_text(json.dumps({"11": [1]}))
    listed = {name: {"bytes": 1, "sha256": "0" * 64} for name in (I2T_FILE, T2I_FILE)}
    (folder / MANIFEST_FILE).write_text(json.dumps({"files": listed}))
    with zipfile.ZipFile(bundle_path(folder), "w") as bundle:
        bundle.writestr("release/README.md", "tiny")
    return Release.objects.create(
        dataset=Dataset.objects.create(name="tiny"),
        name="tiny",
        version=1,
        rule="eccv",
        path=str(folder),
        manifest={},
    )


def _pk(name: str) -> Callable[[Fixtures], Any]:
    return lambda request: request.getfixturevalue(name).pk


def _first_item(request: Fixtures) -> int:
    return request.getfixturevalue("own_assignment").hit.items.order_by("position")[0].pk


def _evaluation(request: Fixtures) -> int:
    return Evaluation.objects.create(
        release=request.getfixturevalue("release"),
        model_name="m",
        metrics={},
        rankings_sha256="0" * 64,
        explanation=evaluation_explanation(),
    ).pk


def _evaluation_job(request: Fixtures) -> int:
    """The annotator's own evaluation job: staff may follow it too."""
    return EvaluationJob.objects.create(
        release=request.getfixturevalue("release"),
        model_name="queued",
        submitted_by=request.getfixturevalue("annotator_user"),
    ).pk


def _explained_image(request: Fixtures) -> int:
    """Image 1 of the release's dataset, stored: the explanation's worst failure shows it."""
    buffer = io.BytesIO()
    PILImage.new("RGB", (4, 4), (200, 30, 30)).save(buffer, format="PNG")
    image = Image(dataset=request.getfixturevalue("release").dataset, ext_id=1)
    image.file.save("1.png", ContentFile(buffer.getvalue()), save=True)
    return image.ext_id


def _instructions(request: Fixtures) -> int:
    """The version of the annotating batch's instructions (the MTurk page links its images)."""
    return instructions_current(batch=request.getfixturevalue("published_hit").batch).pk


def _published_item(request: Fixtures) -> int:
    return request.getfixturevalue("published_hit").items.order_by("position")[0].pk


PLACEHOLDERS: dict[str, Callable[[Fixtures], Any]] = {
    "batch": _pk("batch"),
    "dataset": _pk("dataset"),
    "job": lambda request: ImportJob.objects.create(kind="dataset", params={"name": "x"}).pk,
    "assignment": _pk("own_assignment"),
    "item": _first_item,
    "review": _pk("flagged_assignment"),
    "worker": lambda request: worker_for_user(user=request.getfixturevalue("annotator_user")).pk,
    "practice_batch": _pk("practice_batch"),
    "practice_pair": _practice_pair,
    "release": _pk("release"),
    "release_file": lambda request: I2T_FILE,
    "evaluation": _evaluation,
    "evaluation_job": _evaluation_job,
    "explained_image": _explained_image,
    "hit": _pk("published_hit"),
    "hit_signature": lambda request: hit_signature(request.getfixturevalue("published_hit").pk),
    "mturk_item": _published_item,
    "number": lambda request: 1,  # a pair's number on its page
    "preview": lambda request: 0,  # the MTurk page's preview: no assignment
    "page_image_signature": lambda request: page_image_signature(
        request.getfixturevalue("published_hit").pk, 0, 1
    ),
    "image_signature": lambda request: image_signature(_published_item(request)),
    "example": lambda request: 0,  # the first worked example of the instructions
    "instructions": _instructions,
    "instructions_signature": lambda request: instructions_image_signature(
        _instructions(request), 0
    ),
    "qualification_pair": _pk("qualification_pair"),
    "qualification_image_signature": lambda request: qualification_image_signature(
        request.getfixturevalue("qualification_pair").pk
    ),
}


# --- the table ------------------------------------------------------------------------------


LOGIN = "log in"  # a 302 to the login page that comes back here (`?next=` this path)


@dataclass(frozen=True)
class Redirect:
    """A 302 to exactly this path."""

    to: str


Expected = int | str | Redirect


@dataclass(frozen=True)
class Page:
    name: str  # the URL's name, "frontend:..." or one of the account pages
    expected: tuple[Expected, Expected, Expected]  # anonymous, annotator, staff
    args: tuple[str, ...] = ()  # PLACEHOLDERS, in the URL's order
    method: str = "GET"
    data: dict[str, str] | None = None

    def __str__(self) -> str:
        return f"{self.method} {self.name}"


STAFF_ONLY = (LOGIN, 403, 200)
LOGGED_IN = (LOGIN, 200, 200)
PUBLIC = (200, 200, 200)

PAGES = [
    # The index: logged-in accounts only. Staff see datasets, batches and releases; an
    # annotator sees only the releases (test_the_index_shows_an_annotator_only_releases).
    Page("frontend:home", LOGGED_IN),
    # A batch's internals: staff only (the API's /api/batches/ rule).
    Page("frontend:batch", STAFF_ONLY, ("batch",)),
    Page("frontend:batch-bias", STAFF_ONLY, ("batch",)),
    Page("frontend:batch-instructions-new", STAFF_ONLY, ("batch",)),
    # No file given: nothing changes, back to the batch's page saying so.
    Page("frontend:batch-qualification-pairs", (LOGIN, 403, 302), ("batch",), method="POST"),
    Page("frontend:mturk-batch", STAFF_ONLY, ("batch",)),
    Page("frontend:batch-new", STAFF_ONLY),
    Page("frontend:batch-plan-preview", (LOGIN, 403, 400)),  # no config given: 400 says why
    Page("frontend:batch-instructions-proposal", (LOGIN, 403, 400)),  # no dataset: 400
    # MTurk's pages: public by design, the path is signed (or the ids must match).
    Page("frontend:mturk-hit", PUBLIC, ("hit", "hit_signature")),
    Page("frontend:mturk-image", PUBLIC, ("mturk_item", "image_signature")),
    Page(
        "frontend:mturk-page-image",
        PUBLIC,
        ("hit", "preview", "number", "page_image_signature"),
    ),
    Page(
        "frontend:mturk-instructions-image",
        PUBLIC,
        ("instructions", "example", "instructions_signature"),
    ),
    Page(
        "frontend:mturk-qualification-image",
        PUBLIC,
        ("qualification_pair", "qualification_image_signature"),
    ),
    Page("frontend:mturk-submit", (404, 404, 404), method="POST"),  # names no assignment
    # Crowd work: every account, its own assignments only (staff hold none here: 404).
    Page("frontend:work", LOGGED_IN),
    Page("frontend:work-next", (LOGIN, Redirect("/work/"), Redirect("/work/")), method="POST"),
    Page("frontend:hit", (LOGIN, 200, 404), ("assignment",)),
    Page("frontend:pair-image", LOGGED_IN, ("assignment", "number")),
    # By item id: staff only (the review page); a worker probing ids would find a golden
    # added to the HIT later.
    Page("frontend:item-image", (LOGIN, 404, 200), ("assignment", "item")),
    Page("frontend:instructions-image", LOGGED_IN, ("assignment", "example")),
    # A batch's qualification round: any account may take it (staff too, as workers); its
    # images only while taking it (the annotator here) or as staff.
    Page("frontend:qualification", LOGGED_IN, ("practice_batch",)),
    Page("frontend:qualification-image", LOGGED_IN, ("practice_batch", "practice_pair")),
    # Review and quality control: staff only.
    Page("frontend:review", STAFF_ONLY),
    Page("frontend:review-detail", STAFF_ONLY, ("review",)),
    Page(
        "frontend:review-bulk-approve",
        (LOGIN, 403, Redirect("/review/")),  # nothing ticked: back to the queue, saying so
        method="POST",
    ),
    Page("frontend:workers", STAFF_ONLY),
    Page("frontend:worker", STAFF_ONLY, ("worker",)),
    Page(
        "frontend:worker-block",
        (LOGIN, 403, Redirect("/workers/")),
        ("worker",),
        method="POST",
        data={"blocked": "1"},
    ),
    Page("frontend:invalid-captions", STAFF_ONLY),
    # Round controls (POST): staff only; an unknown action changes nothing and goes back to
    # the batch's page (a 302 to /batches/<id>/).
    Page(
        "frontend:batch-control",
        (LOGIN, 403, 302),
        ("batch",),
        method="POST",
        data={"action": "no-such-action"},
    ),
    # Releases: every account reads them (the API's /api/releases/ rule).
    Page("frontend:release", LOGGED_IN, ("release",)),
    Page("frontend:release-download", LOGGED_IN, ("release",)),
    Page("frontend:release-file", LOGGED_IN, ("release", "release_file")),
    Page("frontend:release-positives-csv", LOGGED_IN, ("release",)),
    Page("frontend:leaderboard", LOGGED_IN, ("release",)),
    Page("frontend:leaderboard-csv", LOGGED_IN, ("release",)),
    Page("frontend:leaderboard-example", LOGGED_IN, ("release",)),
    # An upload's job: the account that sent it (the annotator here) and staff.
    Page("frontend:leaderboard-job", LOGGED_IN, ("release", "evaluation_job")),
    Page("frontend:leaderboard-job-status", LOGGED_IN, ("release", "evaluation_job")),
    # An explanation shows dataset images: staff and the model's submitter only.
    Page("frontend:explain", STAFF_ONLY, ("release", "evaluation")),
    Page("frontend:explain-image", STAFF_ONLY, ("release", "evaluation", "explained_image")),
    # The admin dashboard: staff only.
    Page("frontend:dashboard", STAFF_ONLY),
    Page("frontend:releases", STAFF_ONLY),
    Page("frontend:datasets", STAFF_ONLY),
    Page("frontend:dataset-upload", STAFF_ONLY),
    Page("frontend:dataset", STAFF_ONLY, ("dataset",)),
    Page("frontend:dataset-relevance", STAFF_ONLY, ("dataset",)),
    Page("frontend:import-job", STAFF_ONLY, ("job",)),
    Page("frontend:import-job-status", STAFF_ONLY, ("job",)),
    # Accounts (config/urls.py): logging in is public; Django's own pages keep Django's rules.
    Page("login", PUBLIC),
    Page("logout", (Redirect("/accounts/login/"),) * 3, method="POST"),
    Page("password_change", LOGGED_IN),
    Page("password_change_done", LOGGED_IN),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("page", PAGES, ids=str)
def test_each_role_gets_what_it_may(page: Page, role: str, request, client_for):
    expected = page.expected[ROLES.index(role)]
    refused = expected in (LOGIN, 403)
    client = client_for(role)
    args = ["999" if refused else PLACEHOLDERS[name](request) for name in page.args]
    path = reverse(page.name, args=args)
    response = getattr(client, page.method.lower())(path, page.data or {})

    if expected == LOGIN:
        assert response.status_code == 302, response
        assert response["Location"] == f"{reverse('login')}?next={path}"
    elif isinstance(expected, Redirect):
        assert response.status_code == 302, response
        assert response["Location"] == expected.to
    else:
        assert response.status_code == expected, response


def test_the_table_covers_every_page():
    """A new page without a row in this table fails here (frontend/urls.py, accounts/)."""
    root = get_resolver().url_patterns
    frontend = next(p for p in root if getattr(p, "namespace", None) == "frontend")
    pages = {f"frontend:{pattern.name}" for pattern in frontend.url_patterns}
    for pattern in root:
        if str(pattern.pattern).startswith("accounts/"):
            inner = getattr(pattern, "url_patterns", [pattern])  # Django's include, if any
            pages |= {p.name for p in inner if p.name}
    tested = [page.name for page in PAGES]
    assert len(tested) == len(set(tested)), "a page has two rows"
    assert set(tested) == pages


# --- what the refused never see ---------------------------------------------------------------


@pytest.fixture
def failed_batch(annotating_batch) -> Batch:
    """A batch with error text and a diversity table: what only staff may read."""
    Batch.objects.filter(pk=annotating_batch.pk).update(error="retrieval exploded: secret path")
    annotating_batch.refresh_from_db()
    assert annotating_batch.reports.get("diversity")
    return annotating_batch


@pytest.mark.parametrize("role", ["anonymous", "annotator"])
def test_the_batch_page_shows_nothing_of_the_batch_to_anyone_but_staff(
    role, client_for, failed_batch
):
    path = reverse("frontend:batch", args=[failed_batch.pk])
    response = client_for(role).get(path)
    assert response.status_code == (302 if role == "anonymous" else 403)
    html = response.content.decode()
    for secret in (failed_batch.name, failed_batch.dataset.name, "secret path", "Kendall"):
        assert secret not in html
    staff = client_for("staff").get(path).content.decode()
    assert "secret path" in staff and "Kendall" in staff and failed_batch.name in staff


def test_the_index_sends_anonymous_visitors_to_log_in_showing_nothing(client_for, batch, release):
    response = client_for("anonymous").get("/")
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next=/"
    assert response.content == b""


def test_the_index_shows_an_annotator_only_releases(client_for, batch, release):
    batch.error = "retrieval exploded: secret path"
    batch.save(update_fields=["error"])
    html = client_for("annotator").get("/").content.decode()
    for secret in (batch.name, batch.dataset.name, batch.state, "secret path", "Datasets"):
        assert secret not in html
    assert reverse("frontend:release-download", args=[release.pk]) in html
    assert reverse("frontend:leaderboard", args=[release.pk]) in html
    assert reverse("frontend:batch", args=[batch.pk]) not in html
    assert release.path not in html
    assert reverse("frontend:work") in html

    staff = client_for("staff").get("/").content.decode()
    assert batch.name in staff and batch.dataset.name in staff and release.path in staff
    assert reverse("frontend:batch", args=[batch.pk]) in staff
