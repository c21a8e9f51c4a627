"""Graded relevance in the product: `evaluate --relevance`, proxy qrels in releases, graded
leaderboard columns, and `relevance_calibrate` with its page."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Batch, Release, RelevanceCalibration
from mitl.annotators.bow import STOP_WORDS
from mitl.config import batch_config
from mitl.evaluation_inputs import release_load
from mitl.graded_evaluation import GradedOptions, relevance_matrices
from pipeline.evaluate import evaluation_submit, leaderboard_of
from pipeline.progress import StageTracker
from pipeline.relevance import dataset_corpus
from pipeline.simulate import crowd_simulate
from pipeline.stages import batch_run_until

pytestmark = pytest.mark.django_db


def released(batch: Batch) -> Release:
    """Run the batch with a simulated crowd through to its release."""
    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    batch = Batch.objects.select_related("dataset").get(pk=batch.pk)
    tracker = StageTracker(batch=batch, stage="annotating")
    crowd_simulate(batch=batch, config=batch_config(batch), tracker=tracker, n_workers=3, seed=3)
    assert batch_run_until(batch_id=batch.pk, until="released", force=True) == "released"
    return Release.objects.get(batches=batch)


@pytest.fixture
def graded_batch(dataset, annotators, small_config):
    from pipeline.stages import batch_create

    config = {**small_config, "relevance": ["bow", "cider_d"]}
    return batch_create(dataset=dataset, name="graded", raw_config=config)


def rankings_by(release: Release, relevance: dict[str, np.ndarray], *, best_first: bool) -> dict:
    """Rank every target by the proxy's relevance (best first, or worst first)."""
    corpus = dataset_corpus(release.dataset).corpus
    truth = release_load(release.path)
    targets = {"i2t": corpus.caption_ids, "t2i": corpus.image_ids}
    rankings: dict[str, dict[int, list[int]]] = {}
    for direction in ("i2t", "t2i"):
        rankings[direction] = {}
        for row, query in enumerate(truth.positives[direction]):
            order = np.argsort(-relevance[direction][row], kind="stable")
            if not best_first:
                order = order[::-1]
            rankings[direction][query] = targets[direction][order].tolist()
    return rankings


def test_a_release_carries_proxy_qrels_that_ir_measures_reads(graded_batch):
    release = released(graded_batch)
    folder = Path(release.path)

    assert release.manifest["relevance"] == {
        "proxies": ["bow", "cider_d"],
        "aggregation": "mean",
        "versions": {"bow": 1, "cider_d": 1},
    }
    truth = release_load(release.path)
    for proxy in ("bow", "cider_d"):
        qrels = list(ir_measures.read_trec_qrels(str(folder / f"qrels_{proxy}_i2t.txt")))
        queries = {int(q.query_id) for q in qrels}
        assert queries == set(truth.positives["i2t"])
        assert all(0 < q.relevance <= 100 for q in qrels)
        # A query's own captions are fully relevant to it (a caption counts as itself).
        for image, captions in truth.positives["i2t"].items():
            grades = {int(q.doc_id): q.relevance for q in qrels if int(q.query_id) == image}
            own = [c for c in captions if c in grades]
            assert own and max(grades.values()) == max(grades[c] for c in own)
    manifest_files = json.loads((folder / "manifest.json").read_text())["files"]
    assert any("qrels_cider_d_t2i.txt" in str(entry) for entry in manifest_files)
    assert (
        "- `qrels_bow_t2i.txt`: graded TREC qrels of caption queries"
        in (folder / "README.md").read_text()
    )


def test_graded_leaderboard_columns_reward_the_better_ranking(graded_batch, settings):
    release = released(graded_batch)
    cached = sorted(settings.RELEVANCE_CACHE_DIR.glob("*.npy"))
    assert len(cached) == 4  # two proxies x two directions, written with the release
    corpus = dataset_corpus(release.dataset).corpus
    truth = release_load(release.path)
    relevance = relevance_matrices(corpus, truth, GradedOptions(source="bow"))

    good = evaluation_submit(
        release=release,
        model_name="good",
        rankings=rankings_by(release, relevance, best_first=True),
    )
    bad = evaluation_submit(
        release=release,
        model_name="bad",
        rankings=rankings_by(release, relevance, best_first=False),
    )

    for direction in ("i2t", "t2i"):
        assert good.metrics[direction]["ndcg@25:bow"] == pytest.approx(1.0)
        assert good.metrics[direction]["ncs@5:bow"] == pytest.approx(1.0)
        assert bad.metrics[direction]["ndcg@25:bow"] < 0.5
        assert "ndcg:cider_d" in good.metrics[direction]
    # The leaderboard read the release's matrices back: nothing computed twice.
    assert sorted(settings.RELEVANCE_CACHE_DIR.glob("*.npy")) == cached
    board = leaderboard_of(release=release)
    assert "ndcg@25:bow" in board.metrics and "semantic_recall@5:cider_d" in board.metrics
    # binary metrics first, then each proxy's graded ones
    assert board.metrics.index("recall@1") < board.metrics.index("ndcg@25:bow")


