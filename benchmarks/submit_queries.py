"""The SQL of one next + submit, printed by `bench_submit.py --queries`.

Run in the benchmark's process through Django's test client (its query capture), after
the timed rounds; import it after `common.django_setup()`.
"""

from __future__ import annotations

import json
import random

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from submit_load import answers_make

from annotation.models import Assignment
from annotation.pages import page_numbers


def queries_show() -> None:
    """Print the SQL of one more next + submit, run in this process by Django's test client."""
    settings.ALLOWED_HOSTS = ["testserver"]
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench00"))
    # With take_next the account holds an open HIT: submitted first (not shown), so the
    # next request shows a HIT being handed out, not one resumed.
    opened = Assignment.objects.filter(worker__user__username="bench00", status="accepted")
    for assignment in opened:
        numbers = page_numbers(assignment=assignment).values()
        client.post(
            f"/api/assignments/{assignment.pk}/submit/",
            data=json.dumps({"answers": answers_make(random.Random(0), sorted(numbers))}),
            content_type="application/json",
        )
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/assignments/next/")
    _queries_print("next", response.status_code, captured.captured_queries)
    if response.status_code != 200:
        return
    page = response.json()
    answers = answers_make(random.Random(0), [item["id"] for item in page["items"]])
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            page["submit_url"],
            data=json.dumps({"answers": answers}),
            content_type="application/json",
        )
    _queries_print("submit", response.status_code, captured.captured_queries)


def _queries_print(label: str, status: int, queries: list[dict[str, str]]) -> None:
    total_ms = sum(float(q["time"]) for q in queries) * 1000
    print(
        f"  {label}: HTTP {status}, {len(queries)} queries, {total_ms:.1f} ms in the database "
        "(as timed by Django)"
    )
    for query in queries:
        print(f"    {float(query['time']) * 1000:6.1f} ms  {query['sql'][:160]}")
