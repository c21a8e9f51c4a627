"""The REST API under /api/ (docs/api.md); every resource lives in its own module."""

from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from . import auth, evaluations, reports, views, work
from .annotators import MachineAnnotatorViewSet
from .batches import BatchViewSet
from .datasets import CaptionViewSet, DatasetViewSet, ImageViewSet, PositiveSetViewSet
from .releases import ReleaseViewSet
from .reviews import ReviewViewSet

router = SimpleRouter()
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("images", ImageViewSet, basename="image")
router.register("captions", CaptionViewSet, basename="caption")
router.register("positive-sets", PositiveSetViewSet, basename="positive-set")
router.register("annotators", MachineAnnotatorViewSet, basename="annotator")
router.register("batches", BatchViewSet, basename="batch")
router.register("reviews", ReviewViewSet, basename="review")
router.register("releases", ReleaseViewSet, basename="release")

app_name = "api"
urlpatterns = [
    path("health/", views.health, name="health"),
    path("auth/token/", auth.TokenView.as_view(), name="token"),
    path("schema/", views.SchemaView.as_view(), name="schema"),
    path("docs/", views.DocsView.as_view(url_name="api:schema"), name="docs"),
    path("imports/", include("api.imports")),  # dataset and positive-set imports (H9)
    path("assignments/", work.AssignmentListView.as_view(), name="assignment-list"),
    path("assignments/next/", work.assignment_next, name="assignment-next"),
    path("assignments/<int:assignment_id>/", work.assignment_detail, name="assignment-detail"),
    path(
        "assignments/<int:assignment_id>/submit/",
        work.assignment_submit_view,
        name="assignment-submit",
    ),
    path(
        "batches/<int:batch_id>/diversity/",
        reports.BatchDiversityView.as_view(),
        name="batch-diversity",
    ),
    path("batches/<int:batch_id>/bias/", reports.BatchBiasView.as_view(), name="batch-bias"),
    path("datasets/<slug:name>/stats/", reports.DatasetStatsView.as_view(), name="dataset-stats"),
    path(
        "releases/<int:release_id>/evaluations/",
        evaluations.ReleaseEvaluationsView.as_view(),
        name="release-evaluations",
    ),
    path(
        "releases/<int:release_id>/evaluations/jobs/<int:job_id>/",
        evaluations.EvaluationJobView.as_view(),
        name="evaluation-job",
    ),
    path(
        "releases/<int:release_id>/evaluations/<int:evaluation_id>/explanation/",
        evaluations.EvaluationExplanationView.as_view(),
        name="evaluation-explanation",
    ),
    *router.urls,
    # Anything else under /api/ is a 404 in the API's error format, not an HTML page.
    # [\s\S], not ".": a path with a new line in it too (config.error_pages covers the rest).
    re_path(r"^[\s\S]*/$", views.not_found, name="not-found"),
]
