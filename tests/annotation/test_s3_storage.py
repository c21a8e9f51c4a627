"""S3-compatible media storage and S3 image sources, against moto's S3 server.

The server is started here on a free port and spoken to over HTTP with the real S3
protocol (boto3 and django-storages, as with MinIO in docker-compose): imports store their
images as objects, a failed import leaves no object behind, and images can be read from
an s3://bucket/prefix.
"""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from botocore.config import Config
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from moto.server import ThreadedMotoServer
from PIL import Image as PILImage

from annotation.imports.datasets import dataset_import, dataset_import_tsv
from annotation.imports.image_sources import ImageSourceError, S3ImageSource, image_source_open
from annotation.models import Caption, Dataset, Image, PositiveSet
from mitl.formats.common import ImportFileError
from pipeline.corpus import corpus_load

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """moto's S3 server in a thread of this process, on a free port."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Credentials in the environment (as in production) and a client to set buckets up."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    client = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )

    def bucket(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=name)
        return name

    def keys(name: str) -> list[str]:
        listing = client.list_objects_v2(Bucket=name)
        return sorted(item["Key"] for item in listing.get("Contents", []))

    return SimpleNamespace(endpoint=moto_endpoint, client=client, bucket=bucket, keys=keys)


@pytest.fixture
def s3_media(s3: SimpleNamespace, settings) -> str:
    """Media storage switched to a fresh bucket, as settings.py does for STORAGE_BUCKET."""
    name = s3.bucket("media")
    settings.STORAGE_ENDPOINT_URL = s3.endpoint
    settings.STORAGE_REGION = "us-east-1"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": name,
                "endpoint_url": s3.endpoint,
                "region_name": "us-east-1",
                "file_overwrite": False,
                "addressing_style": "path",
            },
        },
    }
    return name


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "input"
    (folder / "images" / "sub").mkdir(parents=True)
    (folder / "captions.tsv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    for name, color in COLORS.items():
        (folder / "images" / name).write_bytes(png_bytes(color))
    return folder


def media_files() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def assert_no_rows() -> None:
    assert Dataset.objects.count() == 0
    assert Image.objects.count() == 0
    assert Caption.objects.count() == 0
    assert PositiveSet.objects.count() == 0


# --- storing into a bucket ---------------------------------------------------------------------


@pytest.mark.django_db
def test_import_stores_every_image_as_an_object_in_the_bucket(s3, s3_media, files):
    dataset = dataset_import_tsv(
        name="tiny", captions_path=files / "captions.tsv", images_dir=files / "images"
    )

    assert s3.keys(s3_media) == ["images/tiny/a.png", "images/tiny/c.png", "images/tiny/sub/b.png"]
    for image in dataset.images.all():
        body = s3.client.get_object(Bucket=s3_media, Key=image.file.name)["Body"].read()
        assert body == (files / "images" / image.file_name).read_bytes()
        with image.file.open("rb") as handle:  # and Django reads it back through the storage
            assert handle.read() == body
    assert media_files() == []  # nothing went to the local disk


@pytest.mark.django_db
def test_annotators_read_images_from_the_bucket_through_a_local_cache(
    s3, s3_media, files, settings, tmp_path
):
    settings.VAR_DIR = tmp_path / "var"
    dataset = dataset_import_tsv(
        name="tiny", captions_path=files / "captions.tsv", images_dir=files / "images"
    )
    paths = corpus_load(dataset=dataset).corpus.image_paths
    assert all(Path(path).is_relative_to(tmp_path / "var" / "image_cache") for path in paths)
    for image, path in zip(dataset.images.order_by("pk"), paths, strict=True):
        assert Path(path).read_bytes() == (files / "images" / image.file_name).read_bytes()
    s3.client.delete_object(Bucket=s3_media, Key=dataset.images.order_by("pk")[0].file.name)
    assert corpus_load(dataset=dataset).corpus.image_paths == paths  # read from the cache


@pytest.mark.django_db
def test_failed_import_leaves_no_object_in_the_bucket(s3, s3_media, files):
    # c.png is last and only its end is cut off: a.png and b.png are stored before the
    # full check of c.png fails, so the objects must be removed again.
    data = png_bytes("green", size=64)
    (files / "images" / "c.png").write_bytes(data[:-20])

    with pytest.raises(ImportFileError) as info:
        dataset_import_tsv(
            name="tiny", captions_path=files / "captions.tsv", images_dir=files / "images"
        )

    assert "c.png: not a readable image" in str(info.value)
    assert s3.keys(s3_media) == []
    assert_no_rows()


@pytest.mark.django_db
def test_an_object_already_at_an_images_name_is_neither_overwritten_nor_deleted(
    s3, s3_media, files
):
    # e.g. left by a worker that died mid-import: its key is what this import would use.
    s3.client.put_object(Bucket=s3_media, Key="images/tiny/a.png", Body=b"someone else's")
    (files / "images" / "c.png").write_bytes(png_bytes("green", size=64)[:-20])
    with pytest.raises(ImportFileError):
        dataset_import_tsv(
            name="tiny", captions_path=files / "captions.tsv", images_dir=files / "images"
        )
    assert s3.keys(s3_media) == ["images/tiny/a.png"]

    (files / "images" / "c.png").write_bytes(png_bytes("green"))
    dataset = dataset_import_tsv(
        name="tiny", captions_path=files / "captions.tsv", images_dir=files / "images"
    )
    stored = dataset.images.get(ext_id=1).file.name
    assert stored.startswith("images/tiny/a_") and stored.endswith(".png")
    body = s3.client.get_object(Bucket=s3_media, Key="images/tiny/a.png")["Body"].read()
    assert body == b"someone else's"


# --- reading from a bucket ---------------------------------------------------------------------


@pytest.fixture
def source_bucket(s3) -> str:
    """A bucket holding the images under coco/val2014/ (and something else beside it)."""
    name = s3.bucket("source")
    for file_name, color in COLORS.items():
        s3.client.put_object(Bucket=name, Key=f"coco/val2014/{file_name}", Body=png_bytes(color))
    s3.client.put_object(Bucket=name, Key="coco/other/a.png", Body=b"not this one")
    return name


@pytest.mark.django_db
def test_images_read_from_an_s3_prefix_are_stored_locally(s3, source_bucket, files):
    source = S3ImageSource(f"s3://{source_bucket}/coco/val2014", endpoint_url=s3.endpoint)
    assert source.names() == ["a.png", "c.png", "sub/b.png"]

    dataset = dataset_import(name="tiny", captions_path=files / "captions.tsv", images=source)

    stored = {image.file_name: Path(image.file.path).read_bytes() for image in dataset.images.all()}
    assert stored == {name: png_bytes(color) for name, color in COLORS.items()}
    assert len(media_files()) == 3


@pytest.mark.django_db
def test_images_from_one_bucket_stored_into_another(s3, source_bucket, s3_media, files):
    out = StringIO()
    call_command(
        "import_dataset", "tiny", "--captions", str(files / "captions.tsv"),
        "--images", f"s3://{source_bucket}/coco/val2014/", stdout=out,
    )  # fmt: skip
    assert out.getvalue().strip() == "imported dataset 'tiny': 3 images, 4 captions"
    assert s3.keys(s3_media) == ["images/tiny/a.png", "images/tiny/c.png", "images/tiny/sub/b.png"]


@pytest.mark.django_db
def test_missing_s3_image_is_refused_naming_the_location(s3, source_bucket, s3_media, files):
    s3.client.delete_object(Bucket=source_bucket, Key="coco/val2014/sub/b.png")
    with pytest.raises(CommandError) as info:
        call_command(
            "import_dataset", "tiny", "--captions", str(files / "captions.tsv"),
            "--images", f"s3://{source_bucket}/coco/val2014",
        )  # fmt: skip
    assert str(info.value) == (
        f"s3://{source_bucket}/coco/val2014/: image file 'sub/b.png' (image_id 2) is missing"
    )
    assert s3.keys(s3_media) == []
    assert_no_rows()


@pytest.mark.django_db
def test_s3_object_that_is_not_an_image_is_refused_and_nothing_stays(
    s3, source_bucket, s3_media, files
):
    s3.client.put_object(Bucket=source_bucket, Key="coco/val2014/c.png", Body=b"<html>")
    source = S3ImageSource(f"s3://{source_bucket}/coco/val2014", endpoint_url=s3.endpoint)
    with pytest.raises(ImageSourceError) as info:
        dataset_import(name="tiny", captions_path=files / "captions.tsv", images=source)
    assert str(info.value).startswith(
        f"s3://{source_bucket}/coco/val2014/c.png: not a readable image"
    )
    assert s3.keys(s3_media) == []  # a.png and sub/b.png had been stored
    assert_no_rows()


def test_unknown_bucket_is_refused_with_the_s3_error(s3):
    source = image_source_open("s3://no-such-bucket-here/x", endpoint_url=s3.endpoint)
    expected = r"^s3://no-such-bucket-here/x/: cannot list \(NoSuchBucket"
    with pytest.raises(ImageSourceError, match=expected):
        source.contains("a.png")


def test_unreachable_endpoint_is_refused_clearly(s3):
    source = S3ImageSource("s3://bucket/x", endpoint_url="http://127.0.0.1:9")
    source._client.meta.config.retries = {"max_attempts": 0}
    with pytest.raises(ImageSourceError, match=r"^s3://bucket/x/: cannot list \(Could not connect"):
        source.names()


def test_s3_object_over_the_size_limit_is_refused_before_download(s3, source_bucket):
    from annotation.imports.image_sources import ImageLimits

    source = S3ImageSource(
        f"s3://{source_bucket}/coco/val2014",
        endpoint_url=s3.endpoint,
        limits=ImageLimits(max_file_bytes=10),
    )
    with pytest.raises(ImageSourceError, match=r"val2014/a\.png: \d+ bytes, more than the 10"):
        source.read("a.png")


# --- settings --------------------------------------------------------------------------------


def _settings_probe(env: dict[str, str], expression: str) -> str:
    code = f"import config.settings as s; print(repr(({expression})))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], **env},
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


def test_storage_bucket_selects_s3_with_endpoint_region_and_no_stored_credentials(tmp_path):
    env = {
        "MITL_VAR_DIR": str(tmp_path),
        "STORAGE_BUCKET": "mitl-media",
        "STORAGE_ENDPOINT_URL": "http://minio:9000",
        "STORAGE_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "from-env",
        "AWS_SECRET_ACCESS_KEY": "from-env-secret",
    }
    default = ast.literal_eval(_settings_probe(env, "s.STORAGES['default']"))

    assert default["BACKEND"] == "storages.backends.s3.S3Storage"
    options = default["OPTIONS"]
    assert (options["bucket_name"], options["endpoint_url"], options["region_name"]) == (
        "mitl-media",
        "http://minio:9000",
        "eu-west-1",
    )
    assert options["file_overwrite"] is False
    assert "from-env" not in repr(default)  # boto3 reads the keys from the environment


def test_without_a_bucket_media_stay_on_the_local_disk(tmp_path):
    backend = _settings_probe({"MITL_VAR_DIR": str(tmp_path)}, "s.STORAGES['default']['BACKEND']")
    assert backend == repr("django.core.files.storage.FileSystemStorage")


# --- import jobs with images_s3 ------------------------------------------------------------------


@pytest.mark.django_db
def test_job_with_images_s3_imports_from_one_bucket_into_another(
    s3, source_bucket, s3_media, settings, tmp_path
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.imports.jobs import import_job_create, import_job_run

    settings.VAR_DIR = tmp_path / "var"
    captions = SimpleUploadedFile("captions.tsv", ("\n".join([HEADER, *ROWS]) + "\n").encode())
    job = import_job_create(
        kind="dataset",
        params={"name": "tiny", "images_s3": f"s3://{source_bucket}/coco/val2014"},
        uploads={"captions": captions},
    )

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.done, job.total) == ("done", 3, 3)
    assert job.dataset.meta["import"]["images"] == f"s3://{source_bucket}/coco/val2014"
    assert s3.keys(s3_media) == ["images/tiny/a.png", "images/tiny/c.png", "images/tiny/sub/b.png"]
    assert not (tmp_path / "var" / "imports" / str(job.pk)).exists()


@pytest.mark.django_db
def test_job_with_a_missing_s3_image_is_refused_before_it_is_queued(
    s3, source_bucket, s3_media, settings, tmp_path
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.imports.jobs import import_job_create
    from annotation.imports.requests import ImportRequestError

    settings.VAR_DIR = tmp_path / "var"
    rows = [*ROWS, "41\t4\td.png\tA yellow square."]
    captions = SimpleUploadedFile("captions.tsv", ("\n".join([HEADER, *rows]) + "\n").encode())
    with pytest.raises(ImportRequestError) as info:
        import_job_create(
            kind="dataset",
            params={"name": "tiny", "images_s3": f"s3://{source_bucket}/coco/val2014"},
            uploads={"captions": captions},
        )
    assert info.value.field == "images_s3"
    assert str(info.value) == (
        f"s3://{source_bucket}/coco/val2014/: image file 'd.png' (image_id 4) is missing"
    )
    assert s3.keys(s3_media) == []
    assert_no_rows()
    assert not (tmp_path / "var" / "imports").exists() or not any(
        (tmp_path / "var" / "imports").iterdir()
    )
