"""Storing evaluations (pipeline.evaluate) and the `evaluate` command."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ServiceError
from annotation.models import Evaluation, Release
from mitl.coco_recalls import coco_recalls
from mitl.evaluation import evaluate
from mitl.evaluation_inputs import release_load
from mitl.formats.captions import parse_captions_tsv
from mitl.release_files import I2T_FILE, T2I_FILE
from pipeline.evaluate import evaluation_submit, leaderboard_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(dataset, tmp_path: Path) -> Release:
    """A release of 4 image and 4 caption queries with their original positives."""
    folder = tmp_path / "release"
    folder.mkdir()
    images = list(dataset.images.order_by("pk")[:4])
    captions = list(dataset.captions.select_related("image").order_by("pk")[:4])
    i2t = {
        str(image.ext_id): sorted(image.captions.values_list("ext_id", flat=True))
        for image in images
    }
    t2i = {str(caption.ext_id): [caption.image.ext_id] for caption in captions}
    (folder / I2T_FILE).write_text(json.dumps(i2t))
    (folder / T2I_FILE).write_text(json.dumps(t2i))
    return Release.objects.create(
        dataset=dataset, name="small", version=1, rule="eccv", path=str(folder), manifest={}
    )


def model_rankings(release: Release, seed: int, *, everything: bool = False) -> dict:
    """Rank every target for each query in a seeded order (every item as a query if asked)."""
    rng = np.random.default_rng(seed)
    images = list(release.dataset.images.order_by("pk").values_list("ext_id", flat=True))
    captions = list(release.dataset.captions.order_by("pk").values_list("ext_id", flat=True))
    truth = release_load(release.path)
    i2t_queries = images if everything else list(truth.positives["i2t"])
    t2i_queries = captions if everything else list(truth.positives["t2i"])
    return {
        "i2t": {q: rng.permutation(captions).tolist() for q in i2t_queries},
        "t2i": {q: rng.permutation(images).tolist() for q in t2i_queries},
    }


def test_a_submission_stores_the_metrics_of_evaluate(release, django_user_model):
    user = django_user_model.objects.create_user("ann")
    rankings = model_rankings(release, 1)

    evaluation = evaluation_submit(
        release=release, model_name=" model-a ", rankings=rankings, submitted_by=user
    )

    evaluation.refresh_from_db()
    assert evaluation.model_name == "model-a"
    assert evaluation.submitted_by == user
    assert evaluation.metrics == evaluate(release_load(release.path), rankings)
    assert len(evaluation.rankings_sha256) == 64


def test_the_same_rankings_again_return_the_stored_row_untouched(release):
    rankings = model_rankings(release, 1)
    first = evaluation_submit(release=release, model_name="a", rankings=rankings)
    Evaluation.objects.filter(pk=first.pk).update(metrics={"marker": True})

    again = evaluation_submit(release=release, model_name="a", rankings=rankings)

    assert again.pk == first.pk
    assert Evaluation.objects.get(pk=first.pk).metrics == {"marker": True}


def test_other_rankings_under_the_same_name_replace_the_row(release):
    first = evaluation_submit(release=release, model_name="a", rankings=model_rankings(release, 1))
    second = evaluation_submit(release=release, model_name="a", rankings=model_rankings(release, 2))

    assert Evaluation.objects.count() == 1
    assert second.pk == first.pk
    assert second.rankings_sha256 != first.rankings_sha256
    assert Evaluation.objects.get().metrics == second.metrics != first.metrics


def test_only_the_submitter_or_staff_may_replace_a_models_row(release, django_user_model):
    alice = django_user_model.objects.create_user("alice")
    mallory = django_user_model.objects.create_user("mallory")
    boss = django_user_model.objects.create_user("boss", is_staff=True)
    mine = evaluation_submit(
        release=release, model_name="a", rankings=model_rankings(release, 1), submitted_by=alice
    )
    with pytest.raises(ServiceError, match="submitted by another account"):
        evaluation_submit(
            release=release,
            model_name="a",
            rankings=model_rankings(release, 2),
            submitted_by=mallory,
        )
    assert Evaluation.objects.get().metrics == mine.metrics
    evaluation_submit(
        release=release, model_name="a", rankings=model_rankings(release, 2), submitted_by=alice
    )
    evaluation_submit(
        release=release, model_name="a", rankings=model_rankings(release, 3), submitted_by=boss
    )
    assert Evaluation.objects.count() == 1


def test_bad_rankings_or_names_store_nothing(release):
    rankings = model_rankings(release, 1)
    missing = {"i2t": dict(list(rankings["i2t"].items())[1:]), "t2i": rankings["t2i"]}
    with pytest.raises(ServiceError, match="i2t: 1 of the release's 4 queries have no ranking"):
        evaluation_submit(release=release, model_name="a", rankings=missing)
    with pytest.raises(ServiceError, match="model name must have 1 to 200 characters"):
        evaluation_submit(release=release, model_name="  ", rankings=rankings)
    assert not Evaluation.objects.exists()


def test_rankings_of_every_item_of_the_dataset_add_the_coco_recalls(release, synthetic_files):
    rankings = model_rankings(release, 3, everything=True)

    evaluation = evaluation_submit(release=release, model_name="a", rankings=rankings)

    # the dataset's captions in import order are the captions file's: the split
    rows = parse_captions_tsv(synthetic_files / "captions.tsv")
    expected = coco_recalls(
        rankings["i2t"],
        rankings["t2i"],
        caption_ids=[row.caption_id for row in rows],
        caption_images=[row.image_id for row in rows],
    )
    for direction in ("i2t", "t2i"):
        stored = evaluation.metrics[direction]
        assert {key: stored[key] for key in expected[direction]} == expected[direction]
        assert stored["recall@1"] is not None


def ordered_rankings(release: Release, style: str) -> dict:
    """Rank every target: positives first ("best"), after one negative ("second"), or last."""
    truth = release_load(release.path)
    targets = {
        "i2t": list(release.dataset.captions.values_list("ext_id", flat=True)),
        "t2i": list(release.dataset.images.values_list("ext_id", flat=True)),
    }
    rankings: dict = {"i2t": {}, "t2i": {}}
    for direction, positives in truth.positives.items():
        for query, positive in positives.items():
            negatives = [t for t in targets[direction] if t not in positive]
            rankings[direction][query] = {
                "best": positive + negatives,
                "second": negatives[:1] + positive + negatives[1:],
                "last": negatives + positive,
            }[style]
    return rankings


def test_the_leaderboard_lists_models_and_how_metrics_agree(release):
    for style in ("second", "last", "best"):
        rankings = ordered_rankings(release, style)
        evaluation_submit(release=release, model_name=style, rankings=rankings)

    board = leaderboard_of(release=release)

    assert [e.model_name for e in board.evaluations] == ["best", "last", "second"]
    assert board.metrics[:3] == ["recall@1", "recall@5", "recall@10"]
    agreement = board.agreement["i2t"]
    r1, map_r = board.metrics.index("recall@1"), board.metrics.index("map_at_r")
    # R@1 gives 1, 0, 0 (a tie) and mAP@R 1 > x > 0: 2 concordant pairs of 2 x 3 untied
    assert agreement.tau[r1][map_r] == pytest.approx(2 / 6**0.5)
    assert agreement.tau[map_r][map_r] == 1.0
    assert agreement.models[r1][map_r] == 3


def run_evaluate(*args: str) -> str:
    out = StringIO()
    call_command("evaluate", *args, stdout=out)
    return out.getvalue()


def test_the_command_prints_the_metrics_as_json_or_a_table(release, tmp_path):
    rankings = model_rankings(release, 1)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(rankings))

    printed = json.loads(run_evaluate("--release", release.path, "--rankings", str(path), "--json"))
    table = run_evaluate("--release", release.path, "--rankings", str(path))

    assert printed == json.loads(json.dumps(evaluate(release_load(release.path), rankings)))
    assert {"recall@1", "recall@5", "recall@10", "r_precision", "map_at_r", "ndcg@10"} <= set(
        printed["i2t"]
    )
    assert "recall@1" in table and "map_at_r" in table and "{" not in table
    assert not Evaluation.objects.exists()  # the command stores nothing


def test_the_command_adds_coco_recalls_with_the_captions_file(release, tmp_path, synthetic_files):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model_rankings(release, 1, everything=True)))

    captions = str(synthetic_files / "captions.tsv")
    args = ["--release", release.path, "--rankings", str(path), "--captions", captions]
    printed = json.loads(run_evaluate(*args, "--json"))

    assert "coco_1k_recall@5" in printed["t2i"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"model\.json: file not found"),
        ("{oops", r"model\.json: not valid JSON"),
        ('{"i2t": {}, "t2i": []}', r"model\.json: rankings t2i must be a JSON object"),
        ('{"i2t": {}, "t2i": {}}', r"model\.json: i2t: 4 of the release's 4 queries"),
    ],
)
def test_the_command_turns_bad_files_into_a_clear_error(release, tmp_path, content, message):
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CommandError, match=message):
        run_evaluate("--release", release.path, "--rankings", str(path))


def test_the_command_names_a_missing_release_or_captions_file(release, tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model_rankings(release, 1)))
    with pytest.raises(CommandError, match="not a release directory"):
        run_evaluate("--release", str(tmp_path / "nowhere"), "--rankings", str(path))
    with pytest.raises(CommandError, match=r"captions\.tsv: cannot open"):
        run_evaluate(
            "--release", release.path, "--rankings", str(path),
            "--captions", str(tmp_path / "captions.tsv"),
        )  # fmt: skip


def test_the_command_is_held_to_the_leaderboards_limits_unless_told(release, tmp_path, settings):
    # The leaderboard's own depth limit: every caption (80) is deeper than 50.
    settings.EVALUATION_MAX_RANKING_LENGTH = 50
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model_rankings(release, 1)))
    args = ["--release", release.path, "--rankings", str(path), "--json"]

    with pytest.raises(CommandError, match=r"model\.json: .* more than the 50 accepted \(the dep"):
        run_evaluate(*args)
    settings.EVALUATION_MAX_BODY_BYTES = 1024
    with pytest.raises(CommandError, match=r"over the size limit of 1\.0 KB"):
        run_evaluate(*args)
    assert json.loads(run_evaluate(*args, "--no-limits"))["i2t"]["recall@1"] is not None


def test_the_command_caps_the_queries_at_the_split_it_is_given(release, tmp_path, synthetic_files):
    rankings = model_rankings(release, 1, everything=True)
    rankings["t2i"][10**9] = rankings["t2i"][next(iter(rankings["t2i"]))]  # one caption too many
    path = tmp_path / "model.json"
    path.write_text(json.dumps(rankings))
    captions = str(synthetic_files / "captions.tsv")
    count = release.dataset.captions.count()

    with pytest.raises(CommandError, match=f"ranks {count + 1} queries, more than the {count}"):
        run_evaluate("--release", release.path, "--rankings", str(path), "--captions", captions)
