"""Dataset and positive-set imports: what a good file creates, and what a bad file leaves behind.

A bad file must raise ImportFileError naming the file, line and field, and leave nothing
behind: no dataset row and no stored image file under MEDIA_ROOT.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from PIL import Image as PILImage

from annotation.errors import ServiceError
from annotation.imports.datasets import dataset_import_tsv
from annotation.imports.positives import positives_import_eccv
from annotation.models import Caption, Dataset, Image, PositivePair, PositiveSet
from mitl.formats.captions import parse_captions, parse_captions_tsv, parse_labels_json
from mitl.formats.common import ImportFileError
from mitl.formats.positives import parse_cxc_sits, parse_cxc_sts, parse_eccv_positives
from tests.shared_data import COCO5K_CAPTIONS, needs_coco5k

pytestmark = pytest.mark.django_db

HEADER = "caption_id\timage_id\tfile_name\tcaption"
GOOD_ROWS = [
    "11\t1\ta.png\tA red circle on the left.",
    "12\t1\ta.png\tTwo circles.",
    "21\t2\tb.png\tA blue square.",
    "22\t2\tb.png\tA square in the middle.",
    "31\t3\tsub/c.png\tThree green stars.",
]
COLORS = {"a.png": "red", "b.png": "blue", "sub/c.png": "green"}
COCO_TSV = COCO5K_CAPTIONS
ECCV_DATA = Path(__import__("eccv_caption").__file__).parent / "data"


def write_tsv(path: Path, rows: list[str], header: str = HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def write_png(path: Path, color: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    PILImage.new("RGB", (4, 4), color).save(path)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """captions.tsv, labels.json and images/ for three images (one in a subfolder)."""
    folder = tmp_path / "input"
    folder.mkdir()
    write_tsv(folder / "captions.tsv", GOOD_ROWS)
    for name, color in COLORS.items():
        write_png(folder / "images" / name, color)
    (folder / "labels.json").write_text(json.dumps({"1": ["circle", "circle"], "2": ["square"]}))
    return folder


def stored_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def assert_nothing_left() -> None:
    assert Dataset.objects.count() == 0
    assert Image.objects.count() == 0
    assert Caption.objects.count() == 0
    assert PositiveSet.objects.count() == 0
    assert stored_files() == []


def import_files(folder: Path, *, name: str = "tiny", images: bool = True, labels: bool = True):
    return dataset_import_tsv(
        name=name,
        captions_path=folder / "captions.tsv",
        images_dir=folder / "images" if images else None,
        labels_path=folder / "labels.json" if labels else None,
    )


# --- good imports ----------------------------------------------------------------------


def test_tsv_with_images_imports_images_captions_and_labels(files):
    dataset = import_files(files)

    images = {image.ext_id: image for image in dataset.images.all()}
    assert set(images) == {1, 2, 3}
    assert images[3].file_name == "sub/c.png"
    assert images[1].labels == ["circle"]  # sorted, without repeats
    assert images[3].labels == []  # no labels given for image 3
    for image in images.values():
        stored = Path(image.file.path)
        assert stored.is_relative_to(Path(settings.MEDIA_ROOT) / "images" / "tiny")
        assert stored.read_bytes() == (files / "images" / image.file_name).read_bytes()
    assert len(stored_files()) == 3

    captions = {c.ext_id: c for c in dataset.captions.select_related("image")}
    assert set(captions) == {11, 12, 21, 22, 31}
    assert captions[11].text == "A red circle on the left."
    assert {ext: c.image.ext_id for ext, c in captions.items()} == {
        11: 1,
        12: 1,
        21: 2,
        22: 2,
        31: 3,
    }
    assert not any(c.is_invalid for c in captions.values())


def test_import_makes_an_original_positive_set_with_one_pair_per_caption(files):
    dataset = import_files(files)

    original = PositiveSet.objects.get(dataset=dataset)
    assert (original.name, original.source) == ("original", "original")
    pairs = list(original.pairs.values_list("image__ext_id", "caption__ext_id"))
    assert sorted(pairs) == [(1, 11), (1, 12), (2, 21), (2, 22), (3, 31)]


def test_text_only_import_keeps_file_names_but_stores_no_file(files):
    dataset = import_files(files, images=False, labels=False)

    assert dataset.images.count() == 3
    assert dataset.captions.count() == 5
    assert PositivePair.objects.filter(positive_set__dataset=dataset).count() == 5
    assert sorted(dataset.images.values_list("file_name", flat=True)) == [
        "a.png",
        "b.png",
        "sub/c.png",
    ]
    assert set(dataset.images.values_list("file", flat=True)) == {""}
    assert stored_files() == []


def test_text_only_import_does_not_need_the_image_files(tmp_path):
    tsv = write_tsv(tmp_path / "captions.tsv", ["1\t7\tnowhere.jpg\tA caption."])
    dataset = dataset_import_tsv(name="text", captions_path=tsv)
    assert list(dataset.captions.values_list("ext_id", "image__ext_id")) == [(1, 7)]


def test_import_reports_progress_per_image(files):
    calls = []
    dataset_import_tsv(
        name="tiny",
        captions_path=files / "captions.tsv",
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(1, 3), (2, 3), (3, 3)]


# --- bad captions files ------------------------------------------------------------------


BAD_TSVS = {
    "wrong header": (
        ["11\t1\ta.png\tA caption."],
        "caption_id\timage_id\tcaption\tfile_name",
        1,
        "header",
    ),
    "non-integer caption id": ([*GOOD_ROWS, "4x\t3\tsub/c.png\tA star."], HEADER, 7, "caption_id"),
    "non-integer image id": ([*GOOD_ROWS, "41\tthree\tsub/c.png\tA star."], HEADER, 7, "image_id"),
    "negative image id": ([*GOOD_ROWS, "41\t-3\tsub/c.png\tA star."], HEADER, 7, "image_id"),
    "duplicate caption id": ([*GOOD_ROWS, "12\t3\tsub/c.png\tA star."], HEADER, 7, "caption_id"),
    "image id with two file names": (
        [*GOOD_ROWS, "41\t1\tother.png\tA star."],
        HEADER,
        7,
        "file_name",
    ),
    "empty caption": ([*GOOD_ROWS, "41\t3\tsub/c.png\t   "], HEADER, 7, "caption"),
    "missing field": ([*GOOD_ROWS, "41\t3\tA star."], HEADER, 7, "fields"),
}


@pytest.mark.parametrize("case", list(BAD_TSVS))
def test_bad_captions_file_is_refused_naming_file_line_and_field(files, case):
    rows, header, line, field = BAD_TSVS[case]
    write_tsv(files / "captions.tsv", rows, header=header)

    with pytest.raises(ImportFileError) as info:
        import_files(files)

    message = str(info.value)
    assert message.startswith(f"{files / 'captions.tsv'}:{line}:")
    assert field in message
    assert_nothing_left()


def test_duplicate_caption_id_names_the_earlier_line(tmp_path):
    tsv = write_tsv(tmp_path / "c.tsv", ["5\t1\ta\tone", "6\t1\ta\ttwo", "5\t2\tb\tthree"])
    with pytest.raises(ImportFileError, match=r"c\.tsv:4: caption_id 5 repeats line 2"):
        parse_captions_tsv(tsv)


def test_captions_file_without_rows_is_refused(tmp_path):
    tsv = write_tsv(tmp_path / "c.tsv", [])
    with pytest.raises(ImportFileError, match="no caption rows"):
        dataset_import_tsv(name="empty", captions_path=tsv)
    assert_nothing_left()


def test_missing_captions_file_is_refused(tmp_path):
    with pytest.raises(ImportFileError, match="cannot open"):
        dataset_import_tsv(name="missing", captions_path=tmp_path / "nope.tsv")
    assert_nothing_left()


# --- bad image files (the bad one comes last, after good ones that could be stored) -------


def test_missing_image_file_is_refused_and_nothing_is_stored(files):
    (files / "images" / "sub" / "c.png").unlink()
    with pytest.raises(ImportFileError) as info:
        import_files(files)
    assert "sub/c.png" in str(info.value)
    assert "image_id 3" in str(info.value)
    assert_nothing_left()


def test_file_that_is_not_an_image_is_refused_and_nothing_is_stored(files):
    (files / "images" / "sub" / "c.png").write_text("not a picture")
    with pytest.raises(ImportFileError) as info:
        import_files(files)
    assert "sub/c.png" in str(info.value)
    assert "not a readable image" in str(info.value)
    assert_nothing_left()


@pytest.mark.parametrize("file_name", ["../x.png", "sub/../../x.png"])
def test_file_name_escaping_the_image_folder_is_refused(files, file_name):
    write_png(files / "x.png", "red")  # exists, so only the escape is wrong
    write_tsv(files / "captions.tsv", [*GOOD_ROWS, f"41\t4\t{file_name}\tA red square."])
    with pytest.raises(ImportFileError) as info:
        import_files(files)
    assert file_name in str(info.value)
    assert "escapes" in str(info.value)
    assert_nothing_left()


def test_labels_of_an_unknown_image_are_refused(files):
    (files / "labels.json").write_text(json.dumps({"1": ["circle"], "9": ["star"]}))
    with pytest.raises(ImportFileError) as info:
        import_files(files)
    assert str(files / "labels.json") in str(info.value)
    assert "9" in str(info.value)
    assert_nothing_left()


def test_labels_that_are_not_a_list_of_strings_are_refused(files):
    (files / "labels.json").write_text(json.dumps({"1": "circle"}))
    with pytest.raises(ImportFileError, match="labels of image 1"):
        import_files(files)
    assert_nothing_left()


def test_failure_after_storing_files_removes_them_and_every_row(files, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(PositivePair.objects, "bulk_create", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        import_files(files)
    assert_nothing_left()


def test_long_but_valid_file_names_import_or_are_refused_clearly(files):
    file_name = "f" * 60 + ".png"  # well within Image.file_name's 255 characters
    write_png(files / "images" / file_name, "red")
    write_tsv(files / "captions.tsv", [*GOOD_ROWS, f"41\t4\t{file_name}\tA red square."])
    try:
        dataset = import_files(files, name="d" * 40)
    except ImportFileError as exc:  # a clear refusal is acceptable …
        assert file_name in str(exc)
        assert_nothing_left()
        return
    image = dataset.images.get(ext_id=4)  # … and so is a complete import
    assert len(image.file.name) <= Image._meta.get_field("file").max_length
    assert Path(image.file.path).read_bytes() == (files / "images" / file_name).read_bytes()


def test_duplicate_dataset_name_is_refused_and_the_first_is_kept(files):
    first = import_files(files)
    with pytest.raises(ServiceError, match="already exists"):
        import_files(files)
    assert list(Dataset.objects.all()) == [first]
    assert Caption.objects.count() == 5
    assert len(stored_files()) == 3


# --- positive sets in the ECCV format -----------------------------------------------------


def write_eccv(folder: Path, i2t: dict, t2i: dict) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    i2t_path, t2i_path = folder / "image_to_caption.json", folder / "caption_to_image.json"
    i2t_path.write_text(json.dumps(i2t))
    t2i_path.write_text(json.dumps(t2i))
    return i2t_path, t2i_path


def imported_pairs(positive_set: PositiveSet) -> set[tuple[int, int]]:
    return set(positive_set.pairs.values_list("image__ext_id", "caption__ext_id"))


def test_eccv_positives_import_the_union_of_both_files(files, tmp_path):
    dataset = import_files(files, images=False)
    i2t, t2i = write_eccv(
        tmp_path / "eccv",
        {"1": [11, 21], "2": [21]},  # (1, 21) is new, (2, 21) is also in t2i
        {"21": [2], "31": [1, 3], "12": []},
    )

    positive_set, _ = positives_import_eccv(
        dataset=dataset, label="eccv", i2t_path=i2t, t2i_path=t2i
    )

    assert positive_set.source == "imported"
    assert imported_pairs(positive_set) == {(1, 11), (1, 21), (2, 21), (1, 31), (3, 31)}
    assert positive_set.pairs.count() == 5  # (2, 21) from both files is stored once


@pytest.mark.parametrize(
    ("i2t", "t2i", "unknown"),
    [
        ({"9": [11]}, {}, "unknown image ids (first 9)"),
        ({"1": [99]}, {}, "unknown caption ids (first 99)"),
        ({}, {"98": [1]}, "unknown caption ids (first 98)"),
        ({}, {"11": [8]}, "unknown image ids (first 8)"),
    ],
)
def test_eccv_positives_with_unknown_ids_are_refused(files, tmp_path, i2t, t2i, unknown):
    dataset = import_files(files, images=False)
    paths = write_eccv(tmp_path / "eccv", {"1": [11], **i2t}, t2i)
    with pytest.raises(ImportFileError, match=unknown.replace("(", r"\(").replace(")", r"\)")):
        positives_import_eccv(dataset=dataset, label="eccv", i2t_path=paths[0], t2i_path=paths[1])
    assert list(dataset.positive_sets.values_list("name", flat=True)) == ["original"]


def test_eccv_positives_with_a_non_integer_id_name_the_file(files, tmp_path):
    dataset = import_files(files, images=False)
    i2t, t2i = write_eccv(tmp_path / "eccv", {"1": ["eleven"]}, {})
    with pytest.raises(ImportFileError) as info:
        positives_import_eccv(dataset=dataset, label="eccv", i2t_path=i2t, t2i_path=t2i)
    assert str(i2t) in str(info.value)
    assert "'eleven'" in str(info.value)


def test_eccv_positives_with_invalid_json_name_file_and_line(files, tmp_path):
    dataset = import_files(files, images=False)
    i2t, t2i = write_eccv(tmp_path / "eccv", {}, {})
    t2i.write_text('{\n "11": [1],\n oops\n}')
    with pytest.raises(ImportFileError, match=rf"{t2i}:3: invalid JSON"):
        positives_import_eccv(dataset=dataset, label="eccv", i2t_path=i2t, t2i_path=t2i)


def test_eccv_positive_set_name_is_unique_per_dataset(files, tmp_path):
    dataset = import_files(files, images=False)
    i2t, t2i = write_eccv(tmp_path / "eccv", {"1": [11]}, {})
    positives_import_eccv(dataset=dataset, label="cxc", i2t_path=i2t, t2i_path=t2i)
    with pytest.raises(ServiceError, match="already has a positive set named 'cxc'"):
        positives_import_eccv(dataset=dataset, label="cxc", i2t_path=i2t, t2i_path=t2i)
    with pytest.raises(ServiceError):
        positives_import_eccv(dataset=dataset, label="original", i2t_path=i2t, t2i_path=t2i)


# --- command line --------------------------------------------------------------------------


def test_import_dataset_command_refuses_a_bad_file_with_a_command_error(files):
    write_tsv(files / "captions.tsv", ["x\t1\ta.png\tA caption."])
    with pytest.raises(CommandError, match=r"captions\.tsv:2: caption_id"):
        call_command("import_dataset", "tiny", "--captions", str(files / "captions.tsv"))
    assert_nothing_left()


def test_import_dataset_command_records_the_synthetic_meta(synthetic_files):
    out = StringIO()
    call_command(
        "import_dataset",
        "synth",
        "--captions",
        str(synthetic_files / "captions.tsv"),
        "--labels",
        str(synthetic_files / "labels.json"),
        "--synthetic-meta",
        str(synthetic_files / "synthetic.json"),
        stdout=out,
    )
    dataset = Dataset.objects.get(name="synth")
    assert dataset.meta["synthetic"]["n_images"] == 40
    assert out.getvalue().strip() == "imported dataset 'synth': 40 images, 200 captions"


@needs_coco5k
def test_coco5k_imports_text_only_from_the_command_line_with_its_reference_sets():
    out = StringIO()
    call_command("import_dataset", "coco5k", "--captions", str(COCO_TSV), stdout=out)
    assert out.getvalue().strip() == "imported dataset 'coco5k': 5000 images, 25000 captions"

    dataset = Dataset.objects.get(name="coco5k")
    first = dataset.captions.select_related("image").get(ext_id=770337)
    assert first.image.ext_id == 391895
    assert first.image.file_name == "COCO_val2014_000000391895.jpg"
    assert first.text == "A man with a red helmet on a small moped on a dirt road."
    assert stored_files() == []

    def import_reference(label: str, source: str, *options: str) -> str:
        out = StringIO()
        call_command(
            "import_positives",
            "coco5k",
            "--source",
            label,
            "--i2t",
            str(ECCV_DATA / f"{source}_image_to_caption.json"),
            "--t2i",
            str(ECCV_DATA / f"{source}_caption_to_image.json"),
            *options,
            stdout=out,
        )
        return out.getvalue().strip()

    # The package's own COCO positives are exactly the caption-to-image links we imported.
    assert import_reference("coco", "original") == (
        "imported positive set 'coco': 25000 pairs, 5000 image and 25000 caption queries"
    )
    original = PositiveSet.objects.get(dataset=dataset, name="original")
    assert imported_pairs(PositiveSet.objects.get(name="coco")) == imported_pairs(original)
    assert original.pairs.count() == 25000

    # ECCV Caption names two captions that are not among the 25,000: refused as a whole.
    with pytest.raises(CommandError, match=r"2 unknown caption ids \(first 144675\)"):
        import_reference("eccv", "eccv")
    assert not PositiveSet.objects.filter(name="eccv").exists()

    # With --ignore-unknown the two captions' pairs are dropped and reported; the ECCV
    # queries (1,261 images, and the package's 1,332 captions: the two unknown ids are
    # positives of image queries, not queries) are kept with the set.
    report = import_reference("eccv", "eccv", "--ignore-unknown").splitlines()
    eccv = PositiveSet.objects.get(dataset=dataset, name="eccv")
    assert (len(eccv.queries["i2t"]), len(eccv.queries["t2i"])) == (1261, 1332)
    assert report[0].endswith("1261 image and 1332 caption queries")
    assert report[1].startswith("dropped ") and report[1].endswith("unknown to 'coco5k'")


# --- Crisscrossed Captions SITS ratings (CSV) ---------------------------------------------

SITS_HEADER = "caption,image,agg_score,sampling_method"
SITS_ROWS = [  # the layout of CxC's sits_test.csv
    "COCO_val2014:sentid:11,COCO_val2014_000000000001.jpg,4.8,c2i_original",
    "COCO_val2014:sentid:21,COCO_val2014_000000000001.jpg,3.0,c2i_intrasim",
    "COCO_val2014:sentid:31,COCO_val2014_000000000002.jpg,2.99,c2i_intrasim",
]


def write_sits(path: Path, rows: list[str], header: str = SITS_HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_sits_file_is_read_into_caption_image_ratings(tmp_path):
    ratings = parse_cxc_sits(write_sits(tmp_path / "sits_test.csv", SITS_ROWS))

    assert [(r.line, r.caption_id, r.image_id, r.score, r.sampling_method) for r in ratings] == [
        (2, 11, 1, 4.8, "c2i_original"),
        (3, 21, 1, 3.0, "c2i_intrasim"),
        (4, 31, 2, 2.99, "c2i_intrasim"),
    ]


def test_sits_file_name_keeps_its_coco_id_with_leading_zeros_and_other_prefixes(tmp_path):
    rows = ["COCO_train2014:sentid:7,COCO_train2014_000000391895.jpg,5,c2i_intrasim"]
    (rating,) = parse_cxc_sits(write_sits(tmp_path / "s.csv", rows))
    assert (rating.caption_id, rating.image_id, rating.score) == (7, 391895, 5.0)


BAD_SITS = {
    "missing field": (
        [*SITS_ROWS, "COCO_val2014:sentid:12,COCO_val2014_000000000001.jpg,4"],
        5,
        "fields",
    ),
    "caption without sentid": (
        [*SITS_ROWS, "12,COCO_val2014_000000000001.jpg,4,c2i_intrasim"],
        5,
        "caption",
    ),
    "non-integer sentid": (
        [*SITS_ROWS, "COCO_val2014:sentid:x1,COCO_val2014_000000000001.jpg,4,c2i_intrasim"],
        5,
        "caption",
    ),
    "image that is not a COCO file name": (
        [*SITS_ROWS, "COCO_val2014:sentid:12,image-one,4,c2i_intrasim"],
        5,
        "image",
    ),
    "score that is not a number": (
        [*SITS_ROWS, "COCO_val2014:sentid:12,COCO_val2014_000000000001.jpg,high,c2i_intrasim"],
        5,
        "agg_score",
    ),
    "score above 5": (
        [*SITS_ROWS, "COCO_val2014:sentid:12,COCO_val2014_000000000001.jpg,5.5,c2i_intrasim"],
        5,
        "agg_score",
    ),
    "score that is nan": (
        [*SITS_ROWS, "COCO_val2014:sentid:12,COCO_val2014_000000000001.jpg,nan,c2i_intrasim"],
        5,
        "agg_score",
    ),
    "empty sampling method": (
        [*SITS_ROWS, "COCO_val2014:sentid:12,COCO_val2014_000000000001.jpg,4, "],
        5,
        "sampling_method",
    ),
    "repeated pair": (
        [*SITS_ROWS, "COCO_val2014:sentid:21,COCO_val2014_000000000001.jpg,1.0,c2i_intrasim"],
        5,
        "repeat line 3",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SITS))
def test_bad_sits_file_is_refused_naming_file_line_and_field(tmp_path, case):
    rows, line, field = BAD_SITS[case]
    path = write_sits(tmp_path / "sits.csv", rows)

    with pytest.raises(ImportFileError) as info:
        parse_cxc_sits(path)

    message = str(info.value)
    assert message.startswith(f"{path}:{line}:")
    assert field in message


def test_sits_file_with_another_header_is_refused(tmp_path):
    path = write_sits(tmp_path / "sits.csv", SITS_ROWS, header="caption,image,score")
    with pytest.raises(ImportFileError, match=rf"{path}:1: header must be {SITS_HEADER}"):
        parse_cxc_sits(path)


@pytest.mark.parametrize(
    ("header", "task"),
    [
        ("caption1,caption2,agg_score,sampling_method", "STS"),
        ("image1,image2,agg_score,sampling_method", "SIS"),
    ],
)
def test_other_cxc_tasks_are_refused_with_a_hint(tmp_path, header, task):
    path = write_sits(tmp_path / "sts_test.csv", [], header=header)
    with pytest.raises(ImportFileError, match=rf"{path}:1: header .*CxC {task} .*not SITS"):
        parse_cxc_sits(path)


def test_sits_file_without_rows_or_missing_is_refused(tmp_path):
    with pytest.raises(ImportFileError, match="no rating rows"):
        parse_cxc_sits(write_sits(tmp_path / "empty.csv", []))
    with pytest.raises(ImportFileError, match="cannot open"):
        parse_cxc_sits(tmp_path / "nope.csv")


def test_a_field_longer_than_the_csv_limit_is_a_file_error_not_a_crash(tmp_path):
    path = tmp_path / "captions.tsv"
    path.write_text(f"{HEADER}\n1\t2\ta.jpg\t{'x' * 200_000}\n")
    with pytest.raises(ImportFileError, match=r"captions.tsv: not a readable table"):
        parse_captions_tsv(path)


def test_json_nested_too_deeply_is_a_file_error_not_a_crash(tmp_path):
    path = tmp_path / "i2t.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ImportFileError, match="nested too deeply"):
        parse_eccv_positives(path, path)


# --- ids must fit the database's signed 64-bit integer -------------------------------------

ID_MAX = 2**63 - 1  # PostgreSQL's bigint, the type of Image.ext_id and Caption.ext_id
HUGE = 99999999999999999999999
OUT_OF_RANGE = f"is out of range (0 to {ID_MAX})"


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def coco_json(image_id: object = 1, caption_id: object = 11) -> str:
    return (
        "{\n"
        f' "images": [\n  {{"id": {image_id}, "file_name": "a.png"}}\n ],\n'
        f' "annotations": [\n  {{"id": {caption_id}, "image_id": {image_id}, "caption": "A."}}\n'
        " ]\n}\n"
    )


def karpathy_json(image_id: int = 1, sentid: int = 11) -> str:
    return (
        '{"images": [\n {"filepath": "val2014", "filename": "a.png", "split": "test",\n'
        f'  "cocoid": {image_id},\n'
        f'  "sentences": [{{"raw": "A.", "sentid": {sentid}}}]}}\n]}}\n'
    )


# (file name, its text, the parser, the start of the error: file:line: field)
OUT_OF_RANGE_IDS = {
    "tsv caption id": (
        "captions.tsv",
        f"{HEADER}\n11\t1\ta.png\tA.\n{HUGE}\t1\ta.png\tB.\n",
        parse_captions_tsv,
        f"captions.tsv:3: field caption_id: id {HUGE}",
    ),
    "tsv image id one past the largest": (
        "captions.tsv",
        f"{HEADER}\n11\t{ID_MAX + 1}\ta.png\tA.\n",
        parse_captions_tsv,
        f"captions.tsv:2: field image_id: id {ID_MAX + 1}",
    ),
    "coco image id": (
        "captions.json",
        coco_json(image_id=HUGE),
        lambda path: parse_captions(path, format="coco"),
        f"captions.json:3: field images[0].id: id {HUGE}",
    ),
    "coco caption id": (
        "captions.json",
        coco_json(caption_id=HUGE),
        lambda path: parse_captions(path, format="coco"),
        f"captions.json:6: field annotations[0].id: id {HUGE}",
    ),
    "coco caption id as a string": (
        "captions.json",
        coco_json().replace('"id": 11', f'"id": "{HUGE}"'),
        lambda path: parse_captions(path, format="coco"),
        f"captions.json:6: field annotations[0].id: id {HUGE}",
    ),
    "karpathy cocoid": (
        "dataset_coco.json",
        karpathy_json(image_id=HUGE),
        lambda path: parse_captions(path, format="karpathy"),
        f"dataset_coco.json:3: field images[0].cocoid: id {HUGE}",
    ),
    "karpathy sentid": (
        "dataset_coco.json",
        karpathy_json(sentid=HUGE),
        lambda path: parse_captions(path, format="karpathy"),
        f"dataset_coco.json:4: field images[0].sentences[0].sentid: id {HUGE}",
    ),
    "labels image id": (
        "labels.json",
        f'{{\n "1": ["square"],\n "{HUGE}": ["circle"]\n}}\n',
        parse_labels_json,
        f"labels.json:3: field key '{HUGE}': id {HUGE}",
    ),
    "eccv key": (
        "image_to_caption.json",
        f'{{\n "1": [11],\n "{HUGE}": [11]\n}}\n',
        lambda path: parse_eccv_positives(path, path),
        f"image_to_caption.json:3: field key '{HUGE}': id {HUGE}",
    ),
    "eccv value": (
        "image_to_caption.json",
        f'{{\n "1": [\n  11,\n  {HUGE}\n ]\n}}\n',
        lambda path: parse_eccv_positives(path, path),
        f"image_to_caption.json:4: field value of '1': id {HUGE}",
    ),
    "cxc caption sentid": (
        "sits.csv",
        f"{SITS_HEADER}\nCOCO_val2014:sentid:{HUGE},COCO_val2014_000000000001.jpg,4,c2i\n",
        parse_cxc_sits,
        f"sits.csv:2: field caption (sentid): id {HUGE}",
    ),
    "cxc image number": (
        "sits.csv",
        f"{SITS_HEADER}\nCOCO_val2014:sentid:11,COCO_val2014_{HUGE}.jpg,4,c2i\n",
        parse_cxc_sits,
        f"sits.csv:2: field image: id {HUGE}",
    ),
}


@pytest.mark.parametrize("case", list(OUT_OF_RANGE_IDS))
def test_an_id_beyond_a_signed_64_bit_integer_is_refused_naming_file_line_and_field(tmp_path, case):
    name, text, parse, start = OUT_OF_RANGE_IDS[case]
    path = write_text(tmp_path / name, text)

    with pytest.raises(ImportFileError) as info:
        parse(path)

    assert str(info.value) == f"{tmp_path}/{start} {OUT_OF_RANGE}"


def test_the_largest_signed_64_bit_ids_are_imported(tmp_path):
    tsv = write_tsv(tmp_path / "c.tsv", [f"{ID_MAX}\t{ID_MAX}\ta.png\tThe largest ids."])
    write_text(tmp_path / "labels.json", f'{{"{ID_MAX}": ["square"]}}')

    dataset = dataset_import_tsv(
        name="big", captions_path=tsv, labels_path=tmp_path / "labels.json"
    )

    caption = Caption.objects.get(dataset=dataset)
    assert (caption.ext_id, caption.image.ext_id) == (ID_MAX, ID_MAX)
    assert caption.image.labels == ["square"]


def test_a_json_integer_too_long_to_convert_is_a_file_error_not_a_crash(tmp_path):
    path = write_text(tmp_path / "captions.json", coco_json(caption_id="9" * 5000))
    with pytest.raises(ImportFileError, match=r"captions.json:6: invalid JSON \(integer"):
        parse_captions(path, format="coco")


STS_HEADER = "caption1,caption2,agg_score,sampling_method"


def test_sts_file_is_read_into_caption_caption_ratings(tmp_path):
    rows = ["COCO_val2014:sentid:11,COCO_val2014:sentid:21,3.1,c2c_isim"]
    (rating,) = parse_cxc_sts(write_sits(tmp_path / "sts.csv", rows, STS_HEADER))
    assert (rating.line, rating.caption1_id, rating.caption2_id, rating.score) == (2, 11, 21, 3.1)

    with pytest.raises(
        ImportFileError, match=r"sts.csv:3: caption 11 and caption 21 repeat line 2"
    ):
        parse_cxc_sts(write_sits(tmp_path / "sts.csv", rows * 2, STS_HEADER))
    with pytest.raises(ImportFileError, match=r"field caption2 must look like COCO_val2014"):
        parse_cxc_sts(
            write_sits(tmp_path / "sts.csv", ["COCO_val2014:sentid:1,x.jpg,1,m"], STS_HEADER)
        )
    with pytest.raises(
        ImportFileError, match=r"looks like a CxC SITS \(caption-image\) file, not STS"
    ):
        parse_cxc_sts(write_sits(tmp_path / "sits.csv", SITS_ROWS))
