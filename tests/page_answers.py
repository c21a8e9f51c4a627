"""Answers as a worker's page sends them: each pair named by its number on the page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotation.models import Assignment
from annotation.pages import page_items


def page_answers(
    assignment: Assignment, level_of: Mapping[str, str], *, elapsed_ms: int = 900
) -> list[dict[str, Any]]:
    """One answer per pair of the assignment's page, its level by the item's role, named by
    the pair's number there (`annotation.pages`), as the page and the API name it."""
    rows = page_items(hit_id=assignment.hit_id, assignment=assignment, fields=("role",))
    return [
        {"item": number, "level": level_of[role], "elapsed_ms": elapsed_ms}
        for number, (_pk, role) in enumerate(rows, start=1)
    ]
