"""A release on disk: every file, the zip, merged imported sets, extra files, and the rules."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import zipfile
from collections import defaultdict
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ServiceError
from annotation.models import (
    Batch,
    Caption,
    Judgement,
    PositivePair,
    PositiveSet,
    Release,
    Verdict,
)
from annotation.synthetic import synthetic_regenerate
from mitl.aggregation import PAIR_RULES, eccv_verdict
from mitl.config import batch_config
from mitl.judgements import Level
from mitl.release_files import VERDICT_COLUMNS, bundle_checksum_path, bundle_path
from mitl.synthetic.truth import judge
from pipeline.bias import bias_report_build
from pipeline.progress import StageTracker
from pipeline.release import release_create
from pipeline.simulate import crowd_simulate
from pipeline.stages import batch_create, batch_run_until

BUNDLE_FILES = {
    "image_to_caption.json",
    "caption_to_image.json",
    "judgements.jsonl",
    "verdicts.csv",
    "qrels_i2t.txt",
    "qrels_t2i.txt",
    "stats.json",
    "README.md",
    "manifest.json",
    "diversity.json",
    "bias_report.html",
    "bias_report.json",
}


def released(batch: Batch, **simulate_options) -> Release:
    """Run the batch to the end with a simulated crowd; return its release."""
    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    batch = Batch.objects.select_related("dataset").get(pk=batch.pk)
    tracker = StageTracker(batch=batch, stage="annotating")
    crowd_simulate(batch=batch, config=batch_config(batch), tracker=tracker, **simulate_options)
    assert batch_run_until(batch_id=batch.pk, until="released", force=True) == "released"
    return Release.objects.get(batches=batch)


def read_qrels(path: Path) -> dict[tuple[int, int], int]:
    rows = {}
    for line in path.read_text().splitlines():
        query, zero, doc, grade = line.split()
        assert zero == "0"
        rows[(int(query), int(doc))] = int(grade)
    return rows


def positives_of(folder: Path, file_name: str) -> set[tuple[int, int]]:
    data = json.loads((folder / file_name).read_text())
    return {(int(query), doc) for query, docs in data.items() for doc in docs}


# --- the files -------------------------------------------------------------------------------


def test_a_release_writes_every_file_and_a_zip_of_them(batch):
    release = released(batch)
    folder = Path(release.path)
    assert {path.name for path in folder.iterdir()} == BUNDLE_FILES
    assert set(release.manifest["files"]) == BUNDLE_FILES - {"manifest.json"}

    zip_path = bundle_path(folder)
    assert zip_path == folder.parent / "1.zip"
    digest, name = bundle_checksum_path(folder).read_text().split()
    assert (digest, name) == (hashlib.sha256(zip_path.read_bytes()).hexdigest(), "1.zip")
    with zipfile.ZipFile(zip_path) as bundle:
        assert sorted(bundle.namelist()) == sorted(f"small-v1/{name}" for name in BUNDLE_FILES)
        for name in BUNDLE_FILES:
            assert bundle.read(f"small-v1/{name}") == (folder / name).read_bytes()


def test_the_release_carries_the_batch_bias_report_as_json_and_standalone_html(batch):
    release = released(batch)
    folder = Path(release.path)
    saved = json.loads((folder / "bias_report.json").read_text())
    now = json.loads(json.dumps(bias_report_build(batch=batch)))
    assert saved.pop("batch")["id"] == now.pop("batch")["id"] == batch.pk  # state moved on
    assert saved == now
    html = (folder / "bias_report.html").read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # standalone: nothing fetched


def test_the_eccv_files_inside_the_zip_load_in_eccv_caption(batch, tmp_path):
    from eccv_caption import Metrics

    release = released(batch)
    with zipfile.ZipFile(bundle_path(Path(release.path))) as bundle:
        bundle.extractall(tmp_path)
    unpacked = tmp_path / "small-v1"
    manifest = json.loads((unpacked / "manifest.json").read_text())
    for name, meta in manifest["files"].items():
        assert hashlib.sha256((unpacked / name).read_bytes()).hexdigest() == meta["sha256"]
    metrics = Metrics()
    metrics.set_eccv_gts(
        str(unpacked / "image_to_caption.json"), str(unpacked / "caption_to_image.json")
    )
    assert len(metrics.eccv_gts["i2t"]) == 8 and len(metrics.eccv_gts["t2i"]) == 8


def test_verdicts_csv_holds_every_verdict_with_its_counts(batch):
    release = released(batch)
    text = (Path(release.path) / "verdicts.csv").read_text()
    assert text.splitlines()[0] == ",".join(VERDICT_COLUMNS)
    rows = {
        (int(r["image_id"]), int(r["caption_id"])): r for r in csv.DictReader(io.StringIO(text))
    }
    verdicts = Verdict.objects.filter(candidate__batch=batch).select_related(
        "candidate__image", "candidate__caption"
    )
    assert len(rows) == verdicts.count() > 0
    for verdict in verdicts:
        row = rows[(verdict.candidate.image.ext_id, verdict.candidate.caption.ext_id)]
        assert row["rule"] == "eccv"
        assert row["is_positive"] == str(int(verdict.is_positive))
        assert float(row["score"]) == pytest.approx(verdict.score, abs=1e-6)
        assert float(row["confidence"]) == pytest.approx(verdict.confidence, abs=1e-6)
        assert int(row["n_judgements"]) == verdict.n_judgements
        counts = {level: int(row[level]) for level in ("yes", "weak_yes", "weak_no", "no")}
        assert counts == verdict.distribution


def test_qrels_grade_the_released_positives_and_list_the_judged_negatives(batch):
    release = released(batch)
    folder = Path(release.path)
    scores = {}
    for image, caption, score in Verdict.objects.filter(candidate__batch=batch).values_list(
        "candidate__image__ext_id", "candidate__caption__ext_id", "score"
    ):
        scores[(image, caption)] = score
    for direction, file_name in (
        ("i2t", "image_to_caption.json"),
        ("t2i", "caption_to_image.json"),
    ):
        qrels = read_qrels(folder / f"qrels_{direction}.txt")
        positives = positives_of(folder, file_name)
        assert {pair for pair, grade in qrels.items() if grade >= 1} == positives
        assert set(qrels.values()) <= {0, 1, 2, 3}
        for (query, doc), grade in qrels.items():
            pair = (query, doc) if direction == "i2t" else (doc, query)
            if pair not in scores:
                assert grade == 3  # a known positive without a verdict
            elif grade == 0:
                assert (query, doc) not in positives
    assert any(grade == 0 for grade in read_qrels(folder / "qrels_i2t.txt").values())


def test_the_datasheet_describes_this_release(batch):
    release = released(batch)
    text = (Path(release.path) / "README.md").read_text()
    assert text.startswith("# small v1\n")
    assert "`eccv`" in text and "`human`" in text
    stats = json.loads((Path(release.path) / "stats.json").read_text())
    assert f"judgements: {stats['judgements']}" in text


def test_the_manifest_records_sources_rule_and_counts(batch):
    release = released(batch)
    manifest = release.manifest
    assert manifest["sources"] == ["original", "human"]
    assert [s["source"] for s in manifest["source_sets"]] == ["original", "human"]
    human = PositivePair.objects.filter(positive_set__name=f"human-batch-{batch.pk}")
    assert manifest["source_sets"][1]["pairs"] == human.count()
    assert (manifest["rule"], manifest["rules"]) == ("eccv", {str(batch.pk): "eccv"})
    assert (
        manifest["counts"]["judgements"]
        == Judgement.objects.filter(assignment__hit__batch=batch).count()
    )
    assert manifest["counts"]["i2t"]["queries"] == 8


# --- merging an imported set, extra files ------------------------------------------------------


def imported_set(batch: Batch, name: str = "cxc") -> tuple[PositiveSet, tuple[int, int]]:
    """An imported set with one pair that no other set holds: (image query, foreign caption)."""
    query = batch.queries.filter(direction="i2t").select_related("image").order_by("pk").first()
    known = set(
        PositivePair.objects.filter(positive_set__dataset=batch.dataset).values_list(
            "image_id", "caption_id"
        )
    )
    caption = next(
        c
        for c in Caption.objects.filter(dataset=batch.dataset).exclude(image=query.image)
        if (query.image_id, c.pk) not in known
    )
    positive_set = PositiveSet.objects.create(
        dataset=batch.dataset, name=name, source="imported", description="from elsewhere"
    )
    PositivePair.objects.create(positive_set=positive_set, image=query.image, caption=caption)
    return positive_set, (query.image.ext_id, caption.ext_id)


def test_an_included_imported_set_joins_the_positives_at_the_top_grade(batch):
    first = released(batch)
    _, (image, caption) = imported_set(batch)
    assert (image, caption) not in positives_of(Path(first.path), "image_to_caption.json")

    second = release_create(batch=batch, config=batch_config(batch), include_sets=["cxc"])

    folder = Path(second.path)
    assert (image, caption) in positives_of(folder, "image_to_caption.json")
    assert read_qrels(folder / "qrels_i2t.txt")[(image, caption)] == 3
    assert second.manifest["sources"] == ["original", "human", "cxc"]
    assert second.manifest["source_sets"][2] == {
        "name": "cxc",
        "source": "imported",
        "description": "from elsewhere",
        "pairs": 1,
    }
    assert "| `cxc` |" in (folder / "README.md").read_text()


def test_an_unknown_or_not_imported_set_is_refused_before_anything_is_written(batch, settings):
    released(batch)
    imported_set(batch, name="cxc")
    for name in ("nope", "original"):
        with pytest.raises(ServiceError, match=f"no imported positive set '{name}'.*cxc"):
            release_create(batch=batch, config=batch_config(batch), include_sets=[name])
    assert Release.objects.count() == 1
    assert sorted(p.name for p in (settings.RELEASES_DIR / "small").iterdir()) == [
        "1",
        "1.zip",
        "1.zip.sha256",
    ]


def test_extra_files_join_the_release_its_zip_and_its_manifest(batch):
    released(batch)
    html = "<!doctype html><title>bias</title>"
    release = release_create(
        batch=batch, config=batch_config(batch), extra_files={"reviewer_notes.html": html}
    )
    folder = Path(release.path)
    assert (folder / "reviewer_notes.html").read_text() == html
    assert "reviewer_notes.html" in release.manifest["files"]
    assert "- `reviewer_notes.html`:" in (folder / "README.md").read_text()
    with zipfile.ZipFile(bundle_path(folder)) as bundle:
        assert bundle.read("small-v2/reviewer_notes.html").decode() == html


def test_an_extra_file_may_not_replace_a_generated_one(batch):
    released(batch)
    with pytest.raises(ServiceError, match=r"README\.md"):
        release_create(batch=batch, config=batch_config(batch), extra_files={"README.md": "mine"})


def test_a_stray_zip_on_disk_moves_the_next_version_on(batch, settings):
    folder = settings.RELEASES_DIR / "small"
    folder.mkdir(parents=True)
    (folder / "1.zip").write_bytes(b"left from an earlier database")
    release = released(batch)
    assert release.version == 2
    assert (folder / "1.zip").read_bytes() == b"left from an earlier database"


# --- invalid captions --------------------------------------------------------------------------


def test_invalid_captions_leave_verdicts_and_qrels_and_are_listed_with_reasons(batch):
    first = released(batch)
    judged = Verdict.objects.filter(candidate__batch=batch).select_related("candidate__caption")
    caption = judged.order_by("pk").first().candidate.caption
    Caption.objects.filter(pk=caption.pk).update(is_invalid=True, invalid_reason="meaningless")

    second = release_create(batch=batch, config=batch_config(batch))

    folder = Path(second.path)
    rows = list(csv.DictReader(io.StringIO((folder / "verdicts.csv").read_text())))
    assert caption.ext_id not in {int(r["caption_id"]) for r in rows}
    assert len(rows) == judged.count() - judged.filter(candidate__caption=caption).count()
    for direction in ("i2t", "t2i"):
        pairs = read_qrels(folder / f"qrels_{direction}.txt")
        captions = {doc if direction == "i2t" else query for query, doc in pairs}
        assert caption.ext_id not in captions
    entry = {
        "caption_id": caption.ext_id,
        "image_id": caption.image.ext_id,
        "reason": "meaningless",
        "marked_at": None,
    }
    assert second.manifest["invalid_captions"] == [entry]
    assert second.manifest["invalid_captions_excluded"] == [caption.ext_id]
    assert "leaves out 1 (1 meaningless)" in (folder / "README.md").read_text()
    assert first.manifest["invalid_captions"] == []  # the earlier release does not change


def test_work_counts_leave_out_the_judgements_and_verdicts_on_invalid_captions(batch):
    released(batch)
    judgements = Judgement.objects.filter(assignment__hit__batch=batch)
    caption = judgements.filter(item__role="task").order_by("pk").first().item.caption
    Caption.objects.filter(pk=caption.pk).update(is_invalid=True, invalid_reason="meaningless")
    on_caption = judgements.filter(item__caption=caption).count()
    verdicts_on_caption = Verdict.objects.filter(candidate__caption=caption).count()
    assert on_caption and verdicts_on_caption

    release = release_create(batch=batch, config=batch_config(batch))

    folder = Path(release.path)
    stats = json.loads((folder / "stats.json").read_text())
    assert stats["judgements"] == judgements.count() - on_caption
    assert stats["judgements_on_invalid_captions"] == on_caption
    verdict_rows = list(csv.DictReader(io.StringIO((folder / "verdicts.csv").read_text())))
    assert stats["verdicts"]["positive"] + stats["verdicts"]["negative"] == len(verdict_rows)
    assert stats["verdicts"]["positive"] == sum(r["is_positive"] == "1" for r in verdict_rows)
    assert stats["verdicts_on_invalid_captions"] == verdicts_on_caption
    # the raw answers keep every judgement, those on the invalid caption included
    lines = (folder / "judgements.jsonl").read_text().splitlines()
    assert len(lines) == stats["judgements"] + stats["judgements_on_invalid_captions"]
    assert release.manifest["counts"]["judgements"] == stats["judgements"]
    assert release.manifest["counts"]["judgements_on_invalid_captions"] == on_caption
    text = (folder / "README.md").read_text()
    assert f"judgements: {stats['judgements']};" in text
    assert (
        f"leave out the {on_caption} judgements and {verdicts_on_caption} verdicts on them" in text
    )


# --- the rules, end to end ---------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["strict", "graded"])
def test_verdicts_follow_the_batch_rule_over_approved_answers(
    dataset, annotators, small_config, rule
):
    batch = batch_create(
        dataset=dataset, name=rule, raw_config={**small_config, "aggregation": rule}
    )
    release = released(batch)

    levels: dict[int, list[str]] = defaultdict(list)
    for candidate_id, level in Judgement.objects.filter(
        assignment__hit__batch=batch, assignment__status="approved", item__role="task"
    ).values_list("item__candidate_id", "level"):
        levels[candidate_id].append(level)
    verdicts = {v.candidate_id: v for v in Verdict.objects.filter(candidate__batch=batch)}
    assert verdicts.keys() == levels.keys()
    for candidate_id, answers in levels.items():
        expected = PAIR_RULES[rule](answers)
        verdict = verdicts[candidate_id]
        assert verdict.rule == rule
        assert verdict.is_positive is expected.is_positive
        assert verdict.confidence == pytest.approx(expected.confidence)
    assert (release.rule, release.manifest["rule"]) == (rule, rule)


def test_a_dawid_skene_batch_gets_posterior_verdicts_that_match_the_truth(
    dataset, annotators, small_config
):
    config = {**small_config, "aggregation": "dawid_skene", "assignments_per_hit": 3}
    batch = batch_create(dataset=dataset, name="ds", raw_config=config)
    release = released(batch, n_workers=6, seed=2)

    generated = synthetic_regenerate(dataset=dataset)
    verdicts = Verdict.objects.filter(candidate__batch=batch).select_related(
        "candidate__image", "candidate__caption"
    )
    assert verdicts.exists() and {v.rule for v in verdicts} == {"dawid_skene"}
    correct = majority_correct = 0
    for verdict in verdicts:
        assert 0.5 <= verdict.confidence <= 1.0
        truth = judge(
            generated.scene(verdict.candidate.image.ext_id),
            generated.caption(verdict.candidate.caption.ext_id),
        )
        correct += verdict.is_positive == truth.is_positive
        answers = Judgement.objects.filter(
            item__candidate=verdict.candidate, assignment__status="approved"
        ).values_list("level", flat=True)
        majority = eccv_verdict([Level(level) for level in answers])
        majority_correct += majority.is_positive == truth.is_positive
    # With 1 to 3 answers a pair, Dawid-Skene matches the truth about as well as the majority
    # (the adversarial-crowd test in test_aggregation.py shows where it does better).
    assert correct / verdicts.count() >= 0.85
    assert correct >= majority_correct - 0.05 * verdicts.count()
    assert release.manifest["rule"] == "dawid_skene"
    rows = csv.DictReader(io.StringIO((Path(release.path) / "verdicts.csv").read_text()))
    assert {row["rule"] for row in rows} == {"dawid_skene"}


# --- the command ---------------------------------------------------------------------------------


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_release_create_command_merges_sets_and_adds_extra_files(batch, tmp_path):
    released(batch)
    _, pair = imported_set(batch)
    report = tmp_path / "reviewer_notes.html"
    report.write_text("<p>bias</p>")

    out = run("release_create", str(batch.pk), "--include-set", "cxc", "--extra-file", str(report))

    release = Release.objects.get(name="small", version=2)
    assert out == f"release small v2: {release.path}\n"
    assert release.manifest["sources"][-1] == "cxc"
    assert pair in positives_of(Path(release.path), "image_to_caption.json")
    assert (Path(release.path) / "reviewer_notes.html").read_text() == "<p>bias</p>"


def test_release_create_command_turns_bad_sets_and_files_into_clear_errors(batch, tmp_path):
    released(batch)
    with pytest.raises(CommandError, match="no imported positive set 'cxc'"):
        run("release_create", str(batch.pk), "--include-set", "cxc")
    with pytest.raises(CommandError, match="cannot read it as text"):
        run("release_create", str(batch.pk), "--extra-file", str(tmp_path / "missing.html"))
    assert Release.objects.count() == 1
