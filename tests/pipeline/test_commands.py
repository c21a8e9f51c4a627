"""The management commands, called as a person would call them (`manage.py <command>`)."""

from __future__ import annotations

import hashlib
import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command

from annotation.models import Assignment, Batch, Dataset, MachineAnnotator, Release

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def write_config(path: Path, config: dict | str) -> Path:
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return path


def checksums(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


# --- annotator_create ------------------------------------------------------------------------


def test_annotator_create_registers_an_annotator_once():
    assert run("annotator_create", "tfidf", "--kind", "bow") == "annotator tfidf (bow v1)\n"
    assert run(
        "annotator_create", "plain", "--kind", "bow", "--config", '{"stop_words": false}'
    ) == ("annotator plain (bow v1)\n")
    run("annotator_create", "tfidf", "--kind", "bow")  # the same again: accepted, not duplicated

    assert MachineAnnotator.objects.count() == 2
    assert MachineAnnotator.objects.get(name="plain").config == {"stop_words": False}


def test_annotator_create_takes_a_version_that_keys_the_embedding_cache():
    out = run("annotator_create", "tfidf", "--kind", "bow", "--annotator-version", "2024-06")
    assert out == "annotator tfidf (bow v2024-06)\n"
    assert MachineAnnotator.objects.get().version == "2024-06"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--config", '{"stop_words": false}'],
            "already exists with another kind, config or version",
        ),
        (["--config", "{stop_words}"], "--config is not valid JSON"),
        (["--config", '{"stopwords": true}'], "unknown config key 'stopwords'"),
        (["--config", '{"stop_words": "no"}'], "'stop_words' must be true or false"),
    ],
)
def test_annotator_create_refuses_bad_or_conflicting_settings(args, message):
    MachineAnnotator.objects.create(name="tfidf", kind="bow", config={}, version="1")
    with pytest.raises(CommandError, match=re.escape(message)):
        run("annotator_create", "tfidf", "--kind", "bow", *args)
    assert MachineAnnotator.objects.get().config == {}


def test_annotator_create_service_behind_the_command_is_idempotent(db):
    from annotation.errors import ServiceError
    from pipeline.annotators import annotator_create

    first = annotator_create(name="tfidf", kind="bow", config={})
    assert annotator_create(name="tfidf", kind="bow", config={}) == first
    with pytest.raises(ServiceError, match="already exists"):
        annotator_create(name="tfidf", kind="bow", config={}, version="2")
    with pytest.raises(ServiceError, match="kind 'clip'"):
        annotator_create(name="clip", kind="clip", config={})
    assert MachineAnnotator.objects.count() == 1


# --- batch_create --------------------------------------------------------------------------------


def test_batch_create_prints_the_id_of_a_draft_batch(dataset, annotators, small_config, tmp_path):
    config = {**small_config, "annotators": ["tfidf"], "k": 4}
    path = write_config(tmp_path / "round-one.json", config)

    out = run("batch_create", "small", "--config", str(path))

    batch = Batch.objects.get(pk=int(out.strip()))
    assert out == f"{batch.pk}\n"
    assert (batch.name, batch.state, batch.dataset) == ("round-one", "draft", dataset)
    assert batch.config["k"] == 4 and batch.config["golden_tp"] == 1  # defaults filled in
    assert list(batch.annotators.values_list("name", flat=True)) == ["tfidf"]
    named = run("batch_create", "small", "--config", str(path), "--name", "second round")
    assert Batch.objects.get(pk=int(named)).name == "second round"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"annotators": ["tfidf"], "hit_sise": 3}, "unknown key 'hit_sise'"),
        ({"annotators": ["tfidf"], "k": 0}, "`k` must be between 1 and 100 (got 0)"),
        ({"annotators": ["tfidf"], "seed": "1"}, "`seed` must be an integer"),
        ({"annotators": ["tfidf"], "followups": "yes"}, "`followups` must be true or false"),
        ({"annotators": ["tfidf"], "aggregation": "mean"}, "`aggregation` must be one of eccv"),
        (
            {"annotators": ["tfidf"], "k": 9, "golden_negative_depth": 5},
            "`golden_negative_depth` (5)",
        ),
        ({"annotators": []}, "`annotators` must be a non-empty list"),
        ({"n_image_queries": 3}, "`annotators` must be a non-empty list"),
        ({"annotators": ["tfidf", "clip"]}, "unknown annotator 'clip'"),
        ({"annotators": ["tfidf"], "n_image_queries": 41}, "fewer than the 41 image"),
        ('{"annotators": ["tfidf"],\n "k": }', "round.json:2: invalid JSON"),
    ],
)
def test_batch_create_refuses_a_bad_config_naming_the_key(
    dataset, annotators, tmp_path, config, message
):
    path = write_config(tmp_path / "round.json", config)
    with pytest.raises(CommandError, match=re.escape(message)):
        run("batch_create", "small", "--config", str(path))
    assert not Batch.objects.exists()


