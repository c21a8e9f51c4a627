"""Django admin for every model: a read-only window for staff, whose few writes are actions.

No admin page adds, edits or deletes a row of this app: each row's rules live in its
services (a review names its reviewer and is never one's own work; an instructions version
is checked against the dataset and numbered in turn), and a form would bypass them. What
staff change in the admin goes through an action that calls the same service as the pages,
and a refusal shows as a message: block or unblock workers here, approve or reject
assignments in `frontend/admin.py`, revoke API tokens in `api/admin.py`. Everything else
is changed on the platform's pages and commands.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from . import models
from .errors import ServiceError
from .review import worker_block


class ReadOnlyAdmin(admin.ModelAdmin):
    """Lists and shows rows, never adds, edits or deletes one: the base of every page here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def each_through_service(
    admin_page: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    service: Callable[[Model], object],
    done: str,
) -> list[int]:
    """Call `service` on each selected row (by id); report what it did and, grouped by
    reason, what it refused. Return the ids of the rows it did."""
    succeeded: list[int] = []
    refused: dict[str, list[int]] = defaultdict(list)
    for row in queryset.order_by("pk"):
        try:
            service(row)
        except ServiceError as exc:
            refused[str(exc)].append(row.pk)
        else:
            succeeded.append(row.pk)
    name = queryset.model._meta.verbose_name
    for reason, ids in refused.items():
        listed = ", ".join(map(str, ids))
        admin_page.message_user(request, f"Not {done}: {name} {listed}: {reason}", messages.ERROR)
    if succeeded:
        listed = ", ".join(map(str, succeeded))
        admin_page.message_user(request, f"{done.capitalize()}: {name} {listed}.", messages.SUCCESS)
    return succeeded


@admin.register(models.Dataset)
class DatasetAdmin(ReadOnlyAdmin):
    list_display = ("name", "created_at")
    search_fields = ("name",)


@admin.register(models.Image)
class ImageAdmin(ReadOnlyAdmin):
    list_display = ("ext_id", "dataset", "file_name")
    list_filter = ("dataset",)
    search_fields = ("ext_id", "file_name")


@admin.register(models.Caption)
class CaptionAdmin(ReadOnlyAdmin):
    """Marked invalid on the captions review page, which records why."""

    list_display = ("ext_id", "dataset", "text", "is_invalid")
    list_filter = ("dataset", "is_invalid")
    search_fields = ("ext_id", "text")


@admin.register(models.PositiveSet)
class PositiveSetAdmin(ReadOnlyAdmin):
    list_display = ("name", "dataset", "source", "created_at")
    list_filter = ("dataset", "source")


@admin.register(models.MachineAnnotator)
class MachineAnnotatorAdmin(ReadOnlyAdmin):
    list_display = ("name", "kind", "version", "created_at")


@admin.register(models.Batch)
class BatchAdmin(ReadOnlyAdmin):
    """Moved through its stages by the pipeline and the batch page, never by a form."""

    list_display = ("pk", "name", "dataset", "state", "created_at")
    list_filter = ("state", "dataset")


@admin.register(models.HIT)
class HITAdmin(ReadOnlyAdmin):
    list_display = ("pk", "batch", "index", "max_assignments")
    list_filter = ("batch",)


@admin.register(models.Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = ("external_id", "source", "is_blocked")
    list_filter = ("source", "is_blocked")
    actions = ("block", "unblock")

    def has_block_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("annotation.change_worker")

    @admin.action(
        description="Block the selected workers (open HITs go back)", permissions=["block"]
    )
    def block(self, request: HttpRequest, queryset: QuerySet) -> None:
        each_through_service(
            self,
            request,
            queryset,
            service=lambda worker: worker_block(worker=worker, blocked=True),
            done="blocked",
        )

    @admin.action(description="Unblock the selected workers", permissions=["block"])
    def unblock(self, request: HttpRequest, queryset: QuerySet) -> None:
        each_through_service(
            self,
            request,
            queryset,
            service=lambda worker: worker_block(worker=worker, blocked=False),
            done="unblocked",
        )


# Assignment: registered by `frontend/admin.py`, whose review actions also ask, as the review
# pages do, whether the approved work completes its round (a pipeline task).


@admin.register(models.Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = ("name", "version", "dataset", "rule", "created_at")


@admin.register(models.ImportJob)
class ImportJobAdmin(ReadOnlyAdmin):
    list_display = ("pk", "kind", "status", "done", "total", "dataset", "created_at", "finished_at")
    list_filter = ("kind", "status")


@admin.register(models.TaskLease)
class TaskLeaseAdmin(ReadOnlyAdmin):
    """Background tasks in flight: the workers and the watchdog own these rows."""

    list_display = ("key", "task", "state", "heartbeat_at", "queued_at", "resent")
    list_filter = ("state", "task")


@admin.register(models.Evaluation)
class EvaluationAdmin(ReadOnlyAdmin):
    list_display = ("model_name", "release", "submitted_by", "created_at")
    list_filter = ("release",)
    search_fields = ("model_name",)


@admin.register(models.EvaluationJob)
class EvaluationJobAdmin(ReadOnlyAdmin):
    """Leaderboard uploads being scored; the rankings themselves are left out of the page."""

    list_display = ("pk", "model_name", "release", "status", "done", "total", "created_at")
    list_filter = ("status",)
    raw_id_fields = ("release", "evaluation", "submitted_by")
    exclude = ("rankings_json",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).defer("rankings_json")


@admin.register(models.RelevanceCalibration)
class RelevanceCalibrationAdmin(ReadOnlyAdmin):
    list_display = ("dataset", "created_at")
    list_filter = ("dataset",)


@admin.register(models.CalibratedRelevanceModel)
class CalibratedRelevanceModelAdmin(ReadOnlyAdmin):
    list_display = ("dataset", "version", "created_at")
    list_filter = ("dataset",)
    exclude = ("model",)  # the pickled regressor: bytes, not for reading


@admin.register(models.Instructions)
class InstructionsAdmin(ReadOnlyAdmin):
    """A version is what earlier assignments showed: never edited. A new one is made on the
    batch's page (`instructions_save` checks its examples and numbers it)."""

    list_display = ("batch", "version", "created_by", "created_at")
    list_filter = ("batch",)


@admin.register(models.QualificationPair)
class QualificationPairAdmin(ReadOnlyAdmin):
    """A batch's practice pairs; changed through `batch_qualification` or the batch page."""

    list_display = ("batch", "position", "image", "caption", "positive", "source", "mturk_test")
    list_filter = ("source", "positive", "mturk_test", "batch")


@admin.register(models.QualificationAttempt)
class QualificationAttemptAdmin(ReadOnlyAdmin):
    list_display = ("batch", "worker", "number", "correct", "answered", "passed", "finished_at")
    list_filter = ("passed", "batch")


@admin.register(models.QualificationAnswer)
class QualificationAnswerAdmin(ReadOnlyAdmin):
    list_display = ("attempt", "pair", "level", "correct", "elapsed_ms", "created_at")
    list_filter = ("correct", "level")


# Large tables, and rows that only the pipeline and the crowd's submissions write.
for model in (
    models.Embedding,
    models.PositivePair,
    models.BatchStageProgress,
    models.Query,
    models.Ranking,
    models.Candidate,
    models.Proposal,
    models.HITItem,
    models.Judgement,
    models.Verdict,
):
    admin.site.register(model, ReadOnlyAdmin)
