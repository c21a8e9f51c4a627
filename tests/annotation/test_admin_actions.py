"""What staff change in the Django admin goes through the platform's services, with their
rules: reviewing (never one's own work, the reviewer recorded, a rejection says why) and
blocking workers are actions; judgements, task leases and instructions versions are never
edited, added or deleted there; API tokens are only revoked. Refusals are messages."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.authtoken.models import Token, TokenProxy

from annotation.instructions import instructions_save
from annotation.models import Assignment, Instructions, Judgement, TaskLease, Worker
from mitl.instructions import Example
from mitl.judgements import Level

from .admin_pages import admin_url, form_as_shown, staff_with_every_permission
from .crowd_factories import FAILS_TP, T0, answers, batch_make, hit_make, submit, take

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run_action(client: Client, model, action: str, rows, **fields) -> list[str]:
    """Post an action of the model's list for these rows; return the messages shown."""
    response = client.post(
        admin_url(model, "changelist"),
        {"action": action, "_selected_action": [row.pk for row in rows], "index": 0, **fields},
        follow=True,
    )
    assert response.status_code == 200
    return [str(message) for message in response.context["messages"]]


def submitted_by(worker: Worker, batch, index: int) -> Assignment:
    """Submitted work that failed a golden pair: it waits for a person's review."""
    hit = hit_make(batch, index)
    assignment = take(worker, now=T0)
    submit(assignment, answers(hit, FAILS_TP, assignment=assignment))
    return Assignment.objects.get(pk=assignment.pk)


@pytest.fixture
def boss() -> Worker:
    """A staff member with every permission who also annotates on the platform."""
    user = staff_with_every_permission("boss")
    return Worker.objects.create(user=user, source="platform", external_id="boss")


def test_staff_cannot_approve_their_own_work_by_editing_its_status(tiny, boss):
    own = submitted_by(boss, batch_make(tiny), 0)
    client = logged_in(boss.user)
    page = client.get(admin_url(Assignment, "change", own.pk))
    assert page.status_code == 200  # shown, read-only

    sent = {**form_as_shown(page.content.decode(), "assignment_form"), "status": "approved"}
    response = client.post(admin_url(Assignment, "change", own.pk), {**sent, "_save": "Save"})

    assert response.status_code == 403
    stored = Assignment.objects.get(pk=own.pk)
    assert (stored.status, stored.reviewed_by, stored.reviewed_at) == ("submitted", None, None)


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_the_review_actions_refuse_ones_own_work_with_a_message(tiny, boss, action):
    own = submitted_by(boss, batch_make(tiny), 0)

    shown = run_action(logged_in(boss.user), Assignment, action, [own], feedback="fine")

    assert any("your own work" in message for message in shown), shown
    stored = Assignment.objects.get(pk=own.pk)
    assert (stored.status, stored.flagged, stored.reviewed_by) == ("submitted", True, None)


def test_a_colleague_reviews_through_the_service_which_records_who_decided(tiny, boss):
    batch = batch_make(tiny)
    first, second = submitted_by(boss, batch, 0), submitted_by(boss, batch, 1)
    colleague = staff_with_every_permission("colleague")
    client = logged_in(colleague)

    approved = run_action(client, Assignment, "approve", [first])
    unexplained = run_action(client, Assignment, "reject", [second], feedback="  ")
    rejected = run_action(client, Assignment, "reject", [second], feedback="answers look random")

    assert approved == [f"Approved: assignment {first.pk}."]
    assert unexplained == [
        f"Not rejected: assignment {second.pk}: say why the work is rejected: "
        "the worker sees this feedback"
    ]
    assert rejected == [f"Rejected: assignment {second.pk}."]
    stored = {a.pk: a for a in Assignment.objects.filter(pk__in=[first.pk, second.pk])}
    assert (stored[first.pk].status, stored[first.pk].reviewed_by) == ("approved", colleague)
    assert stored[first.pk].reviewed_at is not None
    assert (stored[second.pk].status, stored[second.pk].reviewed_by) == ("rejected", colleague)
    assert stored[second.pk].feedback == "answers look random"
    # Decided work is not decided again.
    again = run_action(client, Assignment, "reject", [first], feedback="changed my mind")
    assert again == [
        f"Not rejected: assignment {first.pk}: only submitted work can be reviewed "
        "(this one is approved)"
    ]


