"""The calibrated relevance as a source: `relevance_calibrate --save` stores the model, and
`evaluate --relevance calibrated`, releases and the leaderboard apply it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError

from annotation.errors import ServiceError
from annotation.models import CalibratedRelevanceModel
from mitl.config import batch_config
from mitl.evaluation_inputs import release_load
from mitl.graded_evaluation import GradedOptions, relevance_matrices
from mitl.relevance.calibrated import CalibratedModel
from pipeline.calibrated_relevance import model_proxies
from pipeline.evaluate import evaluation_submit
from pipeline.release import release_create
from pipeline.relevance import dataset_corpus
from tests.pipeline.test_relevance_service import (
    rankings_by,
    rated_pairs,
    released,
    run,
    sits_file,
)

pytestmark = pytest.mark.django_db


def stored_model(dataset, tmp_path: Path) -> CalibratedModel:
    """Fit and store a model on stand-in ratings of the dataset (bow and cider_d)."""
    path = sits_file(tmp_path, rated_pairs(dataset, 40))
    run(
        "relevance_calibrate",
        dataset.name,
        "--sits",
        str(path),
        "--proxies",
        "bow,cider_d",
        "--save",
    )
    row = CalibratedRelevanceModel.objects.get(dataset=dataset)
    model = CalibratedModel.from_spec(row.spec, bytes(row.model))
    assert row.version == model.version
    assert model.proxies == ("bow", "cider_d") and not model.context
    assert row.figures["out_of_fold"]["non_gt"]["pearson"] > 0.5
    assert row.figures["best_single"]["proxy"].startswith(("bow/", "cider_d/"))
    return model


def test_a_stored_model_is_a_relevance_source_of_releases_evaluate_and_the_leaderboard(
    dataset, annotators, small_config, synthetic_files, tmp_path, monkeypatch
):
    from pipeline.stages import batch_create

    model = stored_model(dataset, tmp_path)
    config = {**small_config, "relevance": ["bow", "calibrated"]}
    batch = batch_create(dataset=dataset, name="calibrated", raw_config=config)
    release = released(batch)

    relevance = release.manifest["relevance"]
    assert relevance["versions"] == {"bow": 1, "calibrated": model.version}
    assert (Path(release.path) / "qrels_calibrated_i2t.txt").is_file()
    corpus = dataset_corpus(dataset).corpus
    truth = release_load(release.path)
    options = GradedOptions(source="calibrated", calibrated=model)
    matrices = relevance_matrices(corpus, truth, options)
    assert all(m.min() >= 0.0 and m.max() <= 1.0 and m.std() > 0 for m in matrices.values())

    good = evaluation_submit(
        release=release, model_name="good", rankings=rankings_by(release, matrices, best_first=True)
    )
    for direction in ("i2t", "t2i"):
        assert good.metrics[direction]["ndcg@25:calibrated"] == pytest.approx(1.0)

    path = tmp_path / "model.json"
    worst = rankings_by(release, matrices, best_first=False)
    path.write_text(json.dumps(worst))
    args = ["--release", release.path, "--rankings", str(path)]
    args += ["--captions", str(synthetic_files / "captions.tsv"), "--relevance", "calibrated"]
    table = run("evaluate", *args)
    printed = json.loads(run("evaluate", *args, "--json"))["graded"][0]
    assert f"graded relevance: calibrated (model {model.version})" in table
    assert printed["version"] == model.version and printed["mean"]["ndcg@25"] < 0.9

    # A model that reads a proxy this machine cannot run: one sentence, wherever it is used.
    with monkeypatch.context() as patched:
        patched.setattr(
            "pipeline.calibrated_relevance.calibrated_unavailable",
            lambda model: "the calibrated model cannot score here: pos needs WordNet",
        )
        with pytest.raises(CommandError, match="cannot score here: pos needs WordNet"):
            run("evaluate", *args)
        with pytest.raises(ServiceError, match=r"graded metrics of calibrated: .* WordNet"):
            evaluation_submit(release=release, model_name="elsewhere", rankings=worst)

    # Without the model of the release's version: said in one sentence, or left out.
    CalibratedRelevanceModel.objects.all().delete()
    with pytest.raises(CommandError, match="has no calibrated relevance model of version"):
        run("evaluate", *args)
    later = evaluation_submit(release=release, model_name="later", rankings=worst)
    assert "ndcg@25:bow" in later.metrics["i2t"]
    assert not any(key.endswith(":calibrated") for key in later.metrics["i2t"])
    with pytest.raises(ServiceError, match="no calibrated relevance model: fit one with"):
        release_create(batch=batch, config=batch_config(batch), relevance=["calibrated"])


def test_save_needs_a_dataset_and_sits_ratings(dataset, synthetic_files, tmp_path, monkeypatch):
    path = sits_file(tmp_path, rated_pairs(dataset, 5))
    captions = str(synthetic_files / "captions.tsv")
    with pytest.raises(CommandError, match="--save needs a dataset name"):
        run("relevance_calibrate", captions, "--sits", str(path), "--proxies", "bow", "--save")
    with pytest.raises(CommandError, match="--save needs"):
        run("relevance_calibrate", dataset.name, "--proxies", "bow", "--save")
    monkeypatch.setattr(
        "pipeline.calibrated_relevance.proxy_unavailable", lambda name: "needs a machine"
    )
    with pytest.raises(CommandError, match="no vectorised proxy runs here"):
        run("relevance_calibrate", dataset.name, "--sits", str(path), "--proxies", "bow", "--save")
    assert not CalibratedRelevanceModel.objects.exists()


def test_a_stored_model_never_reads_meteor():
    assert model_proxies(["bow", "meteor", "cider_d"]) == ["bow", "cider_d"]
