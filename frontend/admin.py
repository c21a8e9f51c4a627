"""The Django admin's review actions: approve or reject the ticked assignments, as the review
pages do (`frontend.views.review`), through `assignment_review` with its rules (nobody
decides their own work, a rejection says why, the reviewer is recorded).

They sit on the pages' floor because, like the pages, they then ask whether the approved
work completes its round (`pipeline.tasks.annotation_close_check_queue`). The rest of the
admin is `annotation/admin.py`.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin.helpers import ActionForm
from django.db.models import QuerySet
from django.http import HttpRequest

from annotation.admin import ReadOnlyAdmin, each_through_service
from annotation.models import Assignment
from annotation.review import assignment_review
from pipeline.tasks import annotation_close_check_queue


class ReviewActionForm(ActionForm):
    """The list's action bar with the feedback a rejection needs (the worker reads it)."""

    feedback = forms.CharField(required=False, label="Feedback", max_length=2000)


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ("pk", "hit", "worker", "status", "flagged", "submitted_at", "reviewed_by")
    list_filter = ("status", "flagged")
    action_form = ReviewActionForm
    actions = ("approve", "reject")

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("annotation.change_assignment")

    @admin.action(description="Approve the selected submissions", permissions=["review"])
    def approve(self, request: HttpRequest, queryset: QuerySet) -> None:
        approved = self._review(request, queryset, approve=True)
        batch_ids = Assignment.objects.filter(pk__in=approved).values_list("hit__batch_id")
        for batch_id in sorted({batch_id for (batch_id,) in batch_ids}):
            annotation_close_check_queue(batch_id=batch_id)  # perhaps the round's last work

    @admin.action(
        description="Reject the selected submissions (say why under Feedback)",
        permissions=["review"],
    )
    def reject(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._review(request, queryset, approve=False)

    def _review(self, request: HttpRequest, queryset: QuerySet, *, approve: bool) -> list[int]:
        feedback = request.POST.get("feedback", "")
        return each_through_service(
            self,
            request,
            queryset,
            service=lambda assignment: assignment_review(
                assignment=assignment, approve=approve, feedback=feedback, reviewer=request.user
            ),
            done="approved" if approve else "rejected",
        )