def test_staff_without_the_change_permission_get_no_review_action(tiny, boss, django_user_model):
    work = submitted_by(boss, batch_make(tiny), 0)
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_assignment"))

    listing = logged_in(viewer).get(admin_url(Assignment, "changelist")).content.decode()
    shown = run_action(logged_in(viewer), Assignment, "approve", [work])

    assert 'value="approve"' not in listing
    assert shown == []
    assert Assignment.objects.get(pk=work.pk).status == "submitted"


def test_blocking_a_worker_in_the_admin_hands_its_open_work_back(tiny):
    hit_make(batch_make(tiny), 0)
    worker = Worker.objects.create(source="platform", external_id="w0")
    open_work = take(worker, now=T0)
    client = logged_in(staff_with_every_permission("staff"))

    blocked = run_action(client, Worker, "block", [worker])

    assert blocked == [f"Blocked: worker {worker.pk}."]
    assert Worker.objects.get(pk=worker.pk).is_blocked
    assert Assignment.objects.get(pk=open_work.pk).status == "expired"
    assert run_action(client, Worker, "unblock", [worker]) == [f"Unblocked: worker {worker.pk}."]
    assert not Worker.objects.get(pk=worker.pk).is_blocked


@pytest.fixture
def kept_rows(tiny, boss) -> dict:
    """A judgement, a task lease and an instructions version: rows no admin form may write."""
    batch = batch_make(tiny)
    submitted_by(boss, batch, 0)
    instructions_save(batch=batch, examples=[Example(level=Level.YES, image=1, caption=101)])
    lease = TaskLease.objects.create(
        key="import:1", task="annotation.run_import", args=[1], state="queued", queued_at=T0
    )
    return {
        Judgement: Judgement.objects.first(),
        TaskLease: lease,
        Instructions: Instructions.objects.get(batch=batch),
    }


@pytest.mark.parametrize("model", [Judgement, TaskLease, Instructions], ids=lambda m: m.__name__)
def test_judgements_leases_and_instructions_are_never_edited_or_deleted(kept_rows, model):
    row = kept_rows[model]
    stored = model.objects.filter(pk=row.pk).values().get()
    client = logged_in(staff_with_every_permission("staff"))
    page = client.get(admin_url(model, "change", row.pk)).content.decode()

    changed = client.post(
        admin_url(model, "change", row.pk),
        {**form_as_shown(page, f"{model._meta.model_name}_form"), "_save": "Save"},
    )
    deleted = client.post(admin_url(model, "delete", row.pk), {"post": "yes"})

    assert (changed.status_code, deleted.status_code) == (403, 403)
    assert model.objects.filter(pk=row.pk).values().get() == stored


def test_instructions_are_not_added_in_the_admin(kept_rows):
    """A version is saved by `instructions_save` (the batch page), which checks its examples."""
    client = logged_in(staff_with_every_permission("staff"))
    first = kept_rows[Instructions]

    listing = client.get(admin_url(Instructions, "changelist")).content.decode()
    added = client.post(
        admin_url(Instructions, "add"), {"batch": first.batch_id, "version": 2, "_save": "Save"}
    )

    assert admin_url(Instructions, "add") not in listing
    assert added.status_code == 403
    assert list(Instructions.objects.values_list("pk", flat=True)) == [first.pk]


def test_api_tokens_are_revoked_never_made_or_shown(django_user_model):
    root = django_user_model.objects.create_superuser("root", password="x" * 12)
    token = Token.objects.create(user=root)
    client = logged_in(staff_with_every_permission("staff"))

    pages = {
        view: client.get(admin_url(TokenProxy, view, *args)).content.decode()
        for view, args in [("changelist", ()), ("change", (root.pk,)), ("delete", (root.pk,))]
    }
    made = client.post(admin_url(TokenProxy, "add"), {"user": root.pk, "_save": "Save"})

    assert "root" in pages["changelist"]
    assert [view for view, html in pages.items() if token.key in html] == []
    assert made.status_code == 403
    revoked = client.post(admin_url(TokenProxy, "delete", root.pk), {"post": "yes"})
    assert revoked.status_code == 302
    assert not Token.objects.filter(user=root).exists()
    assert LogEntry.objects.get().object_repr == "API token of root"  # the key is not kept
