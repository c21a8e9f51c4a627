"""COCO captions JSON and Karpathy's dataset_coco.json: the rows they give, and bad files
refused with file:line: field messages, whatever the JSON's indentation."""

from __future__ import annotations

import copy
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.imports.datasets import dataset_import
from annotation.models import Dataset
from mitl.formats.captions import CaptionRow, parse_captions, parse_coco_captions, parse_karpathy
from mitl.formats.common import ImportFileError

COCO = {  # the layout of captions_val2014.json (its real ids for the first image)
    "info": {"description": "COCO 2014", "year": 2014},
    "licenses": [{"id": 1, "name": "CC BY 4.0"}],
    "images": [
        {"id": 391895, "file_name": "COCO_val2014_000000391895.jpg", "width": 640},
        {"id": 522418, "file_name": "COCO_val2014_000000522418.jpg", "width": 640},
        {"id": 184613, "file_name": "COCO_val2014_000000184613.jpg", "width": 500},
    ],
    "annotations": [
        {"image_id": 391895, "id": 770337, "caption": "A man with a red helmet on a moped."},
        {"image_id": 522418, "id": 681330, "caption": "A woman cutting a large cake.\n"},
        {"image_id": 391895, "id": 771687, "caption": "Man riding a motor bike."},
    ],
}

KARPATHY = {  # the layout of dataset_coco.json
    "dataset": "coco",
    "images": [
        {
            "filepath": "val2014",
            "sentids": [770337, 771687],
            "filename": "COCO_val2014_000000391895.jpg",
            "imgid": 0,
            "split": "test",
            "sentences": [
                {
                    "tokens": ["a", "man", "with", "a", "red", "helmet"],
                    "raw": "A man with a red helmet on a moped.",
                    "imgid": 0,
                    "sentid": 770337,
                },
                {
                    "tokens": ["man", "riding", "a", "motor", "bike"],
                    "raw": "Man riding a motor bike.",
                    "imgid": 0,
                    "sentid": 771687,
                },
            ],
            "cocoid": 391895,
        },
        {
            "filepath": "train2014",
            "sentids": [787980],
            "filename": "COCO_train2014_000000057870.jpg",
            "imgid": 1,
            "split": "train",
            "sentences": [{"raw": "A restaurant with chairs.", "imgid": 1, "sentid": 787980}],
            "cocoid": 57870,
        },
        {
            "filepath": "val2014",
            "sentids": [681330],
            "filename": "COCO_val2014_000000522418.jpg",
            "imgid": 2,
            "split": "restval",
            "sentences": [{"raw": "A woman cutting a cake.", "imgid": 2, "sentid": 681330}],
            "cocoid": 522418,
        },
    ],
}


