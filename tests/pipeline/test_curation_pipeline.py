"""Adaptive curation end to end on the small synthetic dataset: rounds, budget, estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotation.budget import BudgetSpent, judgements_spent
from annotation.handout import assignment_create, hit_assign_next
from annotation.models import (
    HIT,
    Assignment,
    Batch,
    BatchState,
    Candidate,
    HITItem,
    Judgement,
    Proposal,
    Release,
)
from annotation.services import worker_simulated_get_or_create
from mitl.config import ConfigError, batch_config, parse_batch_config
from mitl.release_files import STATS_FILE
from pipeline.autopilot import autopilot_request
from pipeline.curation import REPORT_KEY
from pipeline.demo import rounds_run
from pipeline.simulate import crowd_simulate_reviewed
from pipeline.stages import batch_create, batch_run_until, stage_advance
from pipeline.tasks import crowd_autopilot as crowd_autopilot_task

pytestmark = pytest.mark.django_db

# 8 + 2 goldens per HIT, 2 workers: 20 judgements a HIT; 3 HITs a round at most.
BUDGET = 200


@pytest.fixture
def adaptive_config(small_config) -> dict:
    return {
        **small_config,
        "strategy": "adaptive",
        "adjudication": "learned",
        "budget_judgements": BUDGET,
        "round_size": 70,
        "ranking_depth": 20,
        "estimate_share": 0.25,
    }


def adaptive_batch(dataset, config: dict) -> Batch:
    return batch_create(dataset=dataset, name="adaptive", raw_config=config)


def crowd_work(hit: HIT, worker) -> None:
    """One worker answers every pair of the HIT "100% YES" (goldens too: approved or not)."""
    from annotation.models import items_shown_to
    from annotation.submissions import AnswerInput, assignment_submit

    assignment = assignment_create(hit=hit, worker=worker)
    answers = [
        AnswerInput(item_id=item_id, level="yes", elapsed_ms=500)
        for item_id in hit.items.filter(items_shown_to(assignment.pk)).values_list("pk", flat=True)
    ]
    result = assignment_submit(assignment=assignment, answers=answers, followups_required=False)
    if result.assignment.status != "approved":
        from annotation.review import assignment_review

        assignment_review(assignment=result.assignment, approve=True)


def test_adaptive_needs_a_budget_that_pays_for_a_hit(small_config):
    with pytest.raises(ConfigError) as missing:
        parse_batch_config({**small_config, "strategy": "adaptive"})
    assert missing.value.key == "budget_judgements"
    with pytest.raises(ConfigError) as small_round:
        parse_batch_config(
            {**small_config, "strategy": "adaptive", "budget_judgements": 500, "round_size": 5}
        )
    assert small_round.value.key == "round_size"
    with pytest.raises(ConfigError) as unknown:
        parse_batch_config({**small_config, "adjudication": "oracle"})
    assert unknown.value.key == "adjudication"
    config = parse_batch_config({**small_config, "strategy": "adaptive", "budget_judgements": 500})
    assert config.depth == 100 and config.judgements_per_round == 100
    assert parse_batch_config(small_config).depth == small_config["golden_negative_depth"]


def test_rounds_run_until_the_budget_is_spent_and_never_past_it(
    dataset, annotators, adaptive_config
):
    batch = adaptive_batch(dataset, adaptive_config)

    rounds_run(batch, n_workers=6, seed=3)  # the demo's loop: judge, close, next round

    assert Batch.objects.get(pk=batch.pk).state == BatchState.RELEASED

    batch.refresh_from_db()
    assert batch.round >= 2
    judgements = Judgement.objects.filter(assignment__hit__batch=batch).count()
    assert judgements <= BUDGET
    assert judgements == judgements_spent(batch_id=batch.pk, items_per_hit=10)
    # Every round built its own HITs after the earlier ones, from its own candidates.
    rounds = sorted(set(HIT.objects.filter(batch=batch).values_list("round", flat=True)))
    assert rounds == list(range(len(rounds))) and len(rounds) >= 2
    indexes = list(
        HIT.objects.filter(batch=batch).order_by("index").values_list("index", flat=True)
    )
    assert indexes == list(range(len(indexes)))
    for hit in HIT.objects.filter(batch=batch, round__gt=0):
        new = HITItem.objects.filter(hit=hit, role="task", candidate__round=hit.round).count()
        shown_again = HITItem.objects.filter(hit=hit, role="task", candidate__round__lt=hit.round)
        assert new + shown_again.count() > 0
    report = batch.reports[REPORT_KEY]
    recorded = [entry["round"] for entry in report["rounds"]]
    assert recorded == list(range(batch.round + 1))
    # Policy pairs carry their proposals; sampled pairs carry none (nobody proposed them).
    sampled = Candidate.objects.filter(batch=batch).exclude(sample_stratum="")
    assert sampled.exists()
    assert not Proposal.objects.filter(candidate__in=sampled).exists()
    chosen = Candidate.objects.filter(batch=batch, sample_stratum="")
    assert Proposal.objects.filter(candidate__in=chosen).count() >= chosen.count()

    release = Release.objects.get(batches=batch)
    stats = json.loads((Path(release.path) / STATS_FILE).read_text())
    assert stats["curation"]["strategy"] == "adaptive"
    assert stats["curation"]["rounds"] == batch.round + 1
    assert stats["curation"]["judgements_spent"] == judgements
    for direction in ("i2t", "t2i"):
        estimate = stats["curation"]["directions"][direction]["estimate"]
        assert estimate is not None
        assert 0 <= estimate["recall_low"] <= estimate["recall"] <= estimate["recall_high"] <= 1
    datasheet = (Path(release.path) / "README.md").read_text()
    assert "## Completeness" in datasheet and "estimated recall" in datasheet


def test_hand_out_refuses_work_the_budget_cannot_pay_for(dataset, annotators, adaptive_config):
    batch = adaptive_batch(dataset, {**adaptive_config, "budget_judgements": 40})
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == BatchState.ANNOTATING
    hit = HIT.objects.get(batch=batch)  # 40 judgements buy one HIT of 2 x (8 + 2) pairs
    # Slots beyond the plan, as rejected work would free them for re-posting.
    HIT.objects.filter(pk=hit.pk).update(max_assignments=5)
    workers = [worker_simulated_get_or_create(name=f"w{i}", profile={}) for i in range(5)]
    for worker in workers[:4]:
        assignment_create(hit=hit, worker=worker)  # each promises 10 judgements
    assert judgements_spent(batch_id=batch.pk, items_per_hit=10) == 40

    with pytest.raises(BudgetSpent, match="spent 40 of its 40 judgements"):
        assignment_create(hit=hit, worker=workers[4])
    assert hit_assign_next(worker=workers[4]) is None  # no error: nothing it can pay for
    assert Assignment.objects.filter(hit__batch=batch).count() == 4


def test_force_closes_only_the_round_being_judged(dataset, annotators, adaptive_config):
    batch = adaptive_batch(dataset, adaptive_config)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == BatchState.ANNOTATING
    crowd_simulate_reviewed(
        batch=batch, config=batch_config(batch), n_workers=6, feedback="golden", seed=3
    )

    state = batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED, force=True)

    batch.refresh_from_db()
    assert state == BatchState.ANNOTATING and batch.round == 1  # round 1 waits for people
    assert not Assignment.objects.filter(hit__round=1).exists()
    # A late duplicate of round 0's aggregation is a no-op, not an error.
    assert stage_advance(batch_id=batch.pk, stage=BatchState.AGGREGATING).moved is False
    batch.refresh_from_db()
    assert batch.state == BatchState.ANNOTATING and batch.round == 1


@pytest.mark.django_db(transaction=True)  # on_commit runs at once, as in eager production
def test_the_autopilot_follows_every_round_to_the_release(
    dataset, annotators, adaptive_config, eager_celery
):
    batch = adaptive_batch(dataset, adaptive_config)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == BatchState.ANNOTATING
    autopilot_request(batch=batch)

    crowd_autopilot_task.delay(batch.pk)

    batch.refresh_from_db()
    assert batch.state == BatchState.RELEASED
    assert batch.round >= 2
    assert not HIT.objects.filter(batch=batch, assignments__isnull=True).exists() or (
        Judgement.objects.filter(assignment__hit__batch=batch).count() + 20 > BUDGET
    )


def test_a_budget_with_the_reserve_always_buys_the_first_round(small_config):
    # 8 + 2 pairs x 2 workers = 20 judgements a HIT, 23 with the 15% re-post reserve.
    config = {**small_config, "strategy": "adaptive"}
    with pytest.raises(ConfigError, match=r"x 2 assignments \+ 15% = 23; got 22"):
        parse_batch_config({**config, "budget_judgements": 22})
    fits = parse_batch_config({**config, "budget_judgements": 100})
    assert fits.judgements_per_round == 23  # a fifth (20) would not buy one HIT


def test_a_round_closed_early_never_blocks_the_next(dataset, annotators, adaptive_config):
    batch = adaptive_batch(dataset, adaptive_config)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == BatchState.ANNOTATING
    round_0 = list(HIT.objects.filter(batch=batch, round=0).order_by("index"))
    # Only the first HIT of round 0 gets its work; the round is closed early.
    workers = [worker_simulated_get_or_create(name=f"w{i}", profile={}) for i in range(2)]
    for worker in workers:
        crowd_work(round_0[0], worker)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED, force=True) == (
        BatchState.ANNOTATING
    )
    batch.refresh_from_db()
    assert batch.round == 1
    # Round 1's HITs get their work; round 0's unfinished ones do not hold the batch back.
    for hit in HIT.objects.filter(batch=batch, round=1):
        for worker in workers:
            crowd_work(hit, worker)
    state = batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED)
    batch.refresh_from_db()
    assert state != BatchState.ANNOTATING or batch.round > 1


def test_selecting_a_round_again_after_a_crash_changes_nothing(
    dataset, annotators, adaptive_config
):
    from pipeline.curation_select import round_select
    from pipeline.progress import StageTracker

    batch = adaptive_batch(dataset, adaptive_config)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == BatchState.ANNOTATING
    batch.refresh_from_db()
    before = (Candidate.objects.filter(batch=batch).count(), batch.reports[REPORT_KEY]["rounds"])
    tracker = StageTracker(batch=batch, stage=BatchState.POOLING)

    again = round_select(batch=batch, config=batch_config(batch), tracker=tracker)

    batch.refresh_from_db()
    assert again == before[0]
    assert (
        Candidate.objects.filter(batch=batch).count(),
        batch.reports[REPORT_KEY]["rounds"],
    ) == before
