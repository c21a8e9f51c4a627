"""The bias report of a real small batch (three annotators, simulated crowd), and its command."""

from __future__ import annotations

import json
from io import StringIO
from itertools import combinations
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ServiceError
from annotation.models import (
    ORIGINAL_SET,
    AssignmentStatus,
    Batch,
    Candidate,
    Caption,
    Image,
    ItemRole,
    Judgement,
    MachineAnnotator,
    PositivePair,
    Proposal,
    Query,
    Ranking,
    Release,
    Verdict,
)
from mitl.bias import MAX_ANNOTATORS
from mitl.bias_html import render_bias_html
from mitl.metrics import recall_at_k
from pipeline.annotators import annotator_create
from pipeline.bias import bias_report_build
from pipeline.stages import batch_create, batch_run_until
from tests.pipeline_runs import run_to_release

pytestmark = pytest.mark.django_db

NAMES = ["bow-plain", "labels", "tfidf"]  # name order, as the report lists them


@pytest.fixture
def three_annotator_batch(dataset, annotators, small_config) -> Batch:
    """A draft batch of the two bag-of-words annotators and an object-label one."""
    annotator_create(name="labels", kind="object_labels", config={})
    return batch_create(
        dataset=dataset, name="bias batch", raw_config={**small_config, "annotators": NAMES}
    )


@pytest.fixture
def released(three_annotator_batch) -> Batch:
    return run_to_release(three_annotator_batch)


def rankings_by_direction(batch: Batch, name: str) -> dict[str, dict[int, list[int]]]:
    """An annotator's stored rankings per direction, keyed by query pk."""
    out: dict[str, dict[int, list[int]]] = {"i2t": {}, "t2i": {}}
    for query, direction, targets in Ranking.objects.filter(
        query__batch=batch, annotator__name=name
    ).values_list("query_id", "query__direction", "targets"):
        out[direction][query] = targets
    return out


def subset_positives(batch: Batch, members: tuple[str, ...]) -> dict[str, dict[int, set[int]]]:
    """Positives of the release built from `members`, read straight from the tables."""
    pairs = set(
        PositivePair.objects.filter(
            positive_set__dataset=batch.dataset, positive_set__name=ORIGINAL_SET
        ).values_list("image_id", "caption_id")
    )
    pairs |= set(
        Verdict.objects.filter(
            candidate__batch=batch,
            is_positive=True,
            candidate__proposals__annotator__name__in=members,
        ).values_list("candidate__image_id", "candidate__caption_id")
    )
    out: dict[str, dict[int, set[int]]] = {"i2t": {}, "t2i": {}}
    for pk, direction, image, caption in Query.objects.filter(batch=batch).values_list(
        "pk", "direction", "image_id", "caption_id"
    ):
        if direction == "i2t":
            out["i2t"][pk] = {c for i, c in pairs if i == image}
        else:
            out["t2i"][pk] = {i for i, c in pairs if c == caption}
    return out


def test_report_is_json_with_every_subset_of_the_annotators_in_both_directions(released):
    report = bias_report_build(batch=released)

    json.dumps(report, allow_nan=False)
    assert report["annotators"] == NAMES
    assert report["batch"]["k"] == 3
    assert set(report["bias"]) == {"t2i", "i2t"}
    for direction in ("t2i", "i2t"):
        section = report["bias"][direction]
        assert section["queries"] == 8
        assert [s["members"] for s in section["subsets"]] == [
            list(c) for size in (1, 2, 3) for c in combinations(NAMES, size)
        ]
        assert [row["subsets"] for row in section["by_size"]] == [3, 3, 1]
        everyone = section["subsets"][-1]
        assert everyone["bias"] == 0 and everyone["non_self_bias"] is None
        # Each annotator's top 1 is one of its own candidates, so Θ's release holds every
        # verified top 1 of Θ's members: no self-bias, and B is the weighted non-self-bias.
        for subset in section["subsets"][:-1]:
            assert subset["self_bias"] == 0
            assert subset["bias"] == pytest.approx(
                subset["non_self_bias"] * (3 - subset["size"]) / 3
            )
        assert any(subset["bias"] > 0 for subset in section["subsets"])


