"""What goes wrong with MTurk: input MTurk cannot use, and refusals (MTurk's or ours).

Pure: `MTurkInputError` is raised by the pure modules; the services turn it into
`MTurkError`, a `ServiceError` that pages, commands and tasks show as it is.
"""

from __future__ import annotations

from annotation.errors import ServiceError


class MTurkInputError(ValueError):
    """A setting, URL or file is not usable for MTurk; the message says how to fix it."""


class MTurkError(ServiceError):
    """MTurk refused a call, or the batch cannot go to MTurk; the message says why."""


class SyncRunning(MTurkError):
    """Another sync of the batch holds its lease: this one did nothing."""


class TryLater(ServiceError):
    """Refused for now, not for good: too much unverified MTurk traffic from one client or on
    one HIT. The HIT page answers 429 with `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
