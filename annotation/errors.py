"""The one error every service raises for a request it refuses."""

from __future__ import annotations


class ServiceError(ValueError):
    """A request the platform refuses, with a message for the person who made it.

    `field` names the input the message is about (a batch config key, a form field), when
    there is one, so a form or the API can put the message beside it.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class StateConflict(ServiceError):
    """Refused because of the object's state, not the request's values (the API's 409):
    starting a batch twice, reviewing work that is not waiting, answering a closed HIT."""


class NotPermitted(ServiceError):
    """Refused because of who asks (the API's 403): e.g. a reviewer deciding their own work."""
