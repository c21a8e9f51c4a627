"""Reviewing crowd work: what the golden policy decides at submission and once MTurk
confirms work, a person's approval or rejection, and blocking a worker.

Time moves through the `now=` arguments, never by sleeping.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.handout import assignment_create, worker_for_user
from annotation.models import HIT, Assignment, Image, Judgement, Worker
from annotation.pages import page_items
from annotation.review import assignment_decide_confirmed, assignment_review, worker_block
from annotation.selectors import assignment_page

from .crowd_factories import (
    FAILS_TP,
    MINUTE,
    RIGHT,
    T0,
    answers,
    batch_make,
    hit_make,
    status_of,
    submit,
    take,
    work_done,
    worker_make,
)

pytestmark = pytest.mark.django_db

REJECTED_TP = "Rejected automatically: 1 pair with a known answer was answered wrongly."
POLICIES = ("approve_or_flag", "approve_or_reject", "review_all")


# --- the golden policy at submission --------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "levels", "status", "flagged", "golden_passed", "reviewed"),
    [
        ("approve_or_flag", RIGHT, "approved", False, True, True),
        ("approve_or_flag", FAILS_TP, "submitted", True, False, False),
        ("approve_or_reject", RIGHT, "approved", False, True, True),
        ("approve_or_reject", FAILS_TP, "rejected", False, False, True),
        ("review_all", RIGHT, "submitted", False, True, False),
        ("review_all", FAILS_TP, "submitted", True, False, False),
    ],
)
def test_the_golden_policy_decides_the_outcome_of_a_submission(
    tiny, policy, levels, status, flagged, golden_passed, reviewed
):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))

    result = submit(assignment, answers(hit, levels), policy=policy, now=T0 + 2 * MINUTE)

    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.status, stored.flagged, stored.golden_passed) == (status, flagged, golden_passed)
    assert stored.submitted_at == T0 + 2 * MINUTE
    assert stored.reviewed_at == (T0 + 2 * MINUTE if reviewed else None)
    assert stored.reviewed_by is None  # decided automatically
    assert Judgement.objects.filter(assignment=assignment).count() == 3
    assert len(result.golden_failures) == (0 if golden_passed else 1)


def test_an_automatic_rejection_counts_the_failed_pairs_and_reopens_the_slot(tiny):
    hit = hit_make(batch_make(tiny), 0, max_assignments=1)
    assignment = take(worker_make("w0"))

    submit(assignment, answers(hit, FAILS_TP), policy="approve_or_reject")

    stored = Assignment.objects.get(pk=assignment.pk)
    # The HIT goes to the next worker: the feedback must not say where its goldens are.
    assert stored.feedback == REJECTED_TP
    assert "pair 3" not in stored.feedback
    assert take(worker_make("w1"), now=T0 + 2 * MINUTE).hit == hit


# --- assignment_decide_confirmed ------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "levels", "status", "flagged", "feedback"),
    [
        ("approve_or_flag", RIGHT, "approved", False, ""),
        ("approve_or_flag", FAILS_TP, "submitted", True, ""),
        ("approve_or_reject", RIGHT, "approved", False, ""),
        ("approve_or_reject", FAILS_TP, "rejected", False, REJECTED_TP),
        ("review_all", RIGHT, "submitted", False, ""),
        ("review_all", FAILS_TP, "submitted", True, ""),
    ],
    ids=[f"{policy}-{golden}" for policy in POLICIES for golden in ("passed", "failed")],
)
def test_confirmed_work_is_decided_by_the_golden_policy_as_at_submission(
    tiny, policy, levels, status, flagged, feedback
):
    """Work held until MTurk confirms it (held here by `review_all` at submission) gets what
    the batch's policy gives at submission; deciding it again changes nothing."""
    hit = hit_make(batch_make(tiny), 0, max_assignments=1)
    assignment = take(worker_make("w0"))
    submit(assignment, answers(hit, levels), policy="review_all")

    decided = assignment_decide_confirmed(
        assignment=Assignment.objects.get(pk=assignment.pk), policy=policy
    )

    stored = Assignment.objects.get(pk=assignment.pk)
    assert (decided.pk, decided.status) == (stored.pk, stored.status)
    assert (stored.status, stored.flagged, stored.feedback) == (status, flagged, feedback)
    assert (stored.reviewed_at is None) == (status == "submitted")
    assert stored.reviewed_by is None  # decided automatically
    before = Assignment.objects.filter(pk=assignment.pk).values().get()
    assert assignment_decide_confirmed(assignment=stored, policy=policy).status == status
    assert Assignment.objects.filter(pk=assignment.pk).values().get() == before
    freed = take(worker_make("w1"), now=T0 + 2 * MINUTE)  # only a rejection frees the slot
    assert (freed.hit if freed else None) == (hit if status == "rejected" else None)


