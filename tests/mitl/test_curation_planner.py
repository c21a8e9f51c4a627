"""The planner: predicted positives per strategy and budget, by hand on tiny rankings."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Batch, BatchState
from mitl.curation.planner import PlanCosts, fixed_pairs, pair_chances, plan_points
from mitl.curation.policies import RANK_BANDS
from mitl.curation.rankings import QueryRankings

CURVE = [0.8, 0.6, 0.4] + [0.1] * (len(RANK_BANDS) - 3)  # ranks 1, 2, 3, then 0.1


def test_a_pair_takes_its_best_annotators_yield_at_its_rank() -> None:
    query = QueryRankings(1, {7: [(1, 10), (1, 11)], 8: [(1, 11), (1, 12)]}, "i2t")
    chances = pair_chances([query], {("i2t", 7): CURVE, ("i2t", 8): CURVE}, excluded={(1, 12)})
    assert chances == {(1, 10): 0.8, (1, 11): 0.8}  # (1, 11): rank 1 for annotator 8
    assert fixed_pairs([query], 1, excluded=set()) == {(1, 10), (1, 11)}


def test_plan_points_by_hand() -> None:
    costs = PlanCosts(hit_size=2, items_per_hit=4, assignments_per_hit=1, reposts=0.0)
    assert costs.judgements_for(3) == 8  # 2 HITs of 4 pairs each
    assert costs.pairs_for(9) == 4  # 9 judgements buy 2 HITs, 4 pairs
    chances = {
        (1, c): p for c, p in zip(range(10, 16), (0.9, 0.8, 0.7, 0.2, 0.1, 0.05), strict=True)
    }
    fixed = {(1, 10), (1, 13), (1, 14), (1, 15)}  # 0.9 + 0.2 + 0.1 + 0.05 = 1.25
    points = plan_points(
        chances=chances,
        fixed=fixed,
        budgets=[4, 8, 16],
        fixed_costs=costs,
        adaptive_costs=costs,
        estimate_share=0.0,
        tail_pairs=100,
        tail_rate=0.01,
    )
    by = {(p.strategy, p.budget): p for p in points}
    total = sum(chances.values()) + 100 * 0.01
    # Fixed costs 8: 4 judgements buy half of it, 16 buy no more than all of it.
    assert by[("fixed", 4)].positives == pytest.approx(1.25 / 2)
    assert by[("fixed", 16)].positives == pytest.approx(1.25)
    assert by[("fixed", 16)].judgements == 8
    # Adaptive takes the likeliest pairs: 8 judgements buy 4 pairs, 0.9 + 0.8 + 0.7 + 0.2.
    assert by[("adaptive", 8)].positives == pytest.approx(2.6)
    assert by[("adaptive", 8)].recall == pytest.approx(2.6 / total)
    # 16 judgements buy 8 pairs but only 6 are ranked: all of them, and 2 from the tail.
    assert by[("adaptive", 16)].positives == pytest.approx(sum(chances.values()) + 2 * 0.01)


def test_without_a_tail_rate_recall_is_not_told() -> None:
    costs = PlanCosts(hit_size=2, items_per_hit=4, assignments_per_hit=1, reposts=0.0)
    points = plan_points(
        chances={(1, 10): 0.5},
        fixed={(1, 10)},
        budgets=[8],
        fixed_costs=costs,
        adaptive_costs=costs,
        estimate_share=0.1,
        tail_pairs=10,
        tail_rate=None,
    )
    assert all(p.recall is None for p in points)


@pytest.mark.django_db
def test_the_command_plans_a_new_batch_after_retrieval_only(
    dataset, annotators, small_config, tmp_path
):
    (tmp_path / "batch.json").write_text(json.dumps(small_config))
    out = StringIO()

    call_command(
        "batch_plan",
        "small",
        "--config",
        str(tmp_path / "batch.json"),
        "--budget",
        "100,400",
        "--chart",
        str(tmp_path / "plan.svg"),
        "--json",
        stdout=out,
    )

    plan = json.loads(out.getvalue())
    batch = Batch.objects.get(pk=plan["batch"])
    assert batch.state == BatchState.POOLING  # ranked, nothing to judge yet: nothing paid
    assert not batch.hits.exists()
    assert plan["history_batches"] == [] and plan["tail_rate"] is None
    strategies = {(p["strategy"], p["budget"]) for p in plan["points"]}
    assert strategies == {("fixed", 100), ("fixed", 400), ("adaptive", 100), ("adaptive", 400)}
    for point in plan["points"]:
        assert point["judgements"] <= point["budget"]
    adaptive = {p["budget"]: p["positives"] for p in plan["points"] if p["strategy"] == "adaptive"}
    assert adaptive[400] > adaptive[100] > 0
    assert (tmp_path / "plan.svg").read_text().startswith("<svg")


@pytest.mark.django_db
def test_the_command_refuses_a_batch_without_rankings_and_bad_budgets(batch):
    with pytest.raises(CommandError, match="has no rankings yet"):
        call_command("batch_plan", "--batch", str(batch.pk))
    with pytest.raises(CommandError, match="whole numbers separated by commas"):
        call_command("batch_plan", "--batch", str(batch.pk), "--budget", "ten")
    with pytest.raises(CommandError, match="name a DATASET with --config"):
        call_command("batch_plan")
