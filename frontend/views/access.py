"""Who may open a page: anonymous visitors go to the login page, others get a 403."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

View = Callable[..., HttpResponse]


def staff_required(view: View) -> View:
    """Let staff through; send anonymous visitors to log in; refuse everyone else (403)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not request.user.is_staff:
            raise PermissionDenied("staff only")
        return view(request, *args, **kwargs)

    return wrapped