def write_json(path: Path, data: object, indent: int | None = 2) -> Path:
    path.write_text(json.dumps(data, indent=indent), encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    """The 1-based line of the first occurrence of `needle` in the file."""
    text = path.read_text()
    return text[: text.index(needle)].count("\n") + 1


# --- COCO captions JSON ---------------------------------------------------------------------


def test_coco_captions_become_rows_with_file_names_from_images(tmp_path):
    rows = parse_coco_captions(write_json(tmp_path / "captions.json", COCO))

    first, cake = "COCO_val2014_000000391895.jpg", "COCO_val2014_000000522418.jpg"
    assert rows == [
        CaptionRow(770337, 391895, first, "A man with a red helmet on a moped."),
        CaptionRow(681330, 522418, cake, "A woman cutting a large cake."),  # text stripped
        CaptionRow(771687, 391895, first, "Man riding a motor bike."),
    ]
    # Image 184613 has no caption: it could never be a positive, so it is left out.
    assert 184613 not in {row.image_id for row in rows}


def bad_coco(change) -> dict:
    data = copy.deepcopy(COCO)
    change(data)
    return data


BAD_COCO = {
    "duplicate image id": (
        lambda d: d["images"].append({"id": 522418, "file_name": "again.jpg"}),
        "images[3].id",
        "image id 522418 repeats images[1]",
    ),
    "duplicate caption id": (
        lambda d: d["annotations"].append({"image_id": 184613, "id": 681330, "caption": "x"}),
        "annotations[3].id",
        "caption id 681330 repeats annotations[1]",
    ),
    "caption of an unknown image": (
        lambda d: d["annotations"].append({"image_id": 999, "id": 1, "caption": "x"}),
        "annotations[3].image_id",
        "image id 999 is not in images",
    ),
    "image id that is not an integer": (
        lambda d: d["images"][2].update(id="one"),
        "images[2].id",
        "must be an integer id, got 'one'",
    ),
    "negative caption id": (
        lambda d: d["annotations"][2].update(id=-4),
        "annotations[2].id",
        "must not be negative",
    ),
    "missing image_id": (
        lambda d: d["annotations"][1].pop("image_id"),
        "annotations[1].image_id",
        "is missing",
    ),
    "empty caption": (
        lambda d: d["annotations"][0].update(caption="  "),
        "annotations[0].caption",
        "is empty",
    ),
    "caption that is not text": (
        lambda d: d["annotations"][0].update(caption=["a"]),
        "annotations[0].caption",
        "must be a string, got a list",
    ),
    "file name missing": (
        lambda d: d["images"][1].pop("file_name"),
        "images[1].file_name",
        "must be a string, got nothing",
    ),
    "annotations not a list": (
        lambda d: d.update(annotations={"a": 1}),
        "annotations",
        "must be a list, got an object",
    ),
    "no annotations at all": (lambda d: d.update(annotations=[]), "annotations", "no caption"),
}


@pytest.mark.parametrize("indent", [2, None], ids=["pretty", "one-line"])
@pytest.mark.parametrize("case", list(BAD_COCO))
def test_bad_coco_file_is_refused_naming_file_line_and_field(tmp_path, case, indent):
    change, field, problem = BAD_COCO[case]
    path = write_json(tmp_path / "captions.json", bad_coco(change), indent=indent)

    with pytest.raises(ImportFileError) as info:
        parse_coco_captions(path)

    message = str(info.value)
    assert message.startswith(f"{path}:")
    assert f"field {field}: " in message
    assert problem in message
    if indent is None:
        assert message.startswith(f"{path}:1: ")


def test_coco_error_line_points_at_the_offending_field(tmp_path):
    data = bad_coco(lambda d: d["annotations"].append({"image_id": 999, "id": 1, "caption": "x"}))
    path = write_json(tmp_path / "captions.json", data)

    with pytest.raises(ImportFileError) as info:
        parse_coco_captions(path)

    line = line_of(path, '"image_id": 999')
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_coco_file_that_is_not_json_names_the_line(tmp_path):
    path = tmp_path / "captions.json"
    path.write_text('{\n  "images": [],\n  "annotations": [,]\n}')
    with pytest.raises(ImportFileError, match=rf"^{path}:3: invalid JSON"):
        parse_coco_captions(path)


def test_coco_file_that_is_not_utf8_names_the_line(tmp_path):
    path = write_json(tmp_path / "captions.json", COCO)
    path.write_bytes(path.read_bytes().replace(b"Man riding", b"Man \xe9 riding"))
    data = path.read_bytes()
    line = data[: data.index(b"\xe9")].count(b"\n") + 1
    with pytest.raises(ImportFileError, match=rf"^{path}:{line}: not UTF-8 text \(byte 0xe9\)"):
        parse_coco_captions(path)


def test_caption_with_a_nul_character_is_refused(tmp_path):
    data = bad_coco(lambda d: d["annotations"][0].update(caption="A\x00B"))
    path = write_json(tmp_path / "captions.json", data)
    with pytest.raises(ImportFileError, match=r"field annotations\[0\]\.caption: holds a NUL"):
        parse_coco_captions(path)


def test_coco_file_that_is_a_list_is_refused(tmp_path):
    path = write_json(tmp_path / "captions.json", [COCO])
    with pytest.raises(ImportFileError, match="must be a JSON object, got a list"):
        parse_coco_captions(path)


# --- Karpathy's dataset_coco.json -----------------------------------------------------------


def test_karpathy_file_gives_sentids_cocoids_and_folder_file_names(tmp_path):
    rows = parse_karpathy(write_json(tmp_path / "dataset_coco.json", KARPATHY))

    assert [(r.caption_id, r.image_id, r.file_name) for r in rows] == [
        (770337, 391895, "val2014/COCO_val2014_000000391895.jpg"),
        (771687, 391895, "val2014/COCO_val2014_000000391895.jpg"),
        (787980, 57870, "train2014/COCO_train2014_000000057870.jpg"),
        (681330, 522418, "val2014/COCO_val2014_000000522418.jpg"),
    ]
    assert rows[0].text == "A man with a red helmet on a moped."


def test_karpathy_split_keeps_only_that_split(tmp_path):
    path = write_json(tmp_path / "dataset_coco.json", KARPATHY)

    assert {r.image_id for r in parse_karpathy(path, split="test")} == {391895}
    assert {r.image_id for r in parse_karpathy(path, split="restval")} == {522418}
    splits = r"no image has split 'val' \(splits here: restval, test, train\)"
    with pytest.raises(ImportFileError, match=splits):
        parse_karpathy(path, split="val")


def test_karpathy_without_cocoid_uses_imgid_as_flickr30k_does(tmp_path):
    data = copy.deepcopy(KARPATHY)
    for image in data["images"]:
        del image["cocoid"], image["filepath"]
    rows = parse_karpathy(write_json(tmp_path / "dataset_flickr30k.json", data))
    assert [(r.image_id, r.file_name) for r in rows][:1] == [(0, "COCO_val2014_000000391895.jpg")]


def bad_karpathy(change) -> dict:
    data = copy.deepcopy(KARPATHY)
    change(data)
    return data


BAD_KARPATHY = {
    "duplicate cocoid": (
        lambda d: d["images"][2].update(cocoid=391895),
        "images[2].cocoid",
        "image id 391895 repeats images[0]",
    ),
    "duplicate sentid across images": (
        lambda d: d["images"][2]["sentences"][0].update(sentid=771687),
        "images[2].sentences[0].sentid",
        "caption id 771687 repeats images[0].sentences[1]",
    ),
    "sentids that disagree with the sentences": (
        lambda d: d["images"][1].update(sentids=[1]),
        "images[1].sentids",
        "lists [1] but the sentences have sentid [787980]",
    ),
    "sentence without raw text": (
        lambda d: d["images"][0]["sentences"][1].pop("raw"),
        "images[0].sentences[1].raw",
        "must be a string, got nothing",
    ),
    "sentid that is not an integer": (
        lambda d: d["images"][1]["sentences"][0].update(sentid="s1"),
        "images[1].sentences[0].sentid",
        "must be an integer id, got 's1'",
    ),
    "image without split": (
        lambda d: d["images"][1].pop("split"),
        "images[1].split",
        "must be a string, got nothing",
    ),
    "sentences not a list": (
        lambda d: d["images"][0].update(sentences=None),
        "images[0].sentences",
        "must be a list, got null",
    ),
}


@pytest.mark.parametrize("case", list(BAD_KARPATHY))
def test_bad_karpathy_file_is_refused_naming_file_line_and_field(tmp_path, case):
    change, field, problem = BAD_KARPATHY[case]
    path = write_json(tmp_path / "dataset_coco.json", bad_karpathy(change))

    with pytest.raises(ImportFileError) as info:
        parse_karpathy(path, split="test")  # a bad image of another split still counts

    message = str(info.value)
    assert message.startswith(f"{path}:")
    assert f"field {field}: {problem}" in message


def test_karpathy_error_line_points_into_the_nested_sentence(tmp_path):
    data = bad_karpathy(lambda d: d["images"][2]["sentences"][0].update(sentid=771687))
    path = write_json(tmp_path / "dataset_coco.json", data)
    with pytest.raises(ImportFileError) as info:
        parse_karpathy(path)
    # The second 771687 in the file is the repeated one (the first is in images[0].sentids).
    text = path.read_text()
    repeated = text.index('"sentid": 771687', text.index('"sentid": 771687') + 1)
    assert str(info.value).startswith(f"{path}:{text[:repeated].count(chr(10)) + 1}: ")


# --- choosing the format ----------------------------------------------------------------------


def test_parse_captions_dispatches_on_format_and_refuses_a_split_outside_karpathy(tmp_path):
    coco = write_json(tmp_path / "c.json", COCO)
    assert len(parse_captions(coco, format="coco")) == 3
    with pytest.raises(ImportFileError, match="unknown captions format 'yaml'"):
        parse_captions(coco, format="yaml")
    with pytest.raises(ImportFileError, match="split applies to the karpathy format only"):
        parse_captions(coco, format="coco", split="test")
    with pytest.raises(ImportFileError, match=r"header must be"):  # a JSON file read as TSV
        parse_captions(coco, format="tsv")


@pytest.mark.django_db
def test_coco_and_karpathy_import_the_same_ids_as_the_tsv(tmp_path):
    coco = dataset_import(
        name="coco", captions_path=write_json(tmp_path / "c.json", COCO), format="coco"
    )
    karpathy = dataset_import(
        name="karpathy",
        captions_path=write_json(tmp_path / "k.json", KARPATHY),
        format="karpathy",
        split="test",
    )

    def pairs(dataset: Dataset) -> set[tuple[int, int]]:
        return set(dataset.captions.values_list("ext_id", "image__ext_id"))

    assert pairs(coco) == {(770337, 391895), (681330, 522418), (771687, 391895)}
    assert pairs(karpathy) == {(770337, 391895), (771687, 391895)}
    assert coco.positive_sets.get().pairs.count() == 3
    assert karpathy.images.get().file_name == "val2014/COCO_val2014_000000391895.jpg"


@pytest.mark.django_db
def test_import_dataset_command_reads_karpathy_with_a_split(tmp_path):
    path = write_json(tmp_path / "dataset_coco.json", KARPATHY)
    out = StringIO()
    call_command(
        "import_dataset", "k5", "--captions", str(path), "--format", "karpathy",
        "--split", "test", stdout=out,
    )  # fmt: skip
    assert out.getvalue().strip() == "imported dataset 'k5': 1 images, 2 captions"

    with pytest.raises(CommandError, match="--split applies to --format karpathy only"):
        call_command("import_dataset", "c", "--captions", str(path), "--split", "test")
    bad = write_json(tmp_path / "bad.json", bad_coco(lambda d: d["images"][0].update(id="x")))
    with pytest.raises(CommandError, match=r"bad\.json:\d+: field images\[0\]\.id: "):
        call_command("import_dataset", "c", "--captions", str(bad), "--format", "coco")
    assert list(Dataset.objects.values_list("name", flat=True)) == ["k5"]
