from django.urls import path

from .views import pages

app_name = "frontend"
urlpatterns = [
    path("", pages.home, name="home"),
    path("batches/<int:batch_id>/", pages.batch_page, name="batch"),
]
