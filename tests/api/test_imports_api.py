"""Import endpoints: staff start imports and follow them; every kind of bad import is a 400
that names the file, line and field, and writes nothing (no rows, no stored file, no
staged upload, no job)."""

from __future__ import annotations

import io
import json
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import include, path
from PIL import Image as PILImage
from rest_framework.test import APIClient

from annotation.imports.datasets import dataset_import_tsv
from annotation.models import Caption, Dataset, Image, ImportJob, PositiveSet

pytestmark = pytest.mark.django_db

DATASET_URL = "/api/imports/dataset/"
POSITIVES_URL = "/api/imports/positives/"
HEADER = "caption_id\timage_id\tfile_name\tcaption"
ROWS = [
    "11\t1\ta.png\tA red square.",
    "12\t1\ta.png\tSomething red.",
    "21\t2\tsub/b.png\tA blue square.",
    "31\t3\tc.png\tA green square.",
]
COLORS = {"a.png": "red", "sub/b.png": "blue", "c.png": "green"}
COCO = {
    "images": [{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "sub/b.png"}],
    "annotations": [
        {"id": 11, "image_id": 1, "caption": "A red square."},
        {"id": 21, "image_id": 2, "caption": "A blue square."},
    ],
}
KARPATHY = {
    "images": [
        {
            "filepath": "val2014",
            "filename": "a.png",
            "cocoid": 1,
            "split": "test",
            "sentids": [11, 12],
            "sentences": [{"raw": "A red square.", "sentid": 11}, {"raw": "Red.", "sentid": 12}],
        },
        {
            "filepath": "val2014",
            "filename": "b.png",
            "cocoid": 2,
            "split": "train",
            "sentids": [21],
            "sentences": [{"raw": "A blue square.", "sentid": 21}],
        },
    ]
}


# --- building uploads ---------------------------------------------------------------------------


