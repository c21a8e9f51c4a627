from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation: datasets, batches and crowd work"

    def ready(self) -> None:
        from . import faults  # noqa: F401  registers its deployment check