def test_every_subset_scores_each_annotator_as_recall_at_1_on_its_own_release(released):
    report = bias_report_build(batch=released)

    for subset_size in (1, 2, 3):
        for members in combinations(NAMES, subset_size):
            positives = subset_positives(released, members)
            for direction in ("t2i", "i2t"):
                row = next(
                    s
                    for s in report["bias"][direction]["subsets"]
                    if tuple(s["members"]) == members
                )
                for name in NAMES:
                    ranking = rankings_by_direction(released, name)[direction]
                    expected = 100 * recall_at_k(ranking, positives[direction], 1)
                    assert row["recall_at_1"][name] == pytest.approx(expected), (members, name)


def test_all_scores_each_annotator_against_the_release_on_disk(released):
    """s_All is the R@1 on the release's own files (ext ids), read as a user would."""
    report = bias_report_build(batch=released)
    folder = Path(Release.objects.get(batches=released).path)
    files = {
        "i2t": json.loads((folder / "image_to_caption.json").read_text()),
        "t2i": json.loads((folder / "caption_to_image.json").read_text()),
    }
    image_ext = dict(Image.objects.values_list("pk", "ext_id"))
    caption_ext = dict(Caption.objects.values_list("pk", "ext_id"))
    query_ext = {
        pk: image_ext[image] if direction == "i2t" else caption_ext[caption]
        for pk, direction, image, caption in Query.objects.filter(batch=released).values_list(
            "pk", "direction", "image_id", "caption_id"
        )
    }
    for name in NAMES:
        for direction, target_ext in (("i2t", caption_ext), ("t2i", image_ext)):
            ranking = {
                str(query_ext[q]): [target_ext[t] for t in targets]
                for q, targets in rankings_by_direction(released, name)[direction].items()
            }
            expected = 100 * recall_at_k(ranking, files[direction], 1)
            everyone = report["bias"][direction]["subsets"][-1]["recall_at_1"][name]
            assert everyone == pytest.approx(expected)
            assert report["bias"][direction]["recall_at_1_release"][name] == pytest.approx(expected)


def test_answer_shares_count_the_approved_judgements_of_each_annotators_candidates(released):
    report = bias_report_build(batch=released)

    approved = Judgement.objects.filter(
        assignment__hit__batch=released,
        assignment__status=AssignmentStatus.APPROVED,
        item__role=ItemRole.TASK,
    )
    assert approved.exists()
    for name in NAMES:
        mine = approved.filter(item__candidate__proposals__annotator__name=name).distinct()
        stats = report["answers"]["by_annotator"][name]
        assert stats["judgements"] == mine.count()
        assert sum(stats["shares"].values()) == pytest.approx(1)
        yes = mine.filter(level="yes").count()
        assert stats["shares"]["yes"] == pytest.approx(yes / mine.count())
    ranks = report["answers"]["by_rank"]
    assert set(ranks) == {"1", "2", "3"}
    at_rank_1 = approved.filter(item__candidate__proposals__rank=1).distinct().count()
    assert ranks["1"]["judgements"] == at_rank_1
    middle = approved.filter(level__in=["weak_yes", "weak_no"])
    for name in NAMES:
        rationales = report["rationales"][name]
        for level in ("weak_yes", "weak_no"):
            count = (
                middle.filter(level=level, item__candidate__proposals__annotator__name=name)
                .distinct()
                .count()
            )
            assert rationales[level]["judgements"] == count


def test_positives_found_by_one_annotator_only_match_the_proposals(released):
    report = bias_report_build(batch=released)

    positive = Verdict.objects.filter(candidate__batch=released, is_positive=True)
    assert report["positives"]["verified_positives"] == positive.count()
    for name in NAMES:
        stats = report["positives"]["by_annotator"][name]
        mine = positive.filter(candidate__proposals__annotator__name=name).distinct()
        alone = [
            c
            for c in mine.values_list("candidate_id", flat=True)
            if set(
                Proposal.objects.filter(candidate_id=c).values_list("annotator__name", flat=True)
            )
            == {name}
        ]
        assert stats["verified"] == mine.count()
        assert stats["only_this"] == len(alone)
        assert stats["candidates"] == (
            Proposal.objects.filter(candidate__batch=released, annotator__name=name)
            .values("candidate")
            .distinct()
            .count()
        )


