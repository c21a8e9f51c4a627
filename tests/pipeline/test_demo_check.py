"""`demo --check` and the demo on a machine without its optional parts (WordNet)."""

from __future__ import annotations

import json
import re
from functools import partial
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment, Batch, Release
from mitl import clip_training
from pipeline.demo import DemoSummary
from pipeline.demo_check import demo_check
from tests.pipeline_runs import run_to_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def summary(batch) -> DemoSummary:
    """The summary the demo would print for a released small batch, every figure in order."""
    batch = run_to_release(batch)
    release = Release.objects.get(batches=batch)
    stats = json.loads((Path(release.path) / "stats.json").read_text())
    statuses = Assignment.objects.filter(hit__batch=batch)
    return DemoSummary(
        dataset="small",
        batch_id=batch.pk,
        release_path=release.path,
        counts={
            "image queries": stats["i2t"]["queries"],
            "caption queries": stats["t2i"]["queries"],
            "candidates": stats["candidates"],
            "HITs": stats["hits"],
            "judgements": stats["judgements"],
            "approved assignments": statuses.filter(status="approved").count(),
            "rejected assignments": statuses.filter(status="rejected").count(),
        },
        agreement={"released i2t": {"precision": 0.75, "recall": 1.0, "pairs": 12}},
        estimated_recall={"i2t": {"recall": 0.9, "recall_low": 0.8, "recall_high": 1.0}},
        live_batch_id=batch.pk,  # any batch with HITs
    )


def test_a_complete_release_with_figures_in_order_passes(summary):
    assert demo_check(summary) == []


def _rewrite_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _drop_last_line(path: Path) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))


def _first_query(data: dict) -> None:
    data[next(iter(data))].append(999_999)


TAMPERINGS = {
    "batch not released": (
        lambda s: Batch.objects.filter(pk=s.batch_id).update(state="aggregating"),
        "not released",
    ),
    "no release": (lambda s: setattr(s, "release_path", ""), "no release written"),
    "release folder gone": (
        lambda s: setattr(s, "release_path", s.release_path + "-gone"),
        "no release written",
    ),
    "file missing": (
        lambda s: (Path(s.release_path) / "verdicts.csv").unlink(),
        "missing or empty file(s) verdicts.csv",
    ),
    "file empty": (
        lambda s: (Path(s.release_path) / "qrels_t2i.txt").write_text(""),
        "missing or empty file(s) qrels_t2i.txt",
    ),
    "positives disagree with stats": (
        lambda s: _rewrite_json(Path(s.release_path) / "image_to_caption.json", _first_query),
        "i2t.positives_extended is",
    ),
    "a judgement line lost": (
        lambda s: _drop_last_line(Path(s.release_path) / "judgements.jsonl"),
        "judgements, but judgements.jsonl holds",
    ),
    "a verdict row lost": (
        lambda s: _drop_last_line(Path(s.release_path) / "verdicts.csv"),
        "but verdicts.csv holds",
    ),
    "file changed after the manifest": (
        lambda s: (Path(s.release_path) / "README.md").write_text("edited"),
        "README.md: size or checksum differs from the manifest",
    ),
    "zip changed": (
        lambda s: Path(s.release_path + ".zip").write_bytes(b"not the zip"),
        "checksum differs from 1.zip.sha256",
    ),
    "printed assignments disagree": (
        lambda s: s.counts.update({"approved assignments": -1}),
        "-1 approved assignments printed",
    ),
    "no judgements": (lambda s: s.counts.update({"judgements": 0}), "counts 0 judgements"),
    "recall above 1": (
        lambda s: s.agreement["released i2t"].update(recall=1.2),
        "released i2t recall is 1.2, not a number in [0, 1]",
    ),
    "precision NaN": (
        lambda s: s.agreement["released i2t"].update(precision=float("nan")),
        "released i2t precision is nan",
    ),
    "interval upside down": (
        lambda s: s.estimated_recall["i2t"].update(recall_low=0.95, recall_high=0.85),
        "lower > upper",
    ),
    "estimate outside its interval": (
        lambda s: s.estimated_recall["i2t"].update(recall=0.5),
        "recall 0.5 lies outside its interval",
    ),
    "interval below 0": (
        lambda s: s.estimated_recall["i2t"].update(recall_low=-0.1),
        "estimated i2t recall_low is -0.1",
    ),
    "batch for people empty": (
        lambda s: setattr(s, "live_batch_id", None),
        "the batch for people (None) has no HITs",
    ),
    "explanation report missing": (
        lambda s: setattr(s, "explain_path", "/nonexistent/report.html"),
        "the explanation report /nonexistent/report.html is missing",
    ),
}


@pytest.mark.parametrize("case", TAMPERINGS)
def test_each_check_fails_when_its_figure_is_off(summary, case):
    tamper, message = TAMPERINGS[case]
    tamper(summary)

    problems = demo_check(summary)

    assert any(message in problem for problem in problems), problems


def test_the_command_exits_non_zero_naming_each_problem(summary, monkeypatch):
    summary.agreement["released i2t"]["recall"] = 1.5
    summary.release_path = ""
    monkeypatch.setattr("pipeline.management.commands.demo.demo_run", lambda **_: summary)

    with pytest.raises(CommandError) as raised:
        call_command("demo", "--check", "--no-progress", stdout=StringIO())

    message = str(raised.value)
    assert message.startswith("demo --check: 2 problem(s) found:")
    assert "\n  - no release written" in message and "recall is 1.5" in message


def test_a_small_demo_without_wordnet_skips_the_explanation_in_one_sentence(
    settings, tmp_path, monkeypatch, capsys
):
    settings.VAR_DIR = tmp_path / "var"
    empty = tmp_path / "no-wordnet"
    empty.mkdir()
    monkeypatch.setenv("WORDNET_DIR", str(empty))
    # One epoch of the tiny CLIP, not ten: what is under test is the skip, not the model.
    train = clip_training.train_tiny_clip
    monkeypatch.setattr(clip_training, "train_tiny_clip", partial(train, epochs=1))
    out, err = StringIO(), StringIO()

    call_command(
        "demo",
        *("--images", "40", "--queries", "5", "--workers", "6", "--budget", "300"),
        *("--no-progress", "--check"),
        stdout=out,
        stderr=err,
    )

    printed = out.getvalue()
    skips = [line for line in printed.splitlines() if line.startswith("Skipped ")]
    assert skips == [
        "Skipped the explanation of the annotators' failures (docs/explain.md): it needs "
        f"WordNet 3.0, not found in {empty}; install it with `apt-get install -y "
        "wordnet-base` (`make wordnet` does, as root) or set WORDNET_DIR to its folder."
    ]
    assert "Why the annotators fail" not in printed
    assert re.search(r"^Check passed: release .+", printed, flags=re.M)
    captured = capsys.readouterr()
    for text in (printed, err.getvalue(), captured.out, captured.err):
        assert "Traceback" not in text
