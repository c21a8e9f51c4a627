"""Fault injection for the soak run and the recovery tests: hold a process at a named point.

`MITL_FAULT_PAUSES="submit=1.5,stage:pooling=20"` makes a process sleep that many seconds
each time it passes the named point, so that a kill lands inside a submit's transaction or
a running stage. Points: `submit` (answers written, not yet committed) and `stage:<stage>`
(a stage or retrieval chunk holding its lease). Never set it in production: unset (the
default), `fault_pause` is one dictionary lookup.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.checks import Tags, Warning, register


def fault_pause(point: str) -> None:
    """Sleep as long as MITL_FAULT_PAUSES asks for at `point` (not at all by default)."""
    seconds = settings.FAULT_PAUSES.get(point)
    if seconds:
        time.sleep(seconds)


@register(Tags.security, deploy=True)
def fault_pauses_unset(app_configs, **kwargs) -> list[Warning]:
    """`check --deploy` warns when test-only pauses are set: they hold every submit open."""
    if not settings.FAULT_PAUSES:
        return []
    return [
        Warning(
            f"MITL_FAULT_PAUSES is set ({', '.join(settings.FAULT_PAUSES)}): test-only pauses "
            "slow real requests",
            hint="Unset MITL_FAULT_PAUSES outside the soak run and the recovery tests.",
            id="mitl.W001",
        )
    ]
