"""Load an account's worker with the account: the work pages need it on every request."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend

from .prepared import Prepared


def _user_with_worker(user_id: Any) -> Any:
    users = get_user_model()._default_manager.select_related("worker")
    return users.filter(pk=user_id).order_by("pk")[:1]  # as `.first()` reads it


# Every request of a logged-in account reads it: built once (annotation.prepared).
_USER_WITH_WORKER = Prepared(_user_with_worker, 1)


class WorkerAwareBackend(ModelBackend):
    """Django's model backend, whose per-request user lookup also fetches `user.worker`.

    Every annotator request (next HIT, submit, page) needs the account's worker; joining
    it to the user query the session already makes saves a query per request. An account
    without a worker yet gets `None` cached, and `worker_for_user` creates one.
    """

    def get_user(self, user_id: Any) -> Any:
        if isinstance(user_id, int) and not isinstance(user_id, bool):
            found = _USER_WITH_WORKER.objects(user_id)
        else:  # not a whole number (another user model's key): the ORM reads it
            found = list(_user_with_worker(user_id))
        user = found[0] if found else None
        return user if user is not None and self.user_can_authenticate(user) else None
