from django.apps import AppConfig


class PipelineConfig(AppConfig):
    """The machine side's database edge: stage services, Celery tasks, commands."""

    name = "pipeline"
    verbose_name = "Machine in the loop: pipeline"
