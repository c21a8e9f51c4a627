"""The login page: Django's, with the API token endpoint's limits on password attempts."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse

from annotation.login_limits import RateLimitUnavailable, login_throttle_wait, login_username


class LoginView(auth_views.LoginView):
    """Log in; a POST over the login rates (annotation/login_limits.py) is a 429."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            wait = login_throttle_wait(request)
        except RateLimitUnavailable as exc:
            response = self._refused(request, str(exc.detail).capitalize() + ".", status=503)
            response["Retry-After"] = str(exc.wait)
            return response
        if wait is None:
            return super().post(request, *args, **kwargs)
        response = self._refused(
            request,
            f"Too many login attempts from this address or for this username. "
            f"Try again in {wait} seconds.",
            status=429,
        )
        response["Retry-After"] = str(wait)
        return response

    def _refused(self, request: HttpRequest, message: str, *, status: int) -> HttpResponse:
        # An unbound form: showing a bound one's errors would check the password after all.
        form = self.get_form_class()(request, initial={"username": login_username(request)})
        context = self.get_context_data(form=form, refused=message)
        return self.render_to_response(context, status=status)
