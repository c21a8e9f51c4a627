"""The periodic expiry task, run through Celery's own machinery (eagerly)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.handout import hit_assign_next
from annotation.models import Assignment, Worker
from annotation.tasks import expire_assignments

pytestmark = pytest.mark.django_db


def test_expiry_task_frees_overdue_work_once(annotating_batch, eager_celery):
    on_time = hit_assign_next(worker=Worker.objects.create(source="platform", external_id="fast"))
    overdue = hit_assign_next(worker=Worker.objects.create(source="platform", external_id="slow"))
    Assignment.objects.filter(pk=overdue.pk).update(deadline=timezone.now() - timedelta(seconds=1))

    assert expire_assignments.delay().get() == 1
    assert expire_assignments.delay().get() == 0  # idempotent
    assert Assignment.objects.get(pk=overdue.pk).status == "expired"
    assert Assignment.objects.get(pk=on_time.pk).status == "accepted"