# --- assignment_review ----------------------------------------------------------------------


@pytest.mark.parametrize("feedback", ["", "   \n"])
def test_a_rejection_without_feedback_is_refused(tiny, feedback):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    submit(assignment, answers(hit, FAILS_TP))

    with pytest.raises(ServiceError, match="say why"):
        assignment_review(assignment=assignment, approve=False, feedback=feedback)

    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.status, stored.flagged, stored.reviewed_at) == ("submitted", True, None)


@pytest.mark.parametrize("approve", [True, False])
def test_a_review_records_who_reviewed(tiny, approve):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    submit(assignment, answers(hit), policy="review_all")
    reviewer = get_user_model().objects.create_user("reviewer", is_staff=True)

    assignment_review(assignment=assignment, approve=approve, feedback="ok", reviewer=reviewer)

    stored = Assignment.objects.get(pk=assignment.pk)
    assert stored.reviewed_by == reviewer
    assert stored.status == ("approved" if approve else "rejected")


@pytest.mark.parametrize("approve", [True, False])
def test_nobody_reviews_their_own_work(tiny, approve):
    hit = hit_make(batch_make(tiny), 0)
    staff = get_user_model().objects.create_user("boss", is_staff=True)
    assignment = take(Worker.objects.create(user=staff, source="platform", external_id="boss"))
    submit(assignment, answers(hit, FAILS_TP))

    with pytest.raises(ServiceError, match="your own work"):
        assignment_review(assignment=assignment, approve=approve, feedback="fine", reviewer=staff)

    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.status, stored.flagged, stored.reviewed_by) == ("submitted", True, None)
    other = get_user_model().objects.create_user("other", is_staff=True)
    assignment_review(assignment=assignment, approve=approve, feedback="fine", reviewer=other)
    assert Assignment.objects.get(pk=assignment.pk).reviewed_by == other


def test_a_rejection_hands_the_hit_to_the_next_worker_who_asks(tiny):
    hit = hit_make(batch_make(tiny), 0, max_assignments=1)
    rejected_worker, next_worker = worker_make("w0"), worker_make("w1")
    assignment = take(rejected_worker)
    submit(assignment, answers(hit), policy="review_all")
    assert take(next_worker) is None  # submitted work holds its slot

    assignment_review(assignment=assignment, approve=False, feedback="answers look random")

    assert take(next_worker).hit == hit
    assert take(rejected_worker) is None


# --- worker_block ---------------------------------------------------------------------------


def test_blocking_expires_open_work_and_returns_its_hit_to_the_pool(tiny):
    batch = batch_make(tiny)
    done_hit, open_hit = (hit_make(batch, i, max_assignments=1) for i in range(2))
    blocked, other = worker_make("blocked"), worker_make("other")
    done = assignment_create(hit=done_hit, worker=blocked, now=T0)
    submit(done, answers(done_hit))
    held = take(blocked)
    assert held.hit == open_hit

    worker_block(worker=blocked, blocked=True)

    assert blocked.is_blocked is True
    assert (status_of(held), status_of(done)) == ("expired", "approved")
    assert take(other).hit == open_hit
    with pytest.raises(ServiceError, match="blocked"):
        take(blocked)