def test_batch_create_refuses_an_unknown_dataset_or_a_missing_file(dataset, tmp_path):
    path = write_config(tmp_path / "round.json", {"annotators": ["tfidf"]})
    with pytest.raises(CommandError, match="no dataset named 'nope'"):
        run("batch_create", "nope", "--config", str(path))
    with pytest.raises(CommandError, match="cannot read"):
        run("batch_create", "small", "--config", str(tmp_path / "missing.json"))


# --- batch_run, crowd_simulate, release_create -------------------------------------------


def test_batch_run_crowd_simulate_and_release_create_end_to_end(batch, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # stages run in this process, not on workers
    pk = batch.pk
    assert (
        run("batch_run", str(pk), "--until", "annotating", "--no-progress")
        == f"batch {pk}: annotating\n"
    )
    waiting = run("batch_run", str(pk), "--no-progress")
    assert waiting.startswith(f"batch {pk}: annotating\nwaiting for annotators:")
    assert f"crowd_simulate {pk}" in waiting
    with pytest.raises(CommandError, match="not aggregated yet"):
        run("release_create", str(pk))

    simulated = run("crowd_simulate", str(pk), "--no-progress", "--seed", "3")
    assignments = Assignment.objects.filter(hit__batch=batch)
    approved = assignments.filter(status="approved").count()
    flagged = assignments.filter(flagged=True).count()
    assert simulated == (
        f"batch {pk}: {assignments.count()} assignments submitted, {approved} approved, "
        f"{flagged} flagged for review\n"
    )
    assert assignments.count() == 2 * batch.hits.count()

    assert run("batch_run", str(pk), "--force", "--no-progress") == f"batch {pk}: released\n"
    first = Release.objects.get(batches=batch)
    first_folder = Path(first.path)
    assert first_folder == Path(settings.RELEASES_DIR) / "small" / "1"
    before = checksums(first_folder)

    second_out = run("release_create", str(pk))
    second = Release.objects.get(name="small", version=2)
    assert second_out == f"release small v2: {second.path}\n"
    second_folder = Path(second.path)
    assert second_folder == Path(settings.RELEASES_DIR) / "small" / "2"
    assert checksums(first_folder) == before  # releases are immutable
    for name in ("image_to_caption.json", "caption_to_image.json", "judgements.jsonl"):
        assert (second_folder / name).read_bytes() == (first_folder / name).read_bytes()
    assert json.loads((second_folder / "manifest.json").read_text())["version"] == 2

    named = run("release_create", str(pk), "--name", "small-extended")
    assert named.startswith("release small-extended v1: ")
    assert Release.objects.count() == 3

    with pytest.raises(CommandError, match="HITs are judged in the annotating stage"):
        run("crowd_simulate", str(pk), "--no-progress")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--careless-share", "1.5"], "--careless-share must be between 0 and 1"),
        (["--error-rate", "-0.1"], "--error-rate must be between 0 and 1"),
        (["--workers", "1"], "1 simulated workers cannot fill 2 assignments per HIT"),
        (["--oracle", "/nonexistent/oracle"], "cannot open"),
    ],
)
def test_crowd_simulate_refuses_bad_options_without_doing_any_work(batch, args, message):
    run("batch_run", str(batch.pk), "--until", "annotating", "--no-progress")
    with pytest.raises(CommandError, match=re.escape(message)):
        run("crowd_simulate", str(batch.pk), "--no-progress", *args)
    assert not Assignment.objects.exists()


