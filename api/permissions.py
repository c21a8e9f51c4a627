"""Who may call what: anonymous callers nothing, annotators their own work, staff everything.

Views that name no permission need a logged-in caller (`IsAuthenticated` in settings).
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView


def _is_staff(request: Request) -> bool:
    return bool(request.user and request.user.is_authenticated and request.user.is_staff)


class IsStaff(BasePermission):
    """Staff accounts only (batches, reviews, reports, dataset contents)."""

    message = "staff only"

    def has_permission(self, request: Request, view: APIView) -> bool:
        return _is_staff(request)


class ReadOrStaffWrites(BasePermission):
    """Any logged-in account reads; only staff create or change."""

    message = "staff only: other accounts can only read this"

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or _is_staff(request)