def test_an_unblocked_worker_can_take_hits_again(tiny):
    hit = hit_make(batch_make(tiny), 0)
    worker = worker_make("w0")
    worker_block(worker=worker, blocked=True)

    unblocked = worker_block(worker=worker, blocked=False)

    assert Worker.objects.get(pk=worker.pk).is_blocked is False
    assert take(unblocked).hit == hit


# --- suspending a golden pair that honest workers keep failing ------------------------------

FAILS_TN = {**RIGHT, "golden_tn": "yes"}  # pair 1, a "known mismatch" that in fact matches


@pytest.mark.parametrize(
    ("policy", "decided"),
    [
        ("approve_or_flag", "approved"),
        ("approve_or_reject", "approved"),
        ("review_all", "submitted"),
    ],
)
def test_a_golden_three_workers_fail_alone_is_suspended_and_their_work_decided_again(
    tiny, policy, decided
):
    """Three workers answer the golden TN YES and the golden TP right: the third suspends
    the TN, the three are decided as passed, and a fourth who answers the same way passes."""
    hit = hit_make(batch_make(tiny, golden_policy=policy), 0, max_assignments=6)
    golden_tn = hit.items.get(role="golden_tn")
    careless = work_done(hit, worker_make("careless"), {**FAILS_TN, "golden_tp": "no"})
    first, second = (work_done(hit, worker_make(f"w{i}"), FAILS_TN, policy=policy) for i in (0, 1))
    golden_tn.refresh_from_db()
    assert golden_tn.golden_suspended_at is None  # two lone failures: not yet
    assert status_of(first) == {"approve_or_reject": "rejected"}.get(policy, "submitted")

    third = take(worker_make("w2"), now=T0 + 2 * MINUTE)
    result = submit(third, answers(hit, FAILS_TN), policy=policy, now=T0 + 3 * MINUTE)

    golden_tn.refresh_from_db()
    assert golden_tn.golden_suspended_at == T0 + 3 * MINUTE
    assert (result.assignment.status, result.golden_failures) == (decided, ())
    for assignment in (first, second, third):
        stored = Assignment.objects.get(pk=assignment.pk)
        assert (stored.status, stored.golden_passed, stored.flagged) == (decided, True, False)
        assert stored.reviewed_by is None
    assert Assignment.objects.get(pk=careless.pk).flagged  # it missed the golden TP too
    if policy == "approve_or_reject":
        assert "withdrawn" in Assignment.objects.get(pk=first.pk).feedback
    # Later workers get a fresh golden TN instead, and it is checked.
    fourth = work_done(hit, worker_make("w3"), RIGHT, policy=policy, now=T0 + 4 * MINUTE)
    stored = Assignment.objects.get(pk=fourth.pk)
    assert (stored.status, stored.golden_passed) == (decided, True)
    assert golden_tn.pk not in set(stored.judgements.values_list("item_id", flat=True))
    fifth = work_done(hit, worker_make("w4"), FAILS_TN, policy=policy, now=T0 + 5 * MINUTE)
    assert Assignment.objects.get(pk=fifth.pk).golden_passed is False


