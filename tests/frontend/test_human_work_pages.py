"""The wizard's settings saved with the batch, people's work on the batch page and the
dashboard, the wizard's check of who can do the work, and forms that make people wait."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Batch
from annotation.mturk.hit_settings import batch_reward
from annotation.selectors import batch_cost_estimate
from annotation.submissions import AnswerInput, assignment_submit
from mitl.costs import mturk_cost

from .test_dashboard import wizard_post

pytestmark = pytest.mark.django_db
ON_COMMIT = pytest.mark.django_db(transaction=True)
LEVELS = {"task": "yes", "golden_tp": "yes", "golden_tn": "no"}


@pytest.fixture
def staff(client):
    client.force_login(get_user_model().objects.create_user("boss", is_staff=True))
    return client


def annotator_judges(name: str):
    """An annotator account takes the next HIT and judges it right: approved at once."""
    user = get_user_model().objects.create_user(name)
    assignment = hit_assign_next(worker=worker_for_user(user=user))
    answers = [
        AnswerInput(item_id=item.pk, level=LEVELS[item.role], elapsed_ms=4000)
        for item in assignment.hit.items.order_by("position")
    ]
    return assignment_submit(
        assignment=assignment,
        answers=answers,
        followups_required=False,
        golden_policy="approve_or_flag",
    ).assignment


# --- saved settings ----------------------------------------------------------------------


@ON_COMMIT
def test_the_wizards_reward_is_the_batchs_on_every_page_and_in_the_cost(staff, dataset, annotators):
    response = staff.post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, reward="0.25")
    )

    batch = Batch.objects.get()
    assert response.status_code == 302
    assert batch_reward(batch) == Decimal("0.25")
    assert batch.config["assignments_per_hit"] == 2  # the other wizard fields, as before
    cost = batch_cost_estimate(batch=batch)
    assert cost.cost.reward_per_assignment == Decimal("0.25")
    expected = mturk_cost(
        hits=batch.hits.count(),
        assignments_per_hit=2,
        items_per_hit=10,
        reward_per_assignment=Decimal("0.25"),
    )
    assert cost.cost.total == expected.total
    api = staff.get(f"/api/batches/{batch.pk}/cost/").json()
    assert api["reward_per_assignment"] == "0.25" and api["total"] == str(expected.total)

    page = staff.get(reverse("frontend:batch", args=[batch.pk])).content.decode()
    assert '<strong id="wage-reward">$0.25</strong>' in page  # the fair-pay section
    assert '<strong id="hw-reward">$0.25</strong>' in page
    mturk = staff.get(reverse("frontend:mturk-batch", args=[batch.pk])).content.decode()
    assert 'name="reward" value="0.25"' in mturk
    assert "($0.25 each)" in mturk and f"${expected.total}" in mturk


def test_a_batch_stored_before_the_reward_was_saved_keeps_the_default(staff, batch):
    Batch.objects.filter(pk=batch.pk).update(mturk={"estimate": {"hits": 1}})
    batch.refresh_from_db()
    assert batch_reward(batch) == Decimal("0.50")
    page = staff.get(reverse("frontend:batch", args=[batch.pk])).content.decode()
    assert '<strong id="hw-reward">$0.50</strong>' in page


# --- people's work on the batch page, the dashboard and the API ----------------------------


def test_the_batch_page_counts_the_work_people_did(staff, annotating_batch):
    judged = annotator_judges("a1")
    hits = annotating_batch.hits.count()

    page = staff.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()

    assert 'id="human-work"' in page
    assert f'data-human-work="current_round.needed">{hits * 2}</span>' in page
    assert 'id="hw-current-approved" data-human-work="current_round.approved">1</span>' in page
    items = judged.judgements.count()
    assert f'id="hw-judgements" data-human-work="judgements">{items}</dd>' in page
    assert 'id="hw-spent" data-human-work="spent" data-format="money">$0.60</span>' in page
    assert 'data-stage="annotating"' in page
    assert f'<span class="count">0/{hits}</span>' in page  # 1 of 2 assignments: HIT not done


def test_the_dashboard_shows_each_batchs_work(staff, annotating_batch):
    annotator_judges("a1")
    hits = annotating_batch.hits.count()

    page = staff.get(reverse("frontend:dashboard")).content.decode()

    assert "<th>Human work</th>" in page
    assert f'<span class="num">1/{hits * 2}</span>' in page
    assert "$0.60 of $" in page


def test_the_batch_api_carries_the_work_for_progress_js(staff, annotating_batch):
    annotator_judges("a1")

    body = staff.get(f"/api/batches/{annotating_batch.pk}/").json()

    work = body["human_work"]
    assert work["current_round"]["approved"] == 1
    assert work["current_round"]["needed"] == annotating_batch.hits.count() * 2
    assert work["all_rounds"]["approved"] == 1
    assert work["reward"] == "0.50" and work["spent"] == "0.60"
    assert work["judgements"] > 0 and work["time_left"] not in ("", None)
    rows = {row["stage"]: row for row in body["progress"]}
    assert rows["annotating"]["total"] == annotating_batch.hits.count()
    assert all(row["done"] <= row["total"] for row in body["progress"])


# --- the wizard checks who can do the work -------------------------------------------------


def test_the_wizard_refuses_more_assignments_than_eligible_annotators(staff, dataset, annotators):
    get_user_model().objects.create_user("a1")

    response = staff.post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, assignments_per_hit="2")
    )

    assert response.status_code == 400
    errors = response.context["form"].errors["assignments_per_hit"]
    assert "2 assignments per HIT but only 1 annotator account can take HITs here" in errors[0]
    assert 'name="few_workers_ok"' in response.content.decode()
    assert not Batch.objects.exists()


@ON_COMMIT
def test_the_wizard_creates_it_anyway_when_asked(staff, dataset, annotators):
    get_user_model().objects.create_user("a1")
    response = staff.post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, few_workers_ok="on")
    )
    assert response.status_code == 302 and Batch.objects.exists()


@ON_COMMIT
@pytest.mark.parametrize("overrides", [{"assignments_per_hit": "1"}, {"simulated_crowd": "on"}])
def test_enough_annotators_or_a_simulated_crowd_pass_the_check(
    staff, dataset, annotators, overrides
):
    get_user_model().objects.create_user("a1")
    response = staff.post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk, **overrides)
    )
    assert response.status_code == 302 and Batch.objects.exists()


def test_the_wizard_says_how_many_annotators_can_work(staff, dataset, annotators):
    users = get_user_model().objects
    users.create_user("a1")
    users.create_user("a2")
    page = staff.get(reverse("frontend:batch-new")).content.decode()
    assert 'data-eligible-workers="2"' in page
    assert "2 annotator accounts can take HITs here" in page


# --- forms that make people wait -----------------------------------------------------------


def test_waiting_forms_disable_their_button(staff, dataset, annotators):
    page = staff.get(reverse("frontend:batch-new")).content.decode()
    assert 'data-wait="Creating…"' in page
    assert "frontend/wait.js" in page
    upload = staff.get(reverse("frontend:dataset-upload")).content.decode()
    assert 'data-wait="Uploading…"' in upload
