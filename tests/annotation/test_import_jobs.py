"""Import jobs: a request is checked and staged at once, the job runs once (on commit, as a
Celery task), reports progress, ends done or failed, and leaves no staged upload behind."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image as PILImage

from annotation.errors import ServiceError
from annotation.imports.datasets import dataset_import_tsv
from annotation.imports.jobs import import_job_create, import_job_run
from annotation.imports.requests import ImportRequestError
from annotation.imports.staging import import_staging_dir
from annotation.job_progress import ProgressWriter
from annotation.models import Caption, Dataset, Image, ImportJob, PositiveSet
from annotation.tasks import import_job_submit, run_import

pytestmark = pytest.mark.django_db

HEADER = "caption_id\timage_id\tfile_name\tcaption"
ROWS = [
    "11\t1\ta.png\tA red square.",
    "12\t1\ta.png\tSomething red.",
    "21\t2\tsub/b.png\tA blue square.",
    "31\t3\tc.png\tA green square.",
]
COLORS = {"a.png": "red", "sub/b.png": "blue", "c.png": "green"}


def png_bytes(color: str, size: int = 8) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (size, size), color).save(out, format="PNG")
    return out.getvalue()


def zip_bytes(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def tsv_upload(rows: list[str] = ROWS, name: str = "captions.tsv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, ("\n".join([HEADER, *rows]) + "\n").encode())


def images_upload(entries: dict[str, bytes] | None = None) -> SimpleUploadedFile:
    entries = entries if entries is not None else {n: png_bytes(c) for n, c in COLORS.items()}
    return SimpleUploadedFile("images.zip", zip_bytes(entries), content_type="application/zip")


@pytest.fixture(autouse=True)
def _isolated_var(settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path / "var"


def staged_jobs() -> list[Path]:
    root = Path(django_settings.VAR_DIR) / "imports"
    return sorted(root.iterdir()) if root.exists() else []


def media_files() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def assert_nothing_left() -> None:
    assert Dataset.objects.count() == 0
    assert Image.objects.count() == 0
    assert Caption.objects.count() == 0
    assert PositiveSet.objects.count() == 0
    assert media_files() == []
    assert staged_jobs() == []


# --- a good dataset import --------------------------------------------------------------------


def test_job_is_staged_then_queued_on_commit_and_runs_to_done(
    django_capture_on_commit_callbacks, eager_celery
):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        job = import_job_submit(
            kind="dataset",
            params={"name": "tiny", "description": "three squares"},
            uploads={"captions": tsv_upload(), "images": images_upload()},
        )

    assert (job.status, job.done, job.total) == ("queued", 0, 0)
    assert job.params["files"] == {
        "captions": "captions/captions.tsv",
        "images": "images/images.zip",
    }
    assert (import_staging_dir(job.pk) / "images" / "images.zip").is_file()
    assert Dataset.objects.count() == 0  # nothing is imported before the task runs
    assert len(queued) == 1

    queued[0]()  # what happens on commit: the Celery task, eager here
    job.refresh_from_db()

    assert (job.status, job.done, job.total, job.error) == ("done", 3, 3, "")
    assert job.dataset.name == "tiny" and job.finished_at is not None
    assert job.dataset.description == "three squares"
    assert job.dataset.meta["import"] == {"job": job.pk, "format": "tsv", "images": "images.zip"}
    assert sorted(job.dataset.images.values_list("file_name", flat=True)) == [
        "a.png",
        "c.png",
        "sub/b.png",
    ]
    assert len(media_files()) == 3
    assert staged_jobs() == []  # the uploads are removed once the job has run


def test_job_that_is_done_is_not_run_again():
    job = import_job_create(
        kind="dataset", params={"name": "tiny"}, uploads={"captions": tsv_upload()}
    )
    assert import_job_run(job_id=job.pk).status == "done"
    finished = ImportJob.objects.get(pk=job.pk).finished_at

    assert run_import.delay(job.pk).get() == "done"  # a second delivery of the task

    again = ImportJob.objects.get(pk=job.pk)
    assert (again.status, again.finished_at) == ("done", finished)
    assert Dataset.objects.count() == 1


def test_local_paths_are_staged_as_copies(tmp_path):
    captions = tmp_path / "mine.tsv"
    captions.write_text("\n".join([HEADER, *ROWS]) + "\n")
    job = import_job_create(kind="dataset", params={"name": "tiny"}, uploads={"captions": captions})

    staged = import_staging_dir(job.pk) / job.params["files"]["captions"]
    assert staged != captions and staged.read_bytes() == captions.read_bytes()
    assert import_job_run(job_id=job.pk).status == "done"
    assert captions.exists() and not staged.exists()


# --- a job that fails while running ----------------------------------------------------------


def test_job_failing_while_running_records_the_error_and_leaves_nothing_behind():
    # The header of c.png is sound (the request's cheap check passes), its end is cut off:
    # the job stores a.png and b.png, then the full check of c.png fails.
    images = {n: png_bytes(c) for n, c in COLORS.items()}
    images["c.png"] = png_bytes("green", size=64)[:-20]
    job = import_job_create(
        kind="dataset",
        params={"name": "tiny"},
        uploads={"captions": tsv_upload(), "images": images_upload(images)},
    )

    job = import_job_run(job_id=job.pk)

    assert job.status == "failed"
    assert job.error.startswith("images.zip: entry 'c.png': not a readable image")
    assert "imports" not in job.error  # never the staging folder
    assert job.finished_at is not None and job.dataset is None
    assert_nothing_left()
    assert import_job_run(job_id=job.pk).status == "failed"  # and it stays failed


def test_job_whose_uploads_are_gone_fails_clearly():
    job = import_job_create(
        kind="dataset", params={"name": "tiny"}, uploads={"captions": tsv_upload()}
    )
    (import_staging_dir(job.pk) / "captions" / "captions.tsv").unlink()

    job = import_job_run(job_id=job.pk)

    assert job.status == "failed"
    assert job.error == f"the uploaded captions file is gone from {job.pk}; upload it again"


# --- refused requests: nothing is created ---------------------------------------------------


BAD_REQUESTS = {
    "unknown kind": ("labels", {"name": "x"}, {}, "kind", "kind must be one of dataset, positives"),
    "name that is not a slug": ("dataset", {"name": "my data"}, {}, "name", "name must be 1-100"),
    "unknown format": ("dataset", {"name": "x", "format": "csv"}, {}, "format", "format must be"),
    "split with a tsv": (
        "dataset",
        {"name": "x", "split": "test"},
        {},
        "split",
        "karpathy format only",
    ),
    "no captions": ("dataset", {"name": "x"}, {"captions": None}, "captions", "is required"),
    "zip and s3 at once": (
        "dataset",
        {"name": "x", "images_s3": "s3://bucket/p"},
        {"images": True},
        "images_s3",
        "either an images zip or images_s3",
    ),
    "malformed s3 location": (
        "dataset",
        {"name": "x", "images_s3": "bucket/prefix"},
        {},
        "images_s3",
        "not an S3 location",
    ),
    "unknown parameter": ("dataset", {"name": "x", "colour": "red"}, {}, "colour", "unknown"),
    "unknown upload": ("dataset", {"name": "x"}, {"notes": True}, "notes", "unknown file"),
    "images that are not a zip": (
        "dataset",
        {"name": "x"},
        {"images": SimpleUploadedFile("images.zip", b"plain text")},
        "images",
        "images.zip: the images upload must be a zip file",
    ),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request_is_refused_naming_the_field_and_creates_nothing(case):
    kind, params, extra, field, message = BAD_REQUESTS[case]
    uploads = {"captions": tsv_upload()}
    for key, value in extra.items():
        if value is None:
            uploads.pop(key)
        else:
            uploads[key] = images_upload() if value is True else value

    with pytest.raises(ImportRequestError) as info:
        import_job_create(kind=kind, params=params, uploads=uploads)

    assert info.value.field == field
    assert message in str(info.value)
    assert info.value.errors == {field: [str(info.value)]}
    assert ImportJob.objects.count() == 0
    assert_nothing_left()


def test_bad_captions_line_is_refused_naming_the_uploaded_file_line_and_field():
    rows = [*ROWS, "12\t3\tc.png\tA repeated caption id."]
    with pytest.raises(ImportRequestError) as info:
        import_job_create(
            kind="dataset",
            params={"name": "tiny"},
            uploads={"captions": tsv_upload(rows, name="my captions.tsv")},
        )
    assert info.value.field == "captions"
    assert str(info.value) == "my_captions.tsv:6: caption_id 12 repeats line 3"
    assert ImportJob.objects.count() == 0
    assert_nothing_left()


def test_taken_dataset_name_is_refused_and_the_existing_one_kept(tmp_path):
    (tmp_path / "c.tsv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    existing = dataset_import_tsv(name="tiny", captions_path=tmp_path / "c.tsv")
    with pytest.raises(ImportRequestError, match="dataset 'tiny' already exists") as info:
        import_job_create(
            kind="dataset", params={"name": "tiny"}, uploads={"captions": tsv_upload()}
        )
    assert info.value.field == "name"
    assert list(Dataset.objects.all()) == [existing]
    assert isinstance(info.value, ServiceError)  # callers that catch ServiceError see it too


# --- positive sets ----------------------------------------------------------------------------


@pytest.fixture
def tiny(tmp_path) -> Dataset:
    (tmp_path / "c.tsv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    return dataset_import_tsv(name="tiny", captions_path=tmp_path / "c.tsv")


def eccv_uploads(i2t: dict, t2i: dict) -> dict[str, SimpleUploadedFile]:
    return {
        "i2t": SimpleUploadedFile("image_to_caption.json", json.dumps(i2t).encode()),
        "t2i": SimpleUploadedFile("caption_to_image.json", json.dumps(t2i).encode()),
    }


def test_eccv_positives_job_creates_the_set(tiny):
    job = import_job_create(
        kind="positives",
        params={"dataset": "tiny", "label": "eccv"},
        uploads=eccv_uploads({"1": [11, 21]}, {"31": [3, 1]}),
    )
    assert PositiveSet.objects.filter(name="eccv").count() == 0  # the check rolled back

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.dataset, job.done, job.total) == ("done", tiny, 1, 1)
    pairs = PositiveSet.objects.get(name="eccv").pairs.values_list(
        "image__ext_id", "caption__ext_id"
    )
    assert sorted(pairs) == [(1, 11), (1, 21), (1, 31), (3, 31)]
    assert staged_jobs() == []


def test_cxc_row_naming_an_unknown_caption_is_refused_at_once_with_its_line(tiny):
    sits = (
        "caption,image,agg_score,sampling_method\n"
        "COCO_val2014:sentid:11,COCO_val2014_000000000002.jpg,4.0,c2i_intrasim\n"
        "COCO_val2014:sentid:99,COCO_val2014_000000000001.jpg,4.0,c2i_intrasim\n"
    )
    with pytest.raises(ImportRequestError) as info:
        import_job_create(
            kind="positives",
            params={"dataset": "tiny", "label": "cxc", "min_score": 3.5},
            uploads={"cxc": SimpleUploadedFile("sits_test.csv", sits.encode())},
        )
    assert info.value.field == "cxc"
    assert str(info.value).startswith("sits_test.csv:3: field caption: caption id 99 is not in")
    assert list(tiny.positive_sets.values_list("name", flat=True)) == ["original"]
    assert ImportJob.objects.count() == 0 and staged_jobs() == []


@pytest.mark.parametrize(
    ("params", "uploads", "field", "message"),
    [
        ({"dataset": "nope", "label": "x"}, "eccv", "dataset", "no dataset named 'nope'"),
        ({"dataset": "tiny", "label": "original"}, "eccv", "label", "already has a positive set"),
        ({"dataset": "tiny", "label": "x", "min_score": 2}, "eccv", "min_score", "cxc file only"),
        ({"dataset": "tiny", "label": "x"}, "i2t only", "t2i", "needs both i2t and t2i"),
        ({"dataset": "tiny", "label": "x"}, "none", "i2t", "either i2t and t2i"),
    ],
)
def test_bad_positives_request_is_refused(tiny, params, uploads, field, message):
    files = {
        "eccv": eccv_uploads({"1": [11]}, {}),
        "i2t only": {"i2t": eccv_uploads({"1": [11]}, {})["i2t"]},
        "none": {},
    }[uploads]
    with pytest.raises(ImportRequestError, match=message) as info:
        import_job_create(kind="positives", params=params, uploads=files)
    assert info.value.field == field
    assert ImportJob.objects.count() == 0 and staged_jobs() == []


# --- progress ---------------------------------------------------------------------------------


def test_progress_is_written_at_most_every_interval_and_always_at_the_end(tiny):
    job = ImportJob.objects.create(kind="dataset", params={})
    now = [0.0]
    progress = ProgressWriter(ImportJob, job.pk, interval=0.25, clock=lambda: now[0])
    seen = []
    for done in range(1, 101):  # 100 images, 10 ms apart: one second in all
        now[0] = done * 0.01
        progress(done, 100)
        seen.append(ImportJob.objects.values_list("done", flat=True).get(pk=job.pk))

    assert progress.writes == 5  # at 0.01, 0.26, 0.51, 0.76 s and the last image
    assert sorted(set(seen)) == [1, 26, 51, 76, 100]
    assert ImportJob.objects.values_list("done", "total").get(pk=job.pk) == (100, 100)


# --- a text-only dataset and image-based annotators ---------------------------------------------


def test_text_only_import_works_and_a_labels_annotator_batch_then_fails_clearly(
    synthetic_files, small_config
):
    from pipeline.annotators import annotator_create
    from pipeline.stages import batch_create, batch_run_until

    captions = SimpleUploadedFile("captions.tsv", (synthetic_files / "captions.tsv").read_bytes())
    job = import_job_create(kind="dataset", params={"name": "text"}, uploads={"captions": captions})
    job = import_job_run(job_id=job.pk)
    assert job.status == "done"
    assert set(job.dataset.images.values_list("file", flat=True)) == {""}  # text only

    annotator_create(name="labels", kind="object_labels", config={})
    batch = batch_create(
        dataset=job.dataset, name="b", raw_config={**small_config, "annotators": ["labels"]}
    )
    with pytest.raises(Exception, match="dataset has no object labels"):
        batch_run_until(batch_id=batch.pk, until="annotating")
    batch.refresh_from_db()
    assert batch.state == "retrieving"
    assert "object_labels annotator 'labels': dataset has no object labels" in batch.error
