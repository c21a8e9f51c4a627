"""Positive sets from a Crisscrossed Captions SITS file: threshold, queries, unknown ids,
all-or-nothing, and the `import_positives --cxc` command line."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ServiceError
from annotation.imports.datasets import dataset_import_tsv
from annotation.imports.positives import positives_import, positives_import_cxc
from annotation.models import Dataset, PositivePair, PositiveSet
from mitl.formats.common import ImportFileError

pytestmark = pytest.mark.django_db

TSV = [
    "caption_id\timage_id\tfile_name\tcaption",
    "11\t1\tCOCO_val2014_000000000001.jpg\tA red circle.",
    "12\t1\tCOCO_val2014_000000000001.jpg\tA circle.",
    "21\t2\tCOCO_val2014_000000000002.jpg\tA blue square.",
    "22\t2\tCOCO_val2014_000000000002.jpg\tA square.",
    "31\t3\tCOCO_val2014_000000000003.jpg\tThree stars.",
]
HEADER = "caption,image,agg_score,sampling_method"


def row(caption: int, image: int, score: float, method: str = "c2i_intrasim") -> str:
    return f"COCO_val2014:sentid:{caption},COCO_val2014_{image:012d}.jpg,{score},{method}"


RATINGS = [
    row(11, 1, 4.9, "c2i_original"),
    row(12, 1, 2.5, "c2i_original"),  # an original pair rated below 3: not a CxC positive
    row(21, 1, 3.0),  # exactly 3 counts
    row(31, 2, 2.99),
    row(22, 3, 4.2),
]


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    tsv = tmp_path / "captions.tsv"
    tsv.write_text("\n".join(TSV) + "\n", encoding="utf-8")
    return dataset_import_tsv(name="tiny", captions_path=tsv)


def write_sits(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def pairs_of(positive_set: PositiveSet) -> set[tuple[int, int]]:
    return set(positive_set.pairs.values_list("image__ext_id", "caption__ext_id"))


def test_pairs_rated_3_or_more_become_the_set(dataset, tmp_path):
    positive_set, dropped = positives_import_cxc(
        dataset=dataset, label="cxc", path=write_sits(tmp_path / "sits_test.csv", RATINGS)
    )

    assert (positive_set.name, positive_set.source) == ("cxc", "imported")
    assert pairs_of(positive_set) == {(1, 11), (1, 21), (3, 22)}
    assert dropped == 0
    assert "sits_test.csv" in positive_set.description


def test_the_queries_are_every_image_and_caption_the_file_rates(dataset, tmp_path):
    positive_set, _ = positives_import_cxc(
        dataset=dataset, label="cxc", path=write_sits(tmp_path / "s.csv", RATINGS)
    )
    # Caption 31 and image 2 are rated only below the threshold: still covered.
    assert positive_set.queries == {"i2t": [1, 2, 3], "t2i": [11, 12, 21, 22, 31]}


def test_a_lower_threshold_admits_more_pairs(dataset, tmp_path):
    positive_set, _ = positives_import_cxc(
        dataset=dataset, label="cxc", path=write_sits(tmp_path / "s.csv", RATINGS), min_score=2.5
    )
    assert pairs_of(positive_set) == {(1, 11), (1, 12), (1, 21), (2, 31), (3, 22)}


@pytest.mark.parametrize("min_score", [-0.5, 5.5, float("nan")])
def test_a_threshold_outside_the_rating_scale_is_refused(dataset, tmp_path, min_score):
    path = write_sits(tmp_path / "s.csv", RATINGS)
    with pytest.raises(ServiceError, match="between 0 and 5"):
        positives_import_cxc(dataset=dataset, label="cxc", path=path, min_score=min_score)
    assert not PositiveSet.objects.filter(name="cxc").exists()


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        (row(99, 1, 4.0), "caption", "caption id 99"),
        (row(11, 7, 1.0), "image", "image id 7"),  # refused even when rated low
    ],
)
def test_unknown_ids_are_refused_naming_line_and_field(dataset, tmp_path, extra, field, message):
    path = write_sits(tmp_path / "s.csv", [*RATINGS, extra])
    with pytest.raises(ImportFileError) as info:
        positives_import_cxc(dataset=dataset, label="cxc", path=path)
    text = str(info.value)
    assert text.startswith(f"{path}:7: field {field}: {message} is not in dataset 'tiny'")
    assert "1 of 6 rows" in text and "--ignore-unknown" in text
    assert not PositiveSet.objects.filter(name="cxc").exists()


def test_ignore_unknown_drops_their_rows_and_counts_the_positives_dropped(dataset, tmp_path):
    unknown = [row(99, 1, 4.0), row(98, 2, 1.0), row(11, 7, 3.5)]
    path = write_sits(tmp_path / "s.csv", [*RATINGS, *unknown])
    positive_set, dropped = positives_import_cxc(
        dataset=dataset, label="cxc", path=path, ignore_unknown=True
    )
    assert dropped == 2  # (1, 99) and (7, 11); (2, 98) was no positive anyway
    assert pairs_of(positive_set) == {(1, 11), (1, 21), (3, 22)}
    assert positive_set.queries == {"i2t": [1, 2, 3], "t2i": [11, 12, 21, 22, 31]}


def test_a_failing_write_leaves_no_set_behind(dataset, tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(PositivePair.objects, "bulk_create", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        positives_import_cxc(
            dataset=dataset, label="cxc", path=write_sits(tmp_path / "s.csv", RATINGS)
        )
    assert list(dataset.positive_sets.values_list("name", flat=True)) == ["original"]


def test_a_bad_row_anywhere_leaves_no_set_behind(dataset, tmp_path):
    path = write_sits(tmp_path / "s.csv", [*RATINGS, "COCO_val2014:sentid:12,x.jpg,4,c2i"])
    with pytest.raises(ImportFileError, match=rf"{path}:7: field image"):
        positives_import_cxc(dataset=dataset, label="cxc", path=path)
    assert list(dataset.positive_sets.values_list("name", flat=True)) == ["original"]


def test_the_set_name_must_be_new(dataset, tmp_path):
    path = write_sits(tmp_path / "s.csv", RATINGS)
    with pytest.raises(ServiceError, match="already has a positive set named 'original'"):
        positives_import_cxc(dataset=dataset, label="original", path=path)


# --- one dispatch for the command and the import jobs ----------------------------------------


def test_positives_import_chooses_cxc_by_its_file_with_the_default_threshold(dataset, tmp_path):
    path = write_sits(tmp_path / "s.csv", RATINGS)
    positive_set, dropped = positives_import(dataset_name="tiny", label="cxc", cxc_path=path)
    assert pairs_of(positive_set) == {(1, 11), (1, 21), (3, 22)} and dropped == 0


def test_positives_import_checks_the_files_before_the_dataset(tmp_path):
    with pytest.raises(ServiceError, match="needs both --i2t and --t2i"):
        positives_import(dataset_name="nope", label="x", i2t_path=tmp_path / "i2t.json")
    with pytest.raises(ServiceError, match="no dataset named 'nope'"):
        positives_import(dataset_name="nope", label="x", cxc_path=tmp_path / "s.csv")


# --- command line --------------------------------------------------------------------------


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_positives", "tiny", *args, stdout=out)
    return out.getvalue().strip()


def test_command_imports_a_cxc_file_with_the_default_threshold(dataset, tmp_path):
    path = write_sits(tmp_path / "s.csv", RATINGS)
    assert run("--source", "cxc", "--cxc", str(path)) == (
        "imported positive set 'cxc': 3 pairs, 3 image and 5 caption queries"
    )


def test_command_takes_a_min_score_and_reports_dropped_pairs(dataset, tmp_path):
    path = write_sits(tmp_path / "s.csv", [*RATINGS, row(99, 1, 4.0)])
    report = run("--source", "cxc", "--cxc", str(path), "--min-score", "2.5", "--ignore-unknown")
    assert report.splitlines() == [
        "imported positive set 'cxc': 5 pairs, 3 image and 5 caption queries",
        "dropped 1 pairs with ids unknown to 'tiny'",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give either --i2t and --t2i"),
        (["--cxc", "s.csv", "--i2t", "i2t.json"], "give either --i2t and --t2i"),
        (["--i2t", "i2t.json"], "needs both --i2t and --t2i"),
        (["--i2t", "a.json", "--t2i", "b.json", "--min-score", "2"], "--cxc only"),
    ],
)
def test_command_refuses_a_mix_of_formats(dataset, args, message):
    with pytest.raises(CommandError, match=message):
        run("--source", "cxc", *args)
    assert not PositiveSet.objects.filter(name="cxc").exists()


def test_command_turns_a_bad_file_into_a_command_error(dataset, tmp_path):
    path = write_sits(tmp_path / "s.csv", [row(11, 1, 9.0)])
    with pytest.raises(CommandError, match=rf"{path}:2: field agg_score must be between 0 and 5"):
        run("--source", "cxc", "--cxc", str(path))
    with pytest.raises(CommandError, match="between 0 and 5"):
        run("--source", "cxc", "--cxc", str(path), "--min-score", "6")
