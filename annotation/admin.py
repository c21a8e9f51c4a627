"""Django admin for every model: a read-mostly window for staff."""

from django.contrib import admin

from . import models


@admin.register(models.Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at")
    search_fields = ("name",)


@admin.register(models.Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ("ext_id", "dataset", "file_name")
    list_filter = ("dataset",)
    search_fields = ("ext_id", "file_name")


@admin.register(models.Caption)
class CaptionAdmin(admin.ModelAdmin):
    list_display = ("ext_id", "dataset", "text", "is_invalid")
    list_filter = ("dataset", "is_invalid")
    search_fields = ("ext_id", "text")
    raw_id_fields = ("image",)


@admin.register(models.PositiveSet)
class PositiveSetAdmin(admin.ModelAdmin):
    list_display = ("name", "dataset", "source", "created_at")
    list_filter = ("dataset", "source")


@admin.register(models.MachineAnnotator)
class MachineAnnotatorAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "version", "created_at")


@admin.register(models.Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = ("pk", "name", "dataset", "state", "created_at")
    list_filter = ("state", "dataset")
    # Checked once at creation (mitl.config) and read on every hand-out and submission:
    # an edit here could not be checked, so the config is shown, never edited.
    readonly_fields = ("config",)


@admin.register(models.HIT)
class HITAdmin(admin.ModelAdmin):
    list_display = ("pk", "batch", "index", "max_assignments")
    list_filter = ("batch",)


@admin.register(models.Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ("external_id", "source", "is_blocked")
    list_filter = ("source", "is_blocked")


@admin.register(models.Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("pk", "hit", "worker", "status", "flagged", "submitted_at")
    list_filter = ("status", "flagged")
    raw_id_fields = ("hit", "worker")


@admin.register(models.Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "dataset", "rule", "created_at")


@admin.register(models.ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ("pk", "kind", "status", "done", "total", "dataset", "created_at", "finished_at")
    list_filter = ("kind", "status")
    raw_id_fields = ("dataset", "created_by")


@admin.register(models.TaskLease)
class TaskLeaseAdmin(admin.ModelAdmin):
    """Background tasks in flight; read-only: the workers and the watchdog own these rows."""

    list_display = ("key", "task", "state", "heartbeat_at", "queued_at", "resent")
    list_filter = ("state", "task")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ("model_name", "release", "submitted_by", "created_at")
    list_filter = ("release",)
    search_fields = ("model_name",)
    raw_id_fields = ("release", "submitted_by")


@admin.register(models.EvaluationJob)
class EvaluationJobAdmin(admin.ModelAdmin):
    """Leaderboard uploads being scored; the rankings themselves are left out of the page."""

    list_display = ("pk", "model_name", "release", "status", "done", "total", "created_at")
    list_filter = ("status",)
    raw_id_fields = ("release", "evaluation", "submitted_by")
    exclude = ("rankings",)


@admin.register(models.RelevanceCalibration)
class RelevanceCalibrationAdmin(admin.ModelAdmin):
    list_display = ("dataset", "created_at")
    list_filter = ("dataset",)
    readonly_fields = ("created_at",)


@admin.register(models.Instructions)
class InstructionsAdmin(admin.ModelAdmin):
    list_display = ("batch", "version", "created_by", "created_at")
    list_filter = ("batch",)
    raw_id_fields = ("batch", "created_by")
    # A version is what earlier assignments showed (Assignment.instructions): never edited.
    # Its batch and number too: moved to another batch, its examples' ids would name that
    # batch's dataset's images; renumbered, another version would become the current one.
    readonly_fields = ("content", "created_at")

    def get_readonly_fields(self, request, obj=None) -> tuple[str, ...]:
        if obj is None:
            return self.readonly_fields
        return ("batch", "version", *self.readonly_fields)


@admin.register(models.QualificationPair)
class QualificationPairAdmin(admin.ModelAdmin):
    """A batch's practice pairs; changed through `batch_qualification`, which checks them."""

    list_display = ("batch", "position", "image", "caption", "positive", "source")
    list_filter = ("source", "positive", "batch")
    raw_id_fields = ("batch", "image", "caption")


@admin.register(models.QualificationAttempt)
class QualificationAttemptAdmin(admin.ModelAdmin):
    list_display = ("batch", "worker", "number", "correct", "answered", "passed", "finished_at")
    list_filter = ("passed", "batch")
    raw_id_fields = ("batch", "worker")
    readonly_fields = ("started_at",)


@admin.register(models.QualificationAnswer)
class QualificationAnswerAdmin(admin.ModelAdmin):
    list_display = ("attempt", "pair", "level", "correct", "elapsed_ms", "created_at")
    list_filter = ("correct", "level")
    raw_id_fields = ("attempt", "pair")


# Large tables: listed with raw id widgets so their pages never load every related row.
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
    admin.site.register(
        model,
        type(
            f"{model.__name__}Admin",
            (admin.ModelAdmin,),
            {
                "raw_id_fields": tuple(
                    f.name
                    for f in model._meta.get_fields()
                    if f.concrete and (f.many_to_one or f.one_to_one)
                ),
            },
        ),
    )
