"""Explaining models on a real released batch: concepts, failures, adversarial moves, command."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ServiceError
from annotation.imports.datasets import dataset_import_tsv
from annotation.models import Evaluation, Image, MachineAnnotator, Release
from mitl.evaluation_inputs import release_load
from mitl.explain.concepts import instances_concepts
from mitl.explain.metrics import failure_metrics
from mitl.explain.synsets import category_similarity
from mitl.relevance.wordnet import wordnet_available
from pipeline.annotators import annotator_create
from pipeline.evaluate import evaluation_submit
from pipeline.explain import dataset_concepts, explain_rankings
from pipeline.explain_report import ExplainRequest, explain_report
from pipeline.stages import batch_create
from tests.pipeline_runs import run_to_release

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not wordnet_available(), reason="WordNet (wordnet-base) is missing"),
]


@pytest.fixture
def shapes(db, synthetic_files: Path):
    """The small synthetic dataset with its object instances (boxes, colours, sizes)."""
    return dataset_import_tsv(
        name="shapes",
        captions_path=synthetic_files / "captions.tsv",
        images_dir=synthetic_files / "images",
        labels_path=synthetic_files / "labels.json",
        instances_path=synthetic_files / "instances.json",
        meta={"synthetic": json.loads((synthetic_files / "synthetic.json").read_text())},
    )


@pytest.fixture
def release(shapes, annotators, small_config) -> Release:
    """A release of a batch of the two bag-of-words annotators and an object-label one."""
    annotator_create(name="labels", kind="object_labels", config={})
    config = {**small_config, "annotators": ["tfidf", "bow-plain", "labels"]}
    batch = batch_create(dataset=shapes, name="explained", raw_config=config)
    batch = run_to_release(batch)
    return Release.objects.get(batches=batch)


def worst_rankings(release: Release) -> dict[str, dict[int, list[int]]]:
    """Rank every target; first, one of the image that shares the fewest shapes, then positives."""
    truth = release_load(release.path)
    images = {i.ext_id: i for i in release.dataset.images.all()}
    shapes_of = {ext: {row["category"] for row in image.instances} for ext, image in images.items()}
    captions = dict(release.dataset.captions.values_list("ext_id", "image__ext_id"))

    def farthest(image: int) -> int:
        return min(images, key=lambda other: (len(shapes_of[image] & shapes_of[other]), other))

    first_caption = {}
    for caption, image in sorted(captions.items()):
        first_caption.setdefault(image, caption)

    def ranking(first: int, positives: list[int], everything: list[int]) -> list[int]:
        head = [first, *[t for t in positives if t != first]]
        return head + [t for t in everything if t not in head]

    all_images, all_captions = sorted(images), sorted(captions)
    t2i = {
        q: ranking(farthest(captions[q]), targets, all_images)
        for q, targets in truth.positives["t2i"].items()
    }
    i2t = {
        q: ranking(first_caption[farthest(q)], targets, all_captions)
        for q, targets in truth.positives["i2t"].items()
    }
    return {"i2t": i2t, "t2i": t2i}


def test_concepts_come_from_the_stored_instances(shapes):
    concepts = dataset_concepts(shapes)
    assert concepts.sources == {"instances": shapes.images.count()}
    image = shapes.images.order_by("pk").first()
    found = concepts.concepts[image.ext_id]
    assert found.counts == instances_concepts(image.ext_id, image.instances).counts
    assert found.has_boxes


def test_one_source_serves_the_whole_dataset(shapes):
    # An image listed with no objects has none: it does not fall back to caption nouns.
    first = shapes.images.order_by("pk").first()
    Image.objects.filter(pk=first.pk).update(instances=[])
    concepts = dataset_concepts(shapes)
    # …and the report says how many images had none.
    assert concepts.sources == {"instances": shapes.images.count() - 1, "no instances": 1}
    assert concepts.concepts[first.ext_id].objects == ()


def test_a_labels_only_dataset_falls_back_to_labels_and_a_bare_one_to_caption_nouns(dataset):
    assert dataset_concepts(dataset).sources == {"labels": dataset.images.count()}
    Image.objects.filter(dataset=dataset).update(labels=[])
    concepts = dataset_concepts(dataset)
    assert set(concepts.sources) <= {"captions", "no concepts"}
    assert sum(concepts.sources.values()) == dataset.images.count() == len(concepts.concepts)
    assert concepts.sources["captions"] > 0
    some = next(iter(concepts.concepts.values()))
    assert some.categories <= {"circle", "square", "triangle", "star", "cross", "ring"}


def test_every_failure_of_a_model_is_explained_with_the_metrics_of_its_two_images(release):
    truth = release_load(release.path)
    rankings = worst_rankings(release)
    concepts = dataset_concepts(release.dataset)
    result = explain_rankings(truth=truth, rankings=rankings, concepts=concepts, worst=50)
    t2i = result["t2i"]
    assert t2i["queries"] == len(truth.positives["t2i"])
    assert t2i["failures"] == t2i["queries"]  # every first result is a wrong image
    assert t2i["explained"] == len(t2i["worst"]) > 0
    for record in t2i["worst"]:
        expected = failure_metrics(
            concepts.concepts[record["truth_image"]],
            concepts.concepts[record["retrieved_image"]],
            category_similarity,
        )
        assert record["agnostic"]["ca"] == expected.ca
        assert record["agnostic"]["ce"] == expected.ce
        assert record["truth_rank"] == 2
    # The chosen images share the fewest shapes, so the mean agreement is low.
    assert t2i["agnostic"]["means"]["ca"] < 0.5
    assert t2i["informed"]["defined"]["ca"] > 0


def test_the_report_reranks_perturbed_queries_and_shows_crowd_concepts(release):
    truth = release_load(release.path)
    request = ExplainRequest(
        release_dir=Path(release.path),
        truth=truth,
        dataset=release.dataset,
        rankings=worst_rankings(release),
        model_name="worst",
        adversarial=True,
        kinds=["color_all", "size"],
    )
    report = explain_report(request, url_of=lambda name: f"/media/{name}")
    names = [model["name"] for model in report["models"]]
    assert names == ["worst", "bow-plain", "labels", "tfidf"]
    by_name = {model["name"]: model for model in report["models"]}
    assert by_name["worst"]["adversarial"] is None
    assert "cannot score free text" in by_name["labels"]["adversarial"]["skipped"]
    colors = by_name["tfidf"]["adversarial"]["kinds"]["color_all"]
    assert colors["perturbed"] > 0
    assert colors["lower"] + colors["higher"] + colors["same"] == colors["perturbed"]
    # Bag of words reads colour words: swapping them moves the positive lower.
    assert not colors["blind"] and colors["lower"] > colors["higher"]
    example = colors["examples"][0]
    assert example["original"] != example["perturbed"]
    assert set(report["crowd"]) == {"bow-plain", "labels", "tfidf"}
    assert report["crowd"]["tfidf"]["judgements"] > 0
    shown = report["images"]
    assert shown and all(v["src"].startswith("/media/") for v in shown.values())


def test_a_submission_stores_its_explanation(release):
    evaluation = evaluation_submit(
        release=release, model_name="worst", rankings=worst_rankings(release)
    )
    evaluation = Evaluation.objects.get(pk=evaluation.pk)
    stored = evaluation.explanation
    assert stored["concept_sources"] == {"instances": release.dataset.images.count()}
    assert stored["explanation"]["t2i"]["failures"] > 0
    worst = stored["explanation"]["t2i"]["worst"][0]
    assert str(worst["truth_image"]) in stored["images"]


def test_the_explain_command_writes_html_and_json(release, tmp_path):
    rankings = tmp_path / "worst.json"
    rankings.write_text(json.dumps(worst_rankings(release)))
    out = StringIO()
    call_command(
        "explain",
        "--release",
        release.path,
        "--rankings",
        str(rankings),
        "--out",
        str(tmp_path / "report"),
        stdout=out,
    )
    text = out.getvalue()
    assert "worst" in text and "CA" in text and "report.html" in text
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["dataset"] == "shapes" and report["models"][0]["name"] == "worst"
    assert (tmp_path / "report" / "report.html").read_text().lower().startswith("<!doctype")


def test_the_explain_command_refuses_what_it_cannot_explain(release, tmp_path):
    with pytest.raises(CommandError, match="nothing to explain"):
        call_command("explain", "--release", release.path, stdout=StringIO())
    with pytest.raises(CommandError, match="no dataset named 'nope'"):
        call_command("explain", "--release", release.path, "--dataset", "nope", "--adversarial")
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("image_to_caption.json", "caption_to_image.json"):
        (bare / name).write_text((Path(release.path) / name).read_text())
    with pytest.raises(CommandError, match="give --dataset NAME"):
        call_command("explain", "--release", str(bare), "--adversarial")
    with pytest.raises(CommandError, match="no machine annotator named 'ghost'"):
        call_command("explain", "--release", release.path, "--annotator", "ghost")


def test_a_dataset_without_concepts_is_refused_with_the_way_out(dataset, monkeypatch):
    Image.objects.filter(dataset=dataset).update(labels=[])
    monkeypatch.setattr("pipeline.explain.wordnet_available", lambda: False)
    with pytest.raises(ServiceError, match="import instances"):
        dataset_concepts(dataset)


def test_an_outside_model_ranks_the_perturbed_queries_and_the_report_compares(release, tmp_path):
    queries_file = tmp_path / "perturbed.json"
    out = StringIO()
    call_command(
        "explain",
        "--release",
        release.path,
        "--adversarial-queries-out",
        str(queries_file),
        "--kind",
        "color_all",
        stdout=out,
    )
    perturbed = json.loads(queries_file.read_text())
    assert list(perturbed) == ["color_all"] and perturbed["color_all"]
    assert "perturbed caption queries" in out.getvalue()
    rankings = worst_rankings(release)
    # The outside model: the positive falls one place for every second perturbed query.
    moved = {}
    for k, query in enumerate(sorted(int(q) for q in perturbed["color_all"])):
        ranking = list(rankings["t2i"][query])
        if k % 2 == 0:  # the last image (no positive) jumps in front of the positives
            ranking.insert(1, ranking.pop())
        moved[str(query)] = ranking
    moved_file = tmp_path / "moved.json"
    moved_file.write_text(json.dumps({"color_all": moved}))
    rankings_file = tmp_path / "worst.json"
    rankings_file.write_text(json.dumps(rankings))
    call_command(
        "explain",
        "--release",
        release.path,
        "--rankings",
        str(rankings_file),
        "--adversarial-rankings",
        str(moved_file),
        "--out",
        str(tmp_path / "report"),
        stdout=StringIO(),
    )
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    colors = report["models"][0]["adversarial"]["kinds"]["color_all"]
    n = len(moved)
    assert colors["perturbed"] == n and colors["unranked"] == 0
    assert (colors["lower"], colors["same"]) == ((n + 1) // 2, n // 2)
    with pytest.raises(CommandError, match="unknown key 'paint'"):
        moved_file.write_text(json.dumps({"paint": moved}))
        call_command(
            "explain",
            "--release",
            release.path,
            "--rankings",
            str(rankings_file),
            "--adversarial-rankings",
            str(moved_file),
        )


def test_an_annotator_that_cannot_run_here_is_reported_not_a_crash(release, tmp_path):
    # Registered while its model was there; the directory has gone since.
    MachineAnnotator.objects.create(
        name="gone", kind="text_embedding", config={"model_path": str(tmp_path / "nothing")}
    )
    request = ExplainRequest(
        release_dir=Path(release.path),
        truth=release_load(release.path),
        dataset=release.dataset,
        annotators=["tfidf", "gone"],
        adversarial=True,
        kinds=["size"],
    )
    report = explain_report(request, url_of=lambda name: None)
    assert [model["name"] for model in report["models"]] == ["tfidf"]
    (skipped,) = report["skipped_annotators"]
    assert skipped["name"] == "gone" and "nothing" in skipped["reason"]


def test_the_explain_command_refuses_rankings_that_leave_queries_out(release, tmp_path):
    rankings = worst_rankings(release)
    dropped = next(iter(rankings["t2i"]))
    del rankings["t2i"][dropped]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(rankings))
    with pytest.raises(CommandError, match=rf"t2i: 1 of .* no ranking \(first: {dropped}\)"):
        call_command("explain", "--release", release.path, "--rankings", str(path))


def test_the_explain_command_says_when_it_cannot_write(release, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(CommandError, match="cannot write"):
        call_command(
            "explain",
            "--release",
            release.path,
            "--adversarial-queries-out",
            str(blocker / "perturbed.json"),
        )