def test_crowd_simulate_on_a_dataset_without_truth_asks_for_an_oracle(batch):
    run("batch_run", str(batch.pk), "--until", "annotating", "--no-progress")
    Dataset.objects.filter(pk=batch.dataset_id).update(meta={})
    with pytest.raises(CommandError, match="--oracle DIR"):
        run("crowd_simulate", str(batch.pk), "--no-progress")


def test_commands_refuse_an_unknown_batch(db):
    for command in ("batch_run", "crowd_simulate", "release_create"):
        with pytest.raises(CommandError, match="no batch 999"):
            run(command, "999")


def test_crowd_simulate_refuses_a_batch_that_is_not_annotating(batch):
    with pytest.raises(CommandError, match=f"batch {batch.pk} is draft"):
        run("crowd_simulate", str(batch.pk), "--no-progress")


# --- demo --------------------------------------------------------------------------------------


def test_demo_runs_the_whole_pipeline_and_prints_precision_and_recall(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"  # the demo writes its synthetic files there

    out = run("demo", "--images", "60", "--queries", "10", "--no-progress")

    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("Demo on dataset"))
    batch_id = int(re.fullmatch(r"Demo on dataset 'synthetic-60-s0', batch (\d+)", header)[1])
    assert Batch.objects.get(pk=batch_id).state == "released"
    counts = dict(re.findall(r"^  ([a-zA-Z ]+?)\s{2,}(\d+)$", out, flags=re.M))
    assert counts["image queries"] == counts["caption queries"] == "10"
    assert int(counts["HITs"]) >= 1 and int(counts["judgements"]) > 0

    assert "Against the synthetic truth          precision  recall   pairs" in lines
    agreement = {}
    for label in ("original i2t", "original t2i", "released i2t", "released t2i"):
        line = next(line for line in lines if line.startswith(f"  {label} "))
        precision, recall, pairs = line.split()[-3:]
        assert 0.0 <= float(precision) <= 1.0 and 0.0 <= float(recall) <= 1.0
        agreement[label] = (float(precision), float(recall), int(pairs))
    for direction in ("i2t", "t2i"):  # the crowd finds positives the original links miss
        assert agreement[f"released {direction}"][1] > agreement[f"original {direction}"][1]
        assert agreement[f"released {direction}"][2] > agreement[f"original {direction}"][2]

    release_line = next(line for line in lines if line.startswith("Release written to "))
    folder = Path(release_line.removeprefix("Release written to "))
    assert folder == Path(settings.RELEASES_DIR) / "synthetic-60-s0" / "1"
    i2t = json.loads((folder / "image_to_caption.json").read_text())
    assert len(i2t) == 10
    assert Release.objects.get(batches__pk=batch_id).path == str(folder)
    assert (tmp_path / "var" / "synthetic" / "synthetic-60-s0" / "captions.tsv").exists()
    demo_instances = Dataset.objects.get(name="synthetic-60-s0").images.values_list(
        "instances", flat=True
    )
    assert len(demo_instances) == 60 and all(demo_instances)  # boxes for the concept metrics
    assert any(line.startswith("Stage times: ") for line in lines)

    # A second batch waits for people, who can log in with the printed accounts.
    live_id = int(re.search(r"^Batch (\d+) waits for people", out, flags=re.M)[1])
    assert Batch.objects.get(pk=live_id).state == "annotating"
    assert Batch.objects.get(pk=live_id).hits.exists()
    printed = dict(re.findall(r"^  (\w+)\s+password '([^']+)'", out, flags=re.M))
    assert set(printed) == {"admin", "annotator1", "annotator2"}
    assert authenticate(username="annotator1", password=printed["annotator1"]) is not None
    assert authenticate(username="admin", password=printed["admin"]).is_staff


def test_demo_dataset_written_before_instances_json_gets_it_on_import(settings, tmp_path):
    from mitl.synthetic.files import INSTANCES_FILE, write
    from mitl.synthetic.generation import generate
    from pipeline.demo import _demo_dataset

    settings.VAR_DIR = tmp_path / "var"
    folder = settings.VAR_DIR / "synthetic" / "synthetic-6-s0"
    write(generate(n_images=6, seed=0), folder)
    (folder / INSTANCES_FILE).unlink()  # as an older version wrote the folder

    dataset = _demo_dataset(n_images=6, seed=0, listener=None)

    assert (folder / INSTANCES_FILE).is_file()
    assert all(dataset.images.values_list("instances", flat=True))
