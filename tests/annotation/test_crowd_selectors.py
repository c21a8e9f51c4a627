"""The reads reviewers and workers see of crowd work: worker figures, suspect goldens, the
review queue and its rows, and the HIT page.

Time moves through the `now=` arguments, never by sleeping.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.handout import assignment_create
from annotation.models import Assignment, Image, ItemRole, Verdict
from annotation.pages import page_items
from annotation.review import assignment_review
from annotation.review_selectors import (
    assignment_review_rows,
    goldens_suspect,
    goldens_suspended,
    review_queue,
    worker_stats,
)
from annotation.selectors import assignment_page

from .crowd_factories import (
    FAILS_TP,
    MINUTE,
    N_PAIRS,
    RIGHT,
    T0,
    answers,
    batch_make,
    hit_make,
    shown_in_seed_order,
    submit,
    take,
    verdict_fields,
    work_done,
    worker_make,
)

pytestmark = pytest.mark.django_db


# --- worker_stats ---------------------------------------------------------------------------


def test_worker_stats_match_hand_computed_figures(tiny):
    batch = batch_make(tiny)
    h0, h1, h2, h3 = (hit_make(batch, i) for i in range(4))
    Verdict.objects.create(**verdict_fields(h0, is_positive=True))
    Verdict.objects.create(**verdict_fields(h1, is_positive=False))
    a, b, idle = worker_make("a"), worker_make("b"), worker_make("idle")

    # a: h0 all right (approved, 3 s); h1 both goldens wrong (flagged, then rejected, 6 s).
    work_done(h0, a, {**RIGHT, "task": "yes"}, elapsed_ms=1000)
    a_h1 = work_done(h1, a, {"golden_tn": "yes", "task": "no", "golden_tp": "no"}, elapsed_ms=2000)
    assignment_review(assignment=a_h1, approve=False, feedback="both known pairs wrong")
    # b: h0 golden TP wrong (flagged, then approved, 12 s); h1 right (approved, 3 s) but its
    # task disagrees with the verdict; h2 right, waiting for review (30 s); h3 still open.
    b_h0 = work_done(h0, b, {**RIGHT, "task": "yes", "golden_tp": "weak_no"}, elapsed_ms=4000)
    assignment_review(assignment=b_h0, approve=True, feedback="")
    work_done(h1, b, {**RIGHT, "task": "weak_yes"}, elapsed_ms=1000)
    work_done(h2, b, RIGHT, elapsed_ms=10_000, policy="review_all")
    assignment_create(hit=h3, worker=b, now=T0)

    stats = {s.worker.external_id: s for s in worker_stats(workers=[a, b, idle])}

    figures = {
        name: (
            s.submitted,
            s.approved,
            s.rejected,
            s.golden_accuracy,
            s.approval_rate,
            s.median_hit_seconds,
            s.verdict_agreement,
        )
        for name, s in stats.items()
    }
    assert figures == {
        "a": (2, 1, 1, 2 / 4, 1 / 2, 4.5, 2 / 2),
        "b": (3, 2, 0, pytest.approx(5 / 6), 1.0, 12.0, 1 / 2),  # median of 12, 3, 30 s
        "idle": (0, 0, 0, None, None, None, None),
    }
    assert [s.worker for s in worker_stats(workers=[b, a])] == [b, a]


# --- goldens_suspect ------------------------------------------------------------------------


def test_a_golden_most_workers_fail_is_suspect_and_one_few_fail_is_not(tiny):
    roles = (ItemRole.GOLDEN_TN, ItemRole.GOLDEN_TN, ItemRole.TASK, ItemRole.GOLDEN_TP)
    hit = hit_make(batch_make(tiny), 0, max_assignments=4, roles=roles)
    doubtful, sound = hit.items.get(position=0), hit.items.get(position=1)
    # Pair 1 is answered YES by 3 of 4 workers; pair 2 by 1 of 4.
    for i, at in enumerate([{0: "yes", 1: "yes"}, {0: "yes"}, {0: "yes"}, {}]):
        submit(assignment_create(hit=hit, worker=worker_make(f"w{i}"), now=T0), answers(hit, at=at))

    suspects = goldens_suspect()

    assert [(s.role, s.image, s.caption, s.answers, s.failures) for s in suspects] == [
        ("golden_tn", doubtful.image, doubtful.caption, 4, 3)
    ]
    assert (sound.image, sound.caption) != (doubtful.image, doubtful.caption)


# --- goldens_suspended ----------------------------------------------------------------------


def test_a_suspended_golden_is_listed_for_an_admin_and_review_rows_no_longer_check_it(
    tiny, client, django_user_model
):
    hit = hit_make(batch_make(tiny), 0, max_assignments=4)
    golden_tn = hit.items.get(role="golden_tn")
    fails_tn = {**RIGHT, "golden_tn": "yes"}
    work_done(hit, worker_make("w0"), RIGHT)
    done = [work_done(hit, worker_make(f"w{i}"), fails_tn) for i in (1, 2, 3)]
    assert goldens_suspect()[0].failures == 3  # listed as suspect as before, too

    listed = goldens_suspended()

    assert [(g.item, g.answers, g.failures) for g in listed] == [(golden_tn, 4, 3)]
    assert listed[0].suspended_at == T0 + MINUTE
    rows = assignment_review_rows(assignment=shown_in_seed_order(done[0], None))
    assert [(r["role"], r["golden_ok"], r["golden_suspended"]) for r in rows] == [
        ("golden_tn", None, True),
        ("task", None, False),
        ("golden_tp", True, False),
    ]
    staff = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    client.force_login(staff)
    page = client.get(reverse("frontend:review")).content.decode()
    suspended_part = page.split('id="goldens-suspended"')[1]
    assert golden_tn.caption.text in suspended_part and "3 / 4" in suspended_part


# --- review_queue and assignment_review_rows ------------------------------------------------


def test_the_review_queue_lists_submitted_work_flagged_first_then_oldest_first(tiny):
    batch = batch_make(tiny)
    h0, h1, h2 = (hit_make(batch, i) for i in range(3))
    w0, w1, w2 = (worker_make(f"w{i}") for i in range(3))

    plain = work_done(h0, w0, RIGHT, policy="review_all", now=T0 + MINUTE)
    late_flag = work_done(h0, w1, FAILS_TP, now=T0 + 3 * MINUTE)
    early_flag = work_done(h1, w0, FAILS_TP, now=T0 + 2 * MINUTE)
    work_done(h1, w1, RIGHT)  # approved: nothing to review
    assignment_create(hit=h2, worker=w2, now=T0)  # open: nothing to review

    assert [a.pk for a in review_queue()] == [early_flag.pk, late_flag.pk, plain.pk]
    assert [a.pk for a in review_queue(limit=1)] == [early_flag.pk]


def test_review_rows_show_each_answer_beside_the_golden_truth_in_page_order(tiny):
    hit = hit_make(batch_make(tiny), 0)
    assignment = shown_in_seed_order(take(worker_make("w0")), None)
    submit(assignment, answers(hit, {"golden_tn": "yes", "task": "no", "golden_tp": "weak_yes"}))

    rows = assignment_review_rows(assignment=assignment)

    assert [(r["position"], r["role"], r["answer"], r["golden_ok"]) for r in rows] == [
        (1, "golden_tn", "100% YES", False),
        (2, "task", "100% NO", None),
        (3, "golden_tp", "Partially YES, but…", True),
    ]
    assert [r["expected"] for r in rows] == ["a NO (known mismatch)", None, "a YES (known match)"]


# --- assignment_page ------------------------------------------------------------------------


def test_the_hit_page_lists_pairs_in_page_order_and_nothing_that_tells_goldens_apart(tiny):
    roles = (ItemRole.TASK, ItemRole.GOLDEN_TP, ItemRole.TASK, ItemRole.GOLDEN_TN)
    hit = hit_make(batch_make(tiny, followups=False), 0, roles=roles)
    Image.objects.filter(pk=hit.items.get(position=1).image_id).update(file="images/1.png")
    assignment = shown_in_seed_order(take(worker_make("w0")), None)

    page = assignment_page(assignment=assignment)

    assert set(page) == {"followups", "items"}
    assert page["followups"] is False
    items = list(hit.items.order_by("position"))
    item_keys = {"id", "position", "image_url", "caption"}  # no role, nothing golden-only
    assert [set(entry) for entry in page["items"]] == [item_keys] * len(items)
    # A pair's id is its number on the page, never the item's database id.
    assert [(e["id"], e["position"], e["caption"]) for e in page["items"]] == [
        (item.position + 1, item.position, item.caption.text) for item in items
    ]
    urls = [entry["image_url"] for entry in page["items"]]
    assert urls[1] == reverse("frontend:pair-image", args=[assignment.pk, 2])
    assert urls[0] is None  # an image without a file


def test_each_worker_sees_the_pairs_in_an_order_of_its_own_and_review_shows_that_order(tiny):
    roles = (ItemRole.GOLDEN_TN,) + (ItemRole.TASK,) * (N_PAIRS - 2) + (ItemRole.GOLDEN_TP,)
    hit = hit_make(batch_make(tiny), 0, roles=roles)
    first, second = take(worker_make("w0")), take(worker_make("w1"))
    assert first.hit == second.hit == hit
    assert first.page_seed is not None and second.page_seed is not None  # drawn at hand-out

    shown = {
        seed: [pk for pk, _ in page_items(hit_id=hit.pk, assignment=a, fields=("caption__text",))]
        for seed, a in ((1, shown_in_seed_order(first, 1)), (2, shown_in_seed_order(second, 2)))
    }
    captions = dict(hit.items.values_list("pk", "caption__text"))
    page = assignment_page(assignment=Assignment.objects.get(pk=first.pk))
    assert [entry["caption"] for entry in page["items"]] == [captions[pk] for pk in shown[1]]

    in_hit_order = list(hit.items.order_by("position").values_list("pk", flat=True))
    assert sorted(shown[1]) == sorted(shown[2]) == sorted(in_hit_order)
    # Workers comparing notes cannot point at "pair N": each saw the goldens elsewhere.
    assert shown[1] != shown[2]
    assert shown[1] != in_hit_order
    page = assignment_page(assignment=Assignment.objects.get(pk=first.pk))  # a later visit
    assert [entry["caption"] for entry in page["items"]] == [captions[pk] for pk in shown[1]]
    assert [entry["id"] for entry in page["items"]] == list(range(1, N_PAIRS + 1))
    assert [entry["position"] for entry in page["items"]] == list(range(N_PAIRS))

    submit(first, answers(hit))
    rows = assignment_review_rows(assignment=first)
    assert [row["item_id"] for row in rows] == shown[1]  # review shows what the worker saw
    assert [row["position"] for row in rows] == list(range(1, N_PAIRS + 1))
