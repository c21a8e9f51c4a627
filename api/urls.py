from django.urls import path

from . import views

app_name = "api"
urlpatterns = [
    path("health/", views.health, name="health"),
    path("batches/<int:batch_id>/", views.batch_detail, name="batch-detail"),
]
