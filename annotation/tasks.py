"""Thin Celery tasks of the human side."""

from __future__ import annotations

from celery import shared_task

from .assignments import assignments_expire


@shared_task(name="annotation.expire_assignments", ignore_result=True, time_limit=60)
def expire_assignments() -> int:
    """Expire accepted work past its deadline (idempotent: a second run finds nothing)."""
    return assignments_expire()
