"""Django's 400 and 404 handlers: the API's one error format under /api/, pages elsewhere.

DRF answers errors inside its views; these cover what reaches Django first: a path no URL
pattern takes (one with a new line, say) and a request Django refuses before any view (a
bad Host header). The 500 handler is `config.outages.server_error_or_outage`.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

API_PREFIX = "/api/"


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return JsonResponse({"detail": f"no API endpoint at {request.path}"}, status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return JsonResponse({"detail": "bad request: Django refused it before the API"}, status=400)
    return defaults.bad_request(request, exception)
