from django.urls import path

from . import views, work

app_name = "api"
urlpatterns = [
    path("health/", views.health, name="health"),
    path("batches/<int:batch_id>/", views.batch_detail, name="batch-detail"),
    path("assignments/next/", work.assignment_next, name="assignment-next"),
    path("assignments/<int:assignment_id>/", work.assignment_detail, name="assignment-detail"),
    path(
        "assignments/<int:assignment_id>/submit/",
        work.assignment_submit_view,
        name="assignment-submit",
    ),
]