def run(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_evaluate_prints_graded_metrics_from_a_proxy(graded_batch, synthetic_files, tmp_path):
    release = released(graded_batch)
    corpus = dataset_corpus(release.dataset).corpus
    relevance = relevance_matrices(corpus, release_load(release.path), GradedOptions(source="bow"))
    path = tmp_path / "model.json"
    path.write_text(json.dumps(rankings_by(release, relevance, best_first=True)))
    captions = str(synthetic_files / "captions.tsv")
    args = ["--release", release.path, "--rankings", str(path), "--captions", captions]

    table = run("evaluate", *args, "--relevance", "bow", "--relevance", "crowd")
    printed = json.loads(run("evaluate", *args, "--relevance", "bow", "--json"))

    assert "graded relevance: bow (mean)" in table and "graded relevance: crowd" in table
    graded = printed["graded"][0]
    assert graded["source"] == "bow"
    assert graded["mean"]["ndcg@25"] == pytest.approx(1.0)
    assert {"ndcg", "ncs@10", "semantic_recall@5", "recall@1_lower", "recall@1_upper"} <= set(
        graded["i2t"]
    )
    counted = graded["i2t"]["semantic_queries"] + graded["t2i"]["semantic_queries"]
    assert graded["mean"]["semantic_queries"] == counted > 0
    with pytest.raises(CommandError, match="needs --captions"):
        run("evaluate", "--release", release.path, "--rankings", str(path), "--relevance", "bow")


def sits_file(tmp_path: Path, rows: list[tuple[str, str, float]]) -> Path:
    path = tmp_path / "sits.csv"
    lines = ["caption,image,agg_score,sampling_method"]
    lines += [f"{caption},{image},{score},c2i_intrasim" for caption, image, score in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def word_set(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - STOP_WORDS


def rated_pairs(dataset, n: int) -> list[tuple[str, str, float]]:
    """Rate n pairs: each caption with its own image (5) and with another image, scored 5 x
    the best word-set IoU with the other image's captions (a stand-in for people)."""
    captions = list(dataset.captions.select_related("image").order_by("pk")[:n])
    images = list(dataset.images.order_by("pk"))
    rows = []
    for k, caption in enumerate(captions):
        rows.append((f"COCO_val2014:sentid:{caption.ext_id}", caption.image.file_name, 5.0))
        other = images[(k * 7 + 3) % len(images)]
        if other.pk == caption.image_id:
            continue
        words = word_set(caption.text)
        iou = max(
            len(words & word_set(c.text)) / max(len(words | word_set(c.text)), 1)
            for c in other.captions.all()
        )
        rows.append((f"COCO_val2014:sentid:{caption.ext_id}", other.file_name, 5 * iou))
    return rows


def test_relevance_calibrate_reports_and_keeps_the_table(
    dataset, tmp_path, client, django_user_model
):
    path = sits_file(tmp_path, rated_pairs(dataset, 40))

    table = run(
        "relevance_calibrate", dataset.name, "--sits", str(path), "--proxies", "bow,rouge_l,cider_d"
    )

    assert "sits:" in table and "combination (out of fold)" in table
    assert "recommended for sits:" in table
    stored = RelevanceCalibration.objects.get(dataset=dataset)
    rows = {row["proxy"]: row for row in stored.report["sits"]["table"]}
    assert set(rows) == {
        "bow/mean", "bow/max", "rouge_l/mean", "rouge_l/max", "cider_d/mean", "cider_d/max",
        "combination",
    }  # fmt: skip
    # These ratings are bow's max IoU by another hand: a perfect agreement on non-GT pairs.
    assert rows["bow/max"]["non_gt"]["pearson"] == pytest.approx(1.0)
    assert rows["bow/max"]["non_gt"]["kendall"] == pytest.approx(1.0)
    assert stored.report["sits"]["ground_truth_pairs"] == 40

    staff = django_user_model.objects.create_user("admin", password="pw", is_staff=True)
    client.force_login(staff)
    page = client.get(reverse("frontend:dataset-relevance", args=[dataset.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="calibration-sits"' in html and "<svg" in html and "bow/max" in html


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("COCO_val2014:sentid:999999999", "synthetic_000001.png", 1.0)], "not in the dataset"),
        ([("caption 1", "synthetic_000001.png", 1.0)], "COCO_val2014:sentid:<caption id>"),
        ([("COCO_val2014:sentid:1", "x.png", 1.0)], "must be a COCO file name"),
    ],
)
def test_relevance_calibrate_names_a_bad_ratings_line(dataset, tmp_path, rows, message):
    path = sits_file(tmp_path, rows)
    with pytest.raises(CommandError, match=rf"sits.csv:2: .*{message}"):
        run("relevance_calibrate", dataset.name, "--sits", str(path), "--proxies", "bow")
    assert not RelevanceCalibration.objects.exists()


def test_relevance_calibrate_refuses_unknown_proxies_and_missing_ratings(dataset, tmp_path):
    path = sits_file(tmp_path, rated_pairs(dataset, 5))
    with pytest.raises(CommandError, match="unknown relevance proxy 'nope'"):
        run("relevance_calibrate", dataset.name, "--sits", str(path), "--proxies", "nope")
    with pytest.raises(CommandError, match="no ratings"):
        run("relevance_calibrate", dataset.name, "--proxies", "bow")
    with pytest.raises(CommandError, match="neither a dataset name nor"):
        run("relevance_calibrate", "no-such-dataset")


def test_the_crowds_answers_are_ratings_too(graded_batch):
    release = released(graded_batch)
    table = run("relevance_calibrate", release.dataset.name, "--proxies", "bow,cider_d")
    assert table.startswith("crowd:")
    report = RelevanceCalibration.objects.get().report
    assert report["crowd"]["pairs"] > 0
    assert {row["proxy"] for row in report["crowd"]["table"]} >= {"bow/mean", "cider_d/max"}


def test_graded_metrics_skip_changed_or_unknown_proxies_and_fail_clearly(graded_batch, monkeypatch):
    release = released(graded_batch)
    rankings = model_rankings(release)
    release.manifest["relevance"]["versions"]["bow"] = 0  # written by an older bow
    release.manifest["relevance"]["proxies"].append("gone")
    release.save()

    scored = evaluation_submit(release=release, model_name="m", rankings=rankings)
    assert "ndcg@25:cider_d" in scored.metrics["i2t"]
    assert not any(key.endswith((":bow", ":gone")) for key in scored.metrics["i2t"])

    def broken(*args, **kwargs):
        raise RuntimeError("WordNet is not installed")

    monkeypatch.setattr("mitl.graded_evaluation.proxy_matrices", broken)
    with pytest.raises(ServiceError, match="graded metrics of cider_d: WordNet"):
        evaluation_submit(release=release, model_name="other", rankings=rankings)


def model_rankings(release: Release) -> dict:
    """Every target for each release query, in dataset order."""
    corpus = dataset_corpus(release.dataset).corpus
    truth = release_load(release.path)
    return {
        "i2t": {q: corpus.caption_ids.tolist() for q in truth.positives["i2t"]},
        "t2i": {q: corpus.image_ids.tolist() for q in truth.positives["t2i"]},
    }


def test_relevance_calibrate_edge_cases_are_clear_errors_or_skipped(dataset, tmp_path):
    image = dataset.images.order_by("pk").first()
    one_image = [
        (f"COCO_val2014:sentid:{c.ext_id}", image.file_name, 4.0) for c in image.captions.all()
    ]
    path = sits_file(tmp_path, one_image)

    table = run(
        "relevance_calibrate", dataset.name, "--sits", str(path), "--proxies", "bow,cider_d"
    )
    assert "combination" not in table  # one rated image: nothing to hold out
    with pytest.raises(CommandError, match="names no proxy"):
        run("relevance_calibrate", dataset.name, "--sits", str(path), "--proxies", ",")
    with pytest.raises(CommandError, match="does not exist"):
        run("relevance_calibrate", dataset.name, "--sits", str(path), "--out", "/no/such/x.json")
