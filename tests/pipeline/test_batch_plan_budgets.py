"""`batch_plan` compares budgets: an adaptive config need not name one first."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.models import Batch
from mitl.config import parse_planning_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def budgetless(small_config, tmp_path):
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps({**small_config, "strategy": "adaptive"}))  # no budget
    return path


def test_an_adaptive_config_without_a_budget_compares_the_default_budgets(
    dataset, annotators, budgetless, tmp_path
):
    out = StringIO()

    call_command(
        "batch_plan",
        "small",
        "--config",
        str(budgetless),
        "--json",
        "--chart",
        str(tmp_path / "plan.svg"),
        stdout=out,
    )

    plan = json.loads(out.getvalue())
    assert plan["batch"] is None and not Batch.objects.exists()  # nothing created or paid
    assert plan["empty"] is None
    budgets = sorted({p["budget"] for p in plan["points"]})
    fixed = plan["fixed_judgements"]
    assert budgets == sorted({round(fixed * share) for share in (0.25, 0.5, 1.0, 1.5, 2.0)})
    assert {p["strategy"] for p in plan["points"]} == {"fixed", "adaptive"}
    assert (tmp_path / "plan.svg").read_text().startswith("<svg")


def test_the_table_says_why_there_is_no_batch_and_how_to_go_on(dataset, annotators, budgetless):
    out = StringIO()

    call_command("batch_plan", "small", "--config", str(budgetless), "--budget", "200", stdout=out)

    text = out.getvalue()
    assert "the config names no `budget_judgements`, so no batch is created" in text
    assert "     200  adaptive" in text and "     200  fixed" in text
    assert "Add the budget you choose to the config as `budget_judgements`" in text


def test_a_planning_config_checks_everything_but_the_budget(small_config):
    config = parse_planning_config({**small_config, "strategy": "adaptive"})
    assert (config.adaptive, config.budget_judgements) == (True, 0)
    named = parse_planning_config(
        {**small_config, "strategy": "adaptive", "budget_judgements": 500}
    )
    assert named.budget_judgements == 500