def test_answers_and_positives_leave_out_the_candidates_of_invalid_captions(released):
    approved = Judgement.objects.filter(
        assignment__hit__batch=released,
        assignment__status=AssignmentStatus.APPROVED,
        item__role=ItemRole.TASK,
    )
    caption = approved.order_by("pk").first().item.caption
    Caption.objects.filter(pk=caption.pk).update(is_invalid=True, invalid_reason="meaningless")
    valid = approved.filter(item__caption__is_invalid=False)
    on_caption = approved.filter(item__caption=caption).count()
    assert on_caption

    report = bias_report_build(batch=released)

    assert report["judgements_on_invalid_captions"] == on_caption
    for name in NAMES:
        mine = valid.filter(item__candidate__proposals__annotator__name=name).distinct()
        assert report["answers"]["by_annotator"][name]["judgements"] == mine.count()
        for level in ("weak_yes", "weak_no"):
            middle = mine.filter(level=level).count()
            assert report["rationales"][name][level]["judgements"] == middle
    by_rank = report["answers"]["by_rank"]
    at_rank_1 = valid.filter(item__candidate__proposals__rank=1).distinct().count()
    assert by_rank["1"]["judgements"] == at_rank_1
    candidates = Candidate.objects.filter(batch=released, proposals__isnull=False).distinct()
    assert report["candidates_on_invalid_captions"] == candidates.filter(caption=caption).count()
    positive = Verdict.objects.filter(
        candidate__batch=released, is_positive=True, candidate__caption__is_invalid=False
    )
    assert report["positives"]["verified_positives"] == positive.count()
    for name in NAMES:
        stats = report["positives"]["by_annotator"][name]
        mine = candidates.filter(proposals__annotator__name=name, caption__is_invalid=False)
        assert stats["candidates"] == mine.distinct().count()
        assert (
            stats["verified"]
            == positive.filter(candidate__proposals__annotator__name=name).distinct().count()
        )
    html = render_bias_html(report)
    assert (
        f"{report['candidates_on_invalid_captions']} candidates and {on_caption} approved" in html
    )


def test_a_batch_without_verdicts_is_refused(three_annotator_batch):
    batch_run_until(batch_id=three_annotator_batch.pk, until="annotating")
    batch = Batch.objects.get(pk=three_annotator_batch.pk)
    with pytest.raises(ServiceError, match="no verdicts yet"):
        bias_report_build(batch=batch)


def test_more_annotators_than_the_subset_limit_are_refused(batch):
    extra = [
        MachineAnnotator.objects.create(name=f"extra-{i}", kind="bow")
        for i in range(MAX_ANNOTATORS + 1 - batch.annotators.count())
    ]
    batch.annotators.add(*extra)
    with pytest.raises(ServiceError, match=f"at most {MAX_ANNOTATORS}"):
        bias_report_build(batch=batch)


# --- the command ---------------------------------------------------------------------------


def test_command_writes_the_html_and_the_json_report(released, tmp_path):
    out, err = StringIO(), StringIO()
    folder = tmp_path / "reports" / "bias"
    call_command("bias_report", str(released.pk), "--out", str(folder), stdout=out, stderr=err)

    numbers = json.loads((folder / "bias_report.json").read_text())
    assert numbers == bias_report_build(batch=released)
    html = (folder / "bias_report.html").read_text()
    assert html.startswith("<!doctype html>") and html.count("<svg") == 3
    assert f"{folder / 'bias_report.html'}" in out.getvalue()
    for name in NAMES:
        assert f"t2i R@1 bias of {name}'s candidates alone: B " in out.getvalue()
    assert "bias t2i: 7/7 subsets scored" in err.getvalue()
    assert "bias i2t: 7/7 subsets scored" in err.getvalue()


def test_command_refuses_a_batch_that_is_not_aggregated(batch, tmp_path):
    batch_run_until(batch_id=batch.pk, until="annotating")
    with pytest.raises(CommandError, match=r"no verdicts yet.*batch_run"):
        call_command("bias_report", str(batch.pk), "--out", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_command_refuses_an_unknown_batch(db, tmp_path):
    with pytest.raises(CommandError, match="no batch 999"):
        call_command("bias_report", "999", "--out", str(tmp_path))


def test_command_says_when_it_cannot_write_the_folder(released, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(CommandError, match="cannot write the report"):
        call_command("bias_report", str(released.pk), "--out", str(blocker))
