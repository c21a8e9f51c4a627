from django.conf import settings
from django.conf.urls.static import static
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from frontend.views.accounts import LoginView

# A database or cache outage answers 503 with Retry-After, other failures 500.
handler500 = "config.outages.server_error_or_outage"
# Under /api/, a 404 or 400 that no view answered is JSON too (the API's one error format).
handler404 = "config.error_pages.page_not_found"
handler400 = "config.error_pages.bad_request"

urlpatterns = [
    # One login page, with limits on password attempts, for the admin too.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    # Django's account views less password reset: no mail server is configured, so a reset
    # link could never arrive (README, "Accounts and passwords"); staff set passwords.
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "accounts/password_change/",
        auth_views.PasswordChangeView.as_view(),
        name="password_change",
    ),
    path(
        "accounts/password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("api/", include("api.urls")),
    path("", include("frontend.urls")),
]
if settings.DEBUG:
    urlpatterns += static(settings.MEDIA_URL, document_root=settings.MEDIA_ROOT)