def test_a_suspended_golden_is_replaced_for_later_work_only(tiny):
    """Work handed out before the suspension keeps its page (and may answer the suspended
    pair either way); work handed out after shows a new golden of the same kind instead,
    drawn off the page and away from the HIT's query, at the end of the HIT."""
    hit = hit_make(batch_make(tiny), 0, max_assignments=6)
    golden_tn = hit.items.get(role="golden_tn")
    before = list(hit.items.order_by("position").values_list("pk", "image_id", "caption_id"))
    early = take(worker_make("early"))  # handed out before the suspension
    for i in range(3):
        work_done(hit, worker_make(f"w{i}"), FAILS_TN, now=T0 + (i + 1) * MINUTE)
    golden_tn.refresh_from_db()
    assert golden_tn.golden_suspended_at is not None

    replacement = hit.items.get(added_after__isnull=False)
    assert (replacement.role, replacement.position) == ("golden_tn", len(before))
    assert golden_tn.retired_after == Assignment.objects.filter(hit=hit).latest("pk").pk
    pair = (replacement.image_id, replacement.caption_id)
    assert pair not in {(image, caption) for _, image, caption in before}
    query_image = hit.items.get(role="task").candidate.query.image_id
    assert replacement.image_id == query_image  # a negative for the HIT's i2t query …
    assert replacement.caption.image_id != query_image  # … not one of its own captions

    later = take(worker_make("later"), now=T0 + 5 * MINUTE)
    shown = {pk for (pk,) in page_items(hit_id=hit.pk, assignment=later)}
    assert shown == {pk for pk, *_ in before if pk != golden_tn.pk} | {replacement.pk}
    early_page = {pk for (pk,) in page_items(hit_id=hit.pk, assignment=early)}
    assert early_page == {pk for pk, *_ in before}
    for assignment in (later, early):  # each page names its pairs 1, 2, 3: never by item id
        ids = [item["id"] for item in assignment_page(assignment=assignment)["items"]]
        assert ids == [1, 2, 3]

    # Each submits exactly what its page showed; an answer for the other page's pair is refused.
    with pytest.raises(ServiceError):
        submit(later, answers(hit, assignment=early), worker=later.worker)
    kept = submit(early, answers(hit, FAILS_TN, assignment=early), now=T0 + 6 * MINUTE)
    assert (kept.assignment.status, kept.golden_failures) == ("approved", ())
    failed = submit(later, answers(hit, FAILS_TN, assignment=later), now=T0 + 6 * MINUTE)
    assert failed.assignment.golden_passed is False  # the replacement is checked


def test_a_golden_is_not_suspended_below_the_batchs_threshold_or_with_it_at_0(tiny):
    for index, after in enumerate((4, 0)):
        hit = hit_make(batch_make(tiny, golden_suspend_after=after), index, max_assignments=4)
        done = [work_done(hit, worker_make(f"w{index}-{i}"), FAILS_TN) for i in range(3)]
        assert not hit.items.filter(golden_suspended_at__isnull=False).exists()
        assert {status_of(a) for a in done} == {"submitted"}  # flagged, for a person


def test_mturk_work_counts_once_confirmed_and_its_rejection_is_not_withdrawn(tiny):
    """Unconfirmed MTurk work may be made up: it never suspends a golden. Once MTurk confirms
    it, it counts; work already rejected for MTurk stays rejected (MTurk has the decision)."""
    hit = hit_make(batch_make(tiny), 0, max_assignments=4)
    rejected = work_done(hit, worker_make("m0"), FAILS_TN, policy="approve_or_reject")
    Assignment.objects.filter(pk=rejected.pk).update(external_id="A-0", confirmed_at=T0)
    held = work_done(hit, worker_make("m1"), FAILS_TN, policy="review_all")
    Assignment.objects.filter(pk=held.pk).update(external_id="A-1")  # not confirmed yet
    platform = work_done(hit, worker_make("w2"), FAILS_TN)
    golden_tn = hit.items.get(role="golden_tn")
    assert golden_tn.golden_suspended_at is None  # two confirmed lone failures, not three
    assert status_of(platform) == "submitted"

    Assignment.objects.filter(pk=held.pk).update(confirmed_at=T0 + 2 * MINUTE)
    decided = assignment_decide_confirmed(
        assignment=Assignment.objects.get(pk=held.pk), policy="approve_or_flag"
    )

    golden_tn.refresh_from_db()
    assert golden_tn.golden_suspended_at is not None
    assert (decided.status, decided.golden_passed, decided.flagged) == ("approved", True, False)
    assert status_of(platform) == "approved"
    stored = Assignment.objects.get(pk=rejected.pk)
    assert (stored.status, stored.golden_passed) == ("rejected", False)