def png_bytes(color: str = "red", size: int = 8) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (size, size), color).save(out, format="PNG")
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A PNG header that claims `width`×`height` pixels (a pixel bomb in a few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = chunk(b"IDAT", zlib.compress(b"\x00" * 16))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + idat + chunk(b"IEND", b"")


def upload(name: str, data: bytes | str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data.encode() if isinstance(data, str) else data)


def tsv(rows: list[str] = ROWS, name: str = "captions.tsv") -> SimpleUploadedFile:
    return upload(name, "\n".join([HEADER, *rows]) + "\n")


def json_upload(name: str, data: object) -> SimpleUploadedFile:
    return upload(name, json.dumps(data, indent=2))


def zip_upload(
    entries: dict[str, bytes] | None = None, *, link: str | None = None
) -> SimpleUploadedFile:
    entries = {n: png_bytes(c) for n, c in COLORS.items()} if entries is None else entries
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return upload("images.zip", out.getvalue())


def images(**changes: bytes) -> SimpleUploadedFile:
    """The three good images, with some entries added or replaced."""
    entries = {n: png_bytes(c) for n, c in COLORS.items()}
    entries.update({name.replace("__", "/"): data for name, data in changes.items()})
    return zip_upload(entries)


def changed(data: dict, change) -> dict:
    data = json.loads(json.dumps(data))
    change(data)
    return data


# --- clients and checks -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _isolated_var(settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path / "var"


def client_as(*, staff: bool | None) -> APIClient:
    client = APIClient()
    if staff is not None:
        user = get_user_model().objects.create_user(f"user-{staff}", is_staff=staff)
        client.force_login(user)
    return client


@pytest.fixture
def admin_api() -> APIClient:
    return client_as(staff=True)


def media_files() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def staged_uploads() -> list[Path]:
    root = Path(django_settings.VAR_DIR) / "imports"
    return sorted(p for p in root.rglob("*")) if root.exists() else []


def assert_refused(response, field: str, *parts: str) -> str:
    """A 400 in the API's error format, blaming `field`, whose detail holds every part."""
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"}
    detail = body["detail"]
    assert field in body["errors"], body
    for part in parts:
        assert part in detail, (part, detail)
    assert "imports/" not in detail  # never the server's staging folder
    return detail


def assert_nothing_written(*, positive_sets: int = 0, datasets: int = 0) -> None:
    assert Dataset.objects.count() == datasets
    if not datasets:
        assert Image.objects.count() == 0
        assert Caption.objects.count() == 0
    assert PositiveSet.objects.count() == positive_sets
    assert ImportJob.objects.count() == 0
    assert media_files() == []
    assert staged_uploads() == []


# --- every kind of bad dataset import -----------------------------------------------------------

BAD_DATASETS = {
    # captions files: file, line and field
    "tsv repeated caption id": (
        {"captions": tsv([*ROWS, "12\t3\tc.png\tAgain."])},
        "captions",
        ["captions.tsv:6: caption_id 12 repeats line 3"],
    ),
    "tsv image id that is not a number": (
        {"captions": tsv([*ROWS, "41\tfour\td.png\tA square."])},
        "captions",
        ["captions.tsv:6: image_id must be an integer id, got 'four'"],
    ),
    "tsv caption id beyond a signed 64-bit integer": (
        {"captions": tsv([*ROWS, "99999999999999999999999\t4\td.png\tA square."])},
        "captions",
        [
            "captions.tsv:6: field caption_id: id 99999999999999999999999 is out of range "
            "(0 to 9223372036854775807)"
        ],
    ),
    "coco image id beyond a signed 64-bit integer": (
        {
            "format": "coco",
            "captions": json_upload(
                "captions.json",
                changed(COCO, lambda d: d["images"][1].update(id=2**63)),
            ),
        },
        "captions",
        [f"captions.json:8: field images[1].id: id {2**63} is out of range"],
    ),
    "tsv image with two file names": (
        {"captions": tsv([*ROWS, "13\t1\tz.png\tA square."])},
        "captions",
        ["captions.tsv:6: image_id 1 has file_name 'z.png' here but 'a.png' earlier"],
    ),
    "coco caption pointing at an unknown image": (
        {
            "format": "coco",
            "captions": json_upload(
                "captions.json",
                changed(COCO, lambda d: d["annotations"][1].update(image_id=99)),
            ),
        },
        "captions",
        ["captions.json:20: field annotations[1].image_id: image id 99 is not in images"],
    ),
    "coco repeated image id": (
        {
            "format": "coco",
            "captions": json_upload(
                "captions.json", changed(COCO, lambda d: d["images"][1].update(id=1))
            ),
        },
        "captions",
        ["captions.json:8: field images[1].id: image id 1 repeats images[0]"],
    ),
    "karpathy repeated sentid": (
        {
            "format": "karpathy",
            "captions": json_upload(
                "dataset_coco.json",
                changed(KARPATHY, lambda d: d["images"][1]["sentences"][0].update(sentid=12)),
            ),
        },
        "captions",
        ["dataset_coco.json:", "field images[1].sentences[0].sentid: caption id 12 repeats"],
    ),
    "karpathy split that no image has": (
        {
            "format": "karpathy",
            "split": "val",
            "captions": json_upload("dataset_coco.json", KARPATHY),
        },
        "captions",
        ["dataset_coco.json: no image has split 'val' (splits here: test, train)"],
    ),
    "captions file that is not UTF-8 text": (
        {"captions": upload("captions.tsv", tsv().read() + b"41\t4\td.png\tCaf\xe9\n")},
        "captions",
        ["captions.tsv:6: not UTF-8 text (byte 0xe9)"],
    ),
    "caption with a NUL character": (
        {"captions": tsv([*ROWS, "41\t4\td.png\tA \x00 square."])},
        "captions",
        ["captions.tsv:6: a field holds a NUL character"],
    ),
    "captions file that is not JSON": (
        {"format": "coco", "captions": upload("captions.json", '{"images": [\n  oops\n]}')},
        "captions",
        ["captions.json:2: invalid JSON"],
    ),
    # images
    "caption naming an image the zip lacks": (
        {"captions": tsv([*ROWS, "41\t4\td.png\tA yellow square."]), "images": images()},
        "images",
        ["images.zip: image file 'd.png' (image_id 4) is missing"],
    ),
    "file name escaping the image folder": (
        {"captions": tsv([*ROWS, "41\t4\t../d.png\tA square."]), "images": images()},
        "images",
        ["images.zip: file_name '../d.png' escapes the image folder"],
    ),
    "zip entry escaping the target": (
        {"captions": tsv(), "images": images(**{"..__evil.png": png_bytes()})},
        "images",
        ["images.zip: entry '../evil.png' escapes the target folder; the zip is refused"],
    ),
    "zip entry with an absolute path": (
        {"captions": tsv(), "images": zip_upload({"/etc/evil.png": png_bytes()})},
        "images",
        ["images.zip: entry '/etc/evil.png' is an absolute path"],
    ),
    "zip entry that is a symbolic link": (
        {
            "captions": tsv(),
            "images": zip_upload({"a.png": png_bytes(), "sub/b.png": png_bytes()}, link="c.png"),
        },
        "images",
        ["images.zip: entry 'c.png' is a symbolic link"],
    ),
    "zip bomb of many small entries": (
        {
            "captions": tsv(),
            "images": images(**{f"zeros{i}.bmp": b"\0" * ((1 << 20) - 1) for i in range(16)}),
        },
        "images",
        ["images.zip: refused as a zip bomb", "unpack to", "ratio"],
    ),
    "zip bomb": (
        {"captions": tsv(), "images": images(**{"zeros.png": b"\0" * (16 << 20)})},
        "images",
        ["images.zip: entry 'zeros.png' is refused as a decompression bomb"],
    ),
    "image that is a pixel bomb": (
        {"captions": tsv(), "images": images(**{"c.png": png_claiming(100_000, 100_000)})},
        "images",
        ["images.zip: entry 'c.png': refused as a decompression bomb"],
    ),
    "file that is not an image": (
        {"captions": tsv(), "images": images(**{"sub__b.png": b"<html>not a picture</html>"})},
        "images",
        ["images.zip: entry 'sub/b.png': not a readable image"],
    ),
    "images upload that is not a zip": (
        {"captions": tsv(), "images": upload("images.zip", png_bytes())},
        "images",
        ["images.zip: the images upload must be a zip file"],
    ),
    # labels
    "labels of an unknown image": (
        {"captions": tsv(), "labels": json_upload("labels.json", {"1": ["square"], "9": ["x"]})},
        "labels",
        ["labels.json: labels for unknown image id 9"],
    ),
    "labels that are not JSON": (
        {"captions": tsv(), "labels": upload("labels.json", "{'1': ['square']}")},
        "labels",
        ["labels.json:1: invalid JSON"],
    ),
    # the form itself
    "no captions file": ({}, "captions", ["captions: "]),
    "unknown form field": (
        {"captions": tsv(), "colour": "red"},
        "colour",
        ["colour: unknown field (known: name, format, split, captions, images, images_s3,"],
    ),
    "unknown file upload": (
        {"captions": tsv(), "images2": images()},
        "images2",
        ["images2: unknown field"],
    ),
    "name that is not a slug": ({"name": "my data!", "captions": tsv()}, "name", ["name: "]),
    "unknown format": ({"format": "csv", "captions": tsv()}, "format", ['"csv" is not a valid']),
    "split with a tsv": ({"split": "test", "captions": tsv()}, "split", ["karpathy format only"]),
    "zip and s3 together": (
        {"captions": tsv(), "images": images(), "images_s3": "s3://bucket/images"},
        "images_s3",
        ["give either an images zip or images_s3"],
    ),
    "s3 location that is not one": (
        {"captions": tsv(), "images_s3": "https://bucket/images"},
        "images_s3",
        ["is not an S3 location"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_DATASETS))
def test_bad_dataset_import_is_a_400_naming_file_line_and_field_and_writes_nothing(admin_api, case):
    fields, blamed, parts = BAD_DATASETS[case]
    response = admin_api.post(DATASET_URL, {"name": "tiny", **fields}, format="multipart")

    assert_refused(response, blamed, *parts)
    assert_nothing_written()


def test_taken_dataset_name_is_a_400_and_the_existing_dataset_is_kept(admin_api, tmp_path):
    (tmp_path / "c.tsv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    dataset_import_tsv(name="tiny", captions_path=tmp_path / "c.tsv")

    response = admin_api.post(DATASET_URL, {"name": "tiny", "captions": tsv()}, format="multipart")

    assert_refused(response, "name", "dataset 'tiny' already exists")
    assert_nothing_written(datasets=1, positive_sets=1)
    assert Caption.objects.count() == 4


# --- every kind of bad positive-set import -----------------------------------------------------


@pytest.fixture
def tiny(tmp_path) -> Dataset:
    (tmp_path / "c.tsv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    return dataset_import_tsv(name="tiny", captions_path=tmp_path / "c.tsv")


SITS_HEADER = "caption,image,agg_score,sampling_method"
BAD_POSITIVES = {
    "eccv file that is not JSON": (
        {
            "i2t": json_upload("image_to_caption.json", {"1": [11]}),
            "t2i": upload("caption_to_image.json", '{\n "11": [1],\n oops\n}'),
        },
        "t2i",
        ["caption_to_image.json:3: invalid JSON"],
    ),
    "eccv id that is not a number": (
        {
            "i2t": json_upload("image_to_caption.json", {"1": ["eleven"]}),
            "t2i": json_upload("caption_to_image.json", {}),
        },
        "i2t",
        ["image_to_caption.json:3: value of '1' must be an integer id, got 'eleven'"],
    ),
    "eccv id beyond a signed 64-bit integer": (
        {
            "i2t": json_upload("image_to_caption.json", {"1": [11, 99999999999999999999999]}),
            "t2i": json_upload("caption_to_image.json", {}),
        },
        "i2t",
        [
            "image_to_caption.json:4: field value of '1': id 99999999999999999999999 is out of "
            "range (0 to 9223372036854775807)"
        ],
    ),
    "cxc caption id beyond a signed 64-bit integer": (
        {
            "cxc": upload(
                "sits_test.csv",
                f"{SITS_HEADER}\n"
                "COCO_val2014:sentid:11,COCO_val2014_000000000001.jpg,4.0,c2i_intrasim\n"
                "COCO_val2014:sentid:99999999999999999999999,COCO_val2014_000000000001.jpg,"
                "4.0,c2i_intrasim\n",
            )
        },
        "cxc",
        ["sits_test.csv:3: field caption (sentid): id 99999999999999999999999 is out of range"],
    ),
    "eccv caption unknown to the dataset": (
        {
            "i2t": json_upload("image_to_caption.json", {"1": [11, 99]}),
            "t2i": json_upload("caption_to_image.json", {}),
        },
        "i2t",
        ["1 unknown caption ids (first 99) in dataset 'tiny'"],
    ),
    "cxc score out of range": (
        {
            "cxc": upload(
                "sits_test.csv",
                f"{SITS_HEADER}\n"
                "COCO_val2014:sentid:11,COCO_val2014_000000000001.jpg,4.0,c2i_intrasim\n"
                "COCO_val2014:sentid:21,COCO_val2014_000000000002.jpg,7.5,c2i_intrasim\n",
            )
        },
        "cxc",
        ["sits_test.csv:3: field agg_score must be between 0 and 5, got 7.5"],
    ),
    "cxc repeated pair": (
        {
            "cxc": upload(
                "sits_test.csv",
                f"{SITS_HEADER}\n"
                "COCO_val2014:sentid:11,COCO_val2014_000000000001.jpg,4.0,c2i_intrasim\n"
                "COCO_val2014:sentid:11,COCO_val2014_000000000001.jpg,1.0,c2i_intrasim\n",
            )
        },
        "cxc",
        ["sits_test.csv:3: caption 11 and image 1 repeat line 2"],
    ),
    "cxc image unknown to the dataset": (
        {
            "cxc": upload(
                "sits_test.csv",
                f"{SITS_HEADER}\n"
                "COCO_val2014:sentid:11,COCO_val2014_000000000009.jpg,4.0,c2i_intrasim\n",
            )
        },
        "cxc",
        ["sits_test.csv:2: field image: image id 9 is not in dataset 'tiny'"],
    ),
    "cxc file that is not UTF-8 text": (
        {"cxc": upload("sits_test.csv", f"{SITS_HEADER}\n".encode() + b"\xc3\x28,x,1,y\n")},
        "cxc",
        ["sits_test.csv:2: not UTF-8 text (byte 0xc3)"],
    ),
    "eccv with a minimum score": (
        {
            "min_score": "2",
            "i2t": json_upload("image_to_caption.json", {"1": [11]}),
            "t2i": json_upload("caption_to_image.json", {}),
        },
        "min_score",
        ["min_score applies to a cxc file only"],
    ),
    "minimum score out of range": (
        {"min_score": "9", "cxc": upload("sits.csv", f"{SITS_HEADER}\n")},
        "min_score",
        ["min_score: "],
    ),
    "only one eccv file": (
        {"i2t": json_upload("image_to_caption.json", {"1": [11]})},
        "t2i",
        ["needs both i2t and t2i"],
    ),
    "label already used": (
        {
            "label": "original",
            "i2t": json_upload("image_to_caption.json", {"1": [11]}),
            "t2i": json_upload("caption_to_image.json", {}),
        },
        "label",
        ["dataset 'tiny' already has a positive set named 'original'"],
    ),
    "unknown form field": (
        {
            "ignore_unknow": "true",
            "i2t": json_upload("image_to_caption.json", {"1": [11]}),
            "t2i": json_upload("caption_to_image.json", {}),
        },
        "ignore_unknow",
        ["ignore_unknow: unknown field (known: dataset, label, i2t, t2i, cxc,"],
    ),
    "unknown dataset": (
        {
            "dataset": "nope",
            "i2t": json_upload("image_to_caption.json", {"1": [11]}),
            "t2i": json_upload("caption_to_image.json", {}),
        },
        "dataset",
        ["no dataset named 'nope'"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_POSITIVES))
def test_bad_positives_import_is_a_400_naming_file_line_and_field_and_writes_nothing(
    admin_api, tiny, case
):
    fields, blamed, parts = BAD_POSITIVES[case]
    form = {"dataset": "tiny", "label": "extra", **fields}

    response = admin_api.post(POSITIVES_URL, form, format="multipart")

    assert_refused(response, blamed, *parts)
    assert_nothing_written(datasets=1, positive_sets=1)  # the dataset's original set only


# --- good imports ------------------------------------------------------------------------------


def test_dataset_import_is_accepted_queued_and_followed_to_done(
    admin_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = admin_api.post(
            DATASET_URL,
            {"name": "tiny", "captions": tsv(), "images": images(), "description": "squares"},
            format="multipart",
        )

    assert response.status_code == 202, response.content
    job = response.json()
    assert response["Location"] == job["url"] == f"/api/imports/{job['id']}/"
    assert (job["kind"], job["status"], job["done"], job["total"]) == ("dataset", "queued", 0, 0)
    assert job["params"]["files"] == {"captions": "captions.tsv", "images": "images.zip"}
    assert admin_api.get(job["url"]).json()["status"] == "queued"

    for callback in queued:  # the commit: queues annotation.run_import (eager here)
        callback()

    status = admin_api.get(job["url"]).json()
    assert (status["status"], status["done"], status["total"]) == ("done", 3, 3)
    assert status["dataset"] == "tiny" and status["error"] == ""
    assert Dataset.objects.get(name="tiny").images.exclude(file="").count() == 3
    assert len(media_files()) == 3 and staged_uploads() == []


def test_karpathy_text_only_import_runs_on_commit(admin_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_api.post(
            DATASET_URL,
            {
                "name": "k",
                "format": "karpathy",
                "split": "test",
                "captions": json_upload("dataset_coco.json", KARPATHY),
            },
            format="multipart",
        )
    assert response.status_code == 202, response.content

    status = admin_api.get(response["Location"]).json()
    assert (status["status"], status["dataset"]) == ("done", "k")
    dataset = Dataset.objects.get(name="k")
    assert sorted(dataset.captions.values_list("ext_id", flat=True)) == [11, 12]


def test_a_job_that_fails_while_running_reports_why(admin_api, django_capture_on_commit_callbacks):
    truncated = png_bytes("green", size=64)[:-20]  # sound header, broken end
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_api.post(
            DATASET_URL,
            {"name": "tiny", "captions": tsv(), "images": images(**{"c.png": truncated})},
            format="multipart",
        )
    assert response.status_code == 202

    status = admin_api.get(response["Location"]).json()
    assert status["status"] == "failed"
    assert status["error"].startswith("images.zip: entry 'c.png': not a readable image")
    assert Dataset.objects.count() == 0 and media_files() == [] and staged_uploads() == []


def test_positives_import_is_followed_to_done(admin_api, tiny, django_capture_on_commit_callbacks):
    sits = (
        f"{SITS_HEADER}\n"
        "COCO_val2014:sentid:11,COCO_val2014_000000000002.jpg,4.0,c2i_intrasim\n"
        "COCO_val2014:sentid:21,COCO_val2014_000000000001.jpg,2.0,c2i_intrasim\n"
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_api.post(
            POSITIVES_URL,
            {"dataset": "tiny", "label": "cxc", "cxc": upload("sits_test.csv", sits)},
            format="multipart",
        )
    assert response.status_code == 202, response.content
    assert response.json()["params"]["min_score"] == 3.0

    status = admin_api.get(response["Location"]).json()
    assert (status["status"], status["dataset"]) == ("done", "tiny")
    pairs = PositiveSet.objects.get(name="cxc").pairs.values_list(
        "image__ext_id", "caption__ext_id"
    )
    assert list(pairs) == [(2, 11)]


def test_unknown_import_is_a_404(admin_api):
    response = admin_api.get("/api/imports/999/")
    assert response.status_code == 404
    assert response.json() == {"detail": "import 999 does not exist"}


# --- who may ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url"),
    [("post", DATASET_URL), ("post", POSITIVES_URL), ("get", "/api/imports/1/")],
)
@pytest.mark.parametrize(("role", "codes"), [(None, {401, 403}), (False, {403})])
def test_only_staff_may_import_or_see_imports(method, url, role, codes):
    client = client_as(staff=role)
    job = ImportJob.objects.create(kind="dataset", params={})  # so a GET could find it
    assert job.pk

    response = getattr(client, method)(url, {"name": "x", "captions": tsv()}, format="multipart")

    assert response.status_code in codes
    assert Dataset.objects.count() == 0 and staged_uploads() == []


# --- the OpenAPI schema ------------------------------------------------------------------------


def test_import_endpoints_have_a_valid_schema_without_warnings(settings):
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.validation import validate_schema

    schema_class = settings.REST_FRAMEWORK.get(
        "DEFAULT_SCHEMA_CLASS", "drf_spectacular.openapi.AutoSchema"
    )
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_SCHEMA_CLASS": schema_class}
    GENERATOR_STATS.reset()
    generator = SchemaGenerator(patterns=[path("api/imports/", include("api.imports"))])

    schema = generator.get_schema(request=None, public=True)

    validate_schema(schema)
    assert not GENERATOR_STATS, "drf-spectacular warned about the import endpoints"
    paths = schema["paths"]
    assert set(paths) == {
        "/api/imports/dataset/",
        "/api/imports/positives/",
        "/api/imports/{job_id}/",
    }
    create = paths["/api/imports/dataset/"]["post"]
    assert set(create["requestBody"]["content"]) == {"multipart/form-data"}
    assert {"202", "400"} <= set(create["responses"])
