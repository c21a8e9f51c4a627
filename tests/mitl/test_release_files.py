"""Release files: ECCV-format positives, counts, and a directory that is whole or absent."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import zipfile
from pathlib import Path

import pytest

from mitl.release_files import (
    I2T_FILE,
    JUDGEMENTS_FILE,
    MANIFEST_FILE,
    STATS_FILE,
    T2I_FILE,
    VERDICT_COLUMNS,
    VERDICTS_FILE,
    bundle_checksum_path,
    bundle_path,
    positive_counts,
    positives_by_query,
    write_release_dir,
)

# (image id, caption id)
PAIRS = [(1, 10), (1, 11), (2, 11), (3, 30), (1, 10)]  # the last repeats the first

RELEASE_FILES = {I2T_FILE, T2I_FILE, JUDGEMENTS_FILE, VERDICTS_FILE, STATS_FILE, MANIFEST_FILE}


# --- positives_by_query ------------------------------------------------------------------------


def test_image_queries_list_their_positive_captions_sorted_and_without_repeats():
    i2t, _ = positives_by_query(PAIRS, image_queries=[2, 1], caption_queries=[])
    assert i2t == {"1": [10, 11], "2": [11]}


def test_caption_queries_use_the_same_pairs_the_other_way_round():
    _, t2i = positives_by_query(PAIRS, image_queries=[], caption_queries=[11, 30, 10])
    assert t2i == {"10": [1], "11": [1, 2], "30": [3]}


def test_a_query_without_a_positive_is_listed_with_an_empty_list():
    i2t, t2i = positives_by_query(PAIRS, image_queries=[1, 99], caption_queries=[77])
    assert i2t["99"] == []
    assert t2i == {"77": []}


def test_only_the_asked_queries_appear_with_string_keys_in_sorted_order():
    i2t, t2i = positives_by_query(PAIRS, image_queries=[3, 1], caption_queries=[11])
    assert list(i2t) == ["1", "3"]  # image 2 has positives but was not asked
    assert list(t2i) == ["11"]
    assert all(isinstance(key, str) for key in [*i2t, *t2i])


def test_numeric_order_of_keys_is_kept_for_multi_digit_ids():
    i2t, _ = positives_by_query([], image_queries=[10, 9, 100], caption_queries=[])
    assert list(i2t) == ["9", "10", "100"]


def test_pairs_may_be_a_generator_used_for_both_directions():
    i2t, t2i = positives_by_query((pair for pair in PAIRS), image_queries=[1], caption_queries=[11])
    assert i2t == {"1": [10, 11]}
    assert t2i == {"11": [1, 2]}


def test_the_result_is_json_serialisable_unchanged():
    i2t, t2i = positives_by_query(PAIRS, image_queries=[1, 2, 3], caption_queries=[10, 11])
    assert json.loads(json.dumps([i2t, t2i])) == [i2t, t2i]


# --- positive_counts ---------------------------------------------------------------------------


def test_positive_counts_compare_before_and_after():
    before = {"1": [10], "2": [20], "3": [], "4": [40]}
    after = {"1": [10, 11, 12], "2": [20, 21], "3": [30], "4": [40, 41, 42]}
    counts = positive_counts(before, after)
    assert counts["queries"] == 4
    assert counts["positives_original"] == 3
    assert counts["positives_extended"] == 9
    assert counts["per_query_original"] == pytest.approx(0.75)
    assert counts["per_query_extended"] == pytest.approx(2.25)
    assert counts["factor"] == pytest.approx(3.0)


def test_the_factor_is_not_a_number_without_original_positives():
    counts = positive_counts({"1": []}, {"1": [5]})
    assert math.isnan(counts["factor"])
    assert counts["positives_extended"] == 1


def test_counts_of_an_empty_release_do_not_divide_by_zero():
    counts = positive_counts({}, {})
    assert counts["queries"] == 0
    assert counts["per_query_original"] == 0
    assert counts["per_query_extended"] == 0


# --- write_release_dir -------------------------------------------------------------------------

I2T = {"1": [10, 11], "2": []}
T2I = {"10": [1], "11": [1, 2]}
JUDGEMENTS = [
    {"image": 1, "caption": 11, "level": "yes", "worker": "w1"},
    {"image": 2, "caption": 11, "level": "weak_yes", "worker": "w2"},
]
STATS = {"factor": 1.5, "queries": 4}
MANIFEST = {"release": "v1", "batch": 3}


def write(final_dir: Path, **overrides):
    arguments = {
        "i2t": I2T,
        "t2i": T2I,
        "judgements": JUDGEMENTS,
        "stats": STATS,
        "manifest": MANIFEST,
    }
    arguments.update(overrides)
    return write_release_dir(final_dir, **arguments)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_release_holds_exactly_the_six_standard_files(tmp_path):
    final = tmp_path / "releases" / "v1"
    write(final)
    assert {path.name for path in final.iterdir()} == RELEASE_FILES


def test_the_release_files_hold_what_was_given(tmp_path):
    final = tmp_path / "v1"
    write(final)
    assert json.loads((final / I2T_FILE).read_text()) == I2T
    assert json.loads((final / T2I_FILE).read_text()) == T2I
    assert json.loads((final / STATS_FILE).read_text()) == STATS
    lines = (final / JUDGEMENTS_FILE).read_text().splitlines()
    assert [json.loads(line) for line in lines] == JUDGEMENTS


def test_the_manifest_records_the_sha256_and_size_of_every_other_file(tmp_path):
    final = tmp_path / "v1"
    returned = write(final)
    manifest = json.loads((final / MANIFEST_FILE).read_text())
    assert manifest == returned
    assert set(manifest["files"]) == RELEASE_FILES - {MANIFEST_FILE}
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256(final / name)
        assert entry["bytes"] == (final / name).stat().st_size


def test_the_manifest_keeps_the_given_fields(tmp_path):
    manifest = write(tmp_path / "v1")
    assert manifest["release"] == "v1"
    assert manifest["batch"] == 3


def test_the_hashes_change_when_the_content_changes(tmp_path):
    first = write(tmp_path / "a")
    second = write(tmp_path / "b", judgements=[*JUDGEMENTS, {"image": 9, "caption": 9}])
    assert first["files"][I2T_FILE] == second["files"][I2T_FILE]
    assert first["files"][JUDGEMENTS_FILE]["sha256"] != second["files"][JUDGEMENTS_FILE]["sha256"]


def test_the_same_content_gives_byte_identical_files(tmp_path):
    write(tmp_path / "a")
    write(tmp_path / "b", stats=dict(reversed(list(STATS.items()))))
    for name in RELEASE_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_an_empty_judgement_stream_gives_an_empty_jsonl_file(tmp_path):
    final = tmp_path / "v1"
    manifest = write(final, judgements=iter(()))
    assert (final / JUDGEMENTS_FILE).read_text() == ""
    assert manifest["files"][JUDGEMENTS_FILE]["bytes"] == 0


def test_an_existing_release_directory_is_refused_and_left_alone(tmp_path):
    final = tmp_path / "v1"
    final.mkdir()
    (final / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match="v1"):
        write(final)
    assert [path.name for path in final.iterdir()] == ["keep.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["v1"]


def test_an_existing_zip_at_the_bundle_path_is_refused_and_nothing_is_written(tmp_path):
    bundle_path(tmp_path / "v1").write_bytes(b"an old zip")
    with pytest.raises(FileExistsError, match=r"v1\.zip"):
        write(tmp_path / "v1")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["v1.zip"]
    assert (tmp_path / "v1.zip").read_bytes() == b"an old zip"


def test_an_existing_file_at_the_release_path_is_refused(tmp_path):
    final = tmp_path / "v1"
    final.write_text("not a directory")
    with pytest.raises(FileExistsError):
        write(final)
    assert final.read_text() == "not a directory"


def failing_judgements():
    yield JUDGEMENTS[0]
    raise RuntimeError("database went away")


def test_a_failure_midway_leaves_no_directory_and_no_staging_directory(tmp_path):
    parent = tmp_path / "releases"
    parent.mkdir()
    (parent / "v0").mkdir()  # an earlier release must survive
    with pytest.raises(RuntimeError, match="database went away"):
        write(parent / "v1", judgements=failing_judgements())
    assert [path.name for path in parent.iterdir()] == ["v0"]  # hidden staging dirs included


def test_a_late_failure_while_writing_stats_also_leaves_nothing(tmp_path):
    parent = tmp_path / "releases"
    parent.mkdir()
    with pytest.raises(TypeError):
        write(parent / "v1", stats={"not json": object()})
    assert list(parent.iterdir()) == []


def test_a_failure_in_the_manifest_leaves_nothing(tmp_path):
    parent = tmp_path / "releases"
    parent.mkdir()
    with pytest.raises(TypeError):
        write(parent / "v1", manifest={"created_by": object()})
    assert list(parent.iterdir()) == []


def test_the_release_can_be_written_after_a_failed_attempt(tmp_path):
    final = tmp_path / "v1"
    with pytest.raises(RuntimeError):
        write(final, judgements=failing_judgements())
    write(final)
    assert {path.name for path in final.iterdir()} == RELEASE_FILES


def test_the_release_directory_is_readable_by_others(tmp_path):
    final = tmp_path / "v1"
    write(final)
    assert final.stat().st_mode & 0o777 == 0o755


# --- verdicts.csv, extra files and the zip -----------------------------------------------------

VERDICTS = [
    {
        "image_id": 1,
        "caption_id": 11,
        "rule": "eccv",
        "is_positive": 1,
        "score": 0.75,
        "confidence": 1.0,
        "n_judgements": 2,
        "yes": 1,
        "weak_yes": 1,
        "weak_no": 0,
        "no": 0,
        "batches": "3",
        "rounds": "3:0",
        "ignored": "not a column",
    }
]


def test_verdicts_csv_has_the_fixed_header_and_one_row_per_verdict(tmp_path):
    final = tmp_path / "v1"
    write(final, verdicts=VERDICTS)
    text = (final / VERDICTS_FILE).read_text()
    assert text.splitlines()[0] == (
        "image_id,caption_id,rule,is_positive,score,confidence,n_judgements,yes,weak_yes,weak_no,no,"
        "batches,rounds"
    )
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows == [{column: str(VERDICTS[0][column]) for column in VERDICT_COLUMNS}]


def test_without_verdicts_the_csv_holds_only_its_header(tmp_path):
    write(tmp_path / "v1")
    assert (tmp_path / "v1" / VERDICTS_FILE).read_text() == ",".join(VERDICT_COLUMNS) + "\n"


def test_extra_text_and_report_files_join_the_release_and_the_manifest(tmp_path):
    final = tmp_path / "v1"
    manifest = write(
        final,
        reports={"diversity.json": {"i2t": {}}},
        text_files={"README.md": "# hello\n", "bias_report.html": "<html></html>"},
    )
    assert (final / "README.md").read_text() == "# hello\n"
    assert (final / "bias_report.html").read_text() == "<html></html>"
    assert {"README.md", "bias_report.html", "diversity.json"} <= set(manifest["files"])


@pytest.mark.parametrize("name", ["../escape.txt", "sub/file.txt", ".hidden", "", STATS_FILE])
def test_an_extra_file_name_that_is_a_path_hidden_or_standard_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="plain file name"):
        write(tmp_path / "v1", text_files={name: "x"})
    assert list(tmp_path.iterdir()) == []


def test_a_name_given_both_as_report_and_as_text_is_refused(tmp_path):
    with pytest.raises(ValueError, match="given twice"):
        write(tmp_path / "v1", reports={"a.json": {}}, text_files={"a.json": "{}"})


def test_the_zip_beside_the_release_holds_every_file_under_one_folder(tmp_path):
    final = tmp_path / "small" / "3"
    write(final, text_files={"README.md": "# r\n"}, bundle_root="small-v3")
    zip_path = bundle_path(final)
    assert zip_path == tmp_path / "small" / "3.zip"
    with zipfile.ZipFile(zip_path) as bundle:
        assert bundle.testzip() is None
        names = bundle.namelist()
        assert sorted(names) == sorted(f"small-v3/{path.name}" for path in final.iterdir())
        for path in final.iterdir():
            assert bundle.read(f"small-v3/{path.name}") == path.read_bytes()


def test_the_zip_checksum_file_matches_the_zip(tmp_path):
    final = tmp_path / "v1"
    write(final)
    digest, name = bundle_checksum_path(final).read_text().split()
    assert name == "v1.zip"
    assert digest == sha256(bundle_path(final))


def test_the_same_content_gives_a_byte_identical_zip(tmp_path):
    write(tmp_path / "a" / "1", bundle_root="r-v1")
    write(tmp_path / "b" / "1", bundle_root="r-v1")
    assert (tmp_path / "a" / "1.zip").read_bytes() == (tmp_path / "b" / "1.zip").read_bytes()


def test_a_failure_leaves_no_zip_and_no_checksum_either(tmp_path):
    parent = tmp_path / "releases"
    parent.mkdir()
    with pytest.raises(RuntimeError):
        write(parent / "1", judgements=failing_judgements())
    with pytest.raises(TypeError):
        write(parent / "1", manifest={"created_by": object()})
    assert list(parent.iterdir()) == []