def test_a_hit_answered_through_an_offline_mturk_layout_keeps_its_pairs(tiny):
    """Results imported from an exported layout answer the exported pairs: no replacement."""
    hit = hit_make(batch_make(tiny), 0, max_assignments=5)
    HIT.objects.filter(pk=hit.pk).update(external_id="OFFLINE-HIT")  # never published by us
    for i in range(3):
        work_done(hit, worker_make(f"w{i}"), FAILS_TN, now=T0 + (i + 1) * MINUTE)

    assert hit.items.get(role="golden_tn").golden_suspended_at is not None
    assert not hit.items.filter(added_after__isnull=False).exists()
    later = work_done(hit, worker_make("later"), FAILS_TN, now=T0 + 5 * MINUTE)
    assert Assignment.objects.get(pk=later.pk).golden_passed  # the pair is just unchecked


def test_a_replacement_golden_looks_like_any_pair_on_the_page_and_in_the_api(tiny, client):
    """Its item id is newer than the page's others; the worker sees numbers 1, 2, 3 on the
    page, in the API and in the image links, and the answers map back to the items."""
    Image.objects.filter(dataset=tiny).update(file="images/x.png")
    hit = hit_make(batch_make(tiny), 0, max_assignments=6)
    for i in range(3):
        work_done(hit, worker_make(f"w{i}"), FAILS_TN, now=T0 + (i + 1) * MINUTE)
    replacement = hit.items.get(added_after__isnull=False)
    assert replacement.pk > max(hit.items.exclude(pk=replacement.pk).values_list("pk", flat=True))
    user = get_user_model().objects.create_user("later")
    later = take(worker_for_user(user=user), now=timezone.now())  # the API submits now
    client.force_login(user)

    api = client.get(f"/api/assignments/{later.pk}/").json()
    html = client.get(f"/work/assignments/{later.pk}/").content.decode()

    assert [item["id"] for item in api["items"]] == [1, 2, 3]
    assert [item["image_url"] for item in api["items"]] == [
        f"/work/assignments/{later.pk}/pairs/{n}/image/" for n in (1, 2, 3)
    ]
    assert re.findall(r'data-item="(\d+)"', html) == ["1", "2", "3"]
    assert f"/items/{replacement.pk}/" not in html
    by_id = f"/work/assignments/{later.pk}/items/{replacement.pk}/image/"
    assert client.get(by_id).status_code == 404  # by item id: staff only
    # The answers, by number, land on the items the page showed: the replacement answered
    # wrongly fails the check.
    rows = page_items(hit_id=hit.pk, assignment=later, fields=("role",))
    body = {
        "answers": [
            {"item": n, "level": FAILS_TN[role], "elapsed_ms": 900}
            for n, (_pk, role) in enumerate(rows, start=1)
        ]
    }
    url = f"/api/assignments/{later.pk}/submit/"
    beyond = {"answers": [*body["answers"][:2], {**body["answers"][2], "item": 4}]}
    refused = client.post(url, beyond, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["detail"] == "pair 4 is not on this HIT's page (its pairs are 1 to 3)"
    # A message names the pair by its number too, never by its place in the HIT (the
    # replacement's is after every other).
    number = 1 + [pk for pk, _ in rows].index(replacement.pk)
    vague = {"answers": [dict(a) for a in body["answers"]]}
    vague["answers"][number - 1]["level"] = "weak_no"  # without the reason it needs
    unclear = client.post(url, vague, content_type="application/json")
    assert unclear.json()["detail"].startswith(f"pair {number}: choose at least one")
    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 201, response.content
    stored = Assignment.objects.get(pk=later.pk)
    assert stored.golden_passed is False
    assert Judgement.objects.get(assignment=later, item=replacement).level == "yes"
    assert set(stored.judgements.values_list("item_id", flat=True)) == {pk for pk, _ in rows}
