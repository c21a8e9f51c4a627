"""Benchmark: every page of the demo database, as staff and as an annotator, p95 ≤ 300 ms.

Run from the repository root::

    python benchmarks/bench_pages.py [--var DIR] [--repeats 5]

Builds the demo's database first (`manage.py demo` on the embedded default: SQLite and
files under `--var`, a temporary folder unless given; `--images 100 --queries 30 --budget
3300` as CI's demo check runs it, a few minutes), unless `--var` already holds one. Then
walks every page of the site's URL table (`frontend.urls`) that answers a GET: each route's
ids are filled from the database (the latest batch, release, dataset, worker, evaluation,
import job; an assignment of the annotator's own; a submitted one for review), signed MTurk
links are left out (their signatures are the MTurk tests' business). Each page is requested
`--repeats` times in a row through Django's test client, after one untimed request (a page's
first visit may build what it keeps, e.g. the bias report: the demo builds it beforehand),
as `admin` and as `annotator1`; only answers 200 count.

The figure is the 95th percentile of all timed requests, per role, against the target of
300 ms; the baseline, measured in the same run the same way, is the cheapest page a user
can open (`/accounts/login/`): ratio = p95 / target (≤ 1 passes) and `baseline_ms` says how
much of it any request costs. Pages slower than the target are listed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO_ROOT, report_line

TARGET_MS = 300.0
DEMO_ARGS = ["--no-progress", "--images", "100", "--queries", "30", "--budget", "3300"]
ROLES = {"staff": "admin", "annotator": "annotator1"}
_PARAM = re.compile(r"<(?:(?P<kind>\w+):)?(?P<name>\w+)>")


def demo_database(var: Path) -> None:
    """Build the demo's database in `var` unless it is there already."""
    if (var / "db.sqlite3").is_file():
        return
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"MITL_VAR_DIR": str(var), "HF_HUB_OFFLINE": "1"}
    for command in (["migrate", "--verbosity", "0"], ["demo", *DEMO_ARGS]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=REPO_ROOT, env=env, check=True)


def django_on(var: Path) -> None:
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["MITL_VAR_DIR"] = str(var)
    from common import django_setup

    django_setup()


def ids_from_database(annotator: str) -> dict[str, int]:
    """The ids a route may ask for, from the demo's database (None where it has none)."""
    from annotation.models import (
        Assignment,
        Batch,
        Dataset,
        Evaluation,
        ImportJob,
        Release,
        Worker,
    )

    def latest(model: Any, **filters: Any) -> int | None:
        return model.objects.filter(**filters).order_by("-pk").values_list("pk", flat=True).first()

    own = latest(Assignment, worker__user__username=annotator)
    return {
        "batch_id": latest(Batch),
        "release_id": latest(Release),
        "dataset_id": latest(Dataset),
        "worker_id": latest(Worker, user__username=annotator) or latest(Worker),
        "evaluation_id": latest(Evaluation),
        "job_id": latest(ImportJob),
        "assignment_id": own,
        "review_assignment_id": latest(Assignment, status="submitted")
        or latest(Assignment, status="approved"),
    }


def page_paths(ids: dict[str, int | None]) -> list[str]:
    """Every page of the URL table with its ids filled, signed links left out."""
    from frontend.urls import urlpatterns

    paths = []
    for pattern in urlpatterns:
        route = str(pattern.pattern)
        names = [m["name"] for m in _PARAM.finditer(route)]
        if "signature" in names or any(ids.get(name) is None for name in names):
            continue
        if route.startswith("review/<int:assignment_id>") and ids["review_assignment_id"]:
            route = route.replace("<int:assignment_id>", str(ids["review_assignment_id"]))
        path = _PARAM.sub(lambda m: str(ids[m["name"]]), route)
        paths.append("/" + path)
    return paths


def timed_pages(username: str, paths: list[str], repeats: int) -> dict[str, list[float]]:
    """Request each path `repeats` times (after an untimed one); ms of the 200 answers."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")  # a host ALLOWED_HOSTS names by default
    client.force_login(get_user_model().objects.get(username=username))
    times: dict[str, list[float]] = {}
    for path in paths:
        if client.get(path).status_code != 200:
            continue  # POST only, another role's page, a redirect: not a page to time
        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            response = client.get(path)
            runs.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200, (path, response.status_code)
        times[path] = runs
    return times


def baseline_ms(repeats: int) -> float:
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")  # a host ALLOWED_HOSTS names by default
    client.get("/accounts/login/")
    runs = []
    for _ in range(repeats * 4):
        start = time.perf_counter()
        assert client.get("/accounts/login/").status_code == 200
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def quiet_refusals() -> None:
    """Pages another role may not open answer 403, which Django logs with a traceback."""
    import logging

    logging.getLogger("django.request").setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--var", type=Path, help="a demo's MITL_VAR_DIR (built when empty)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    var = args.var or Path(tempfile.mkdtemp(prefix="mitl-pages-"))
    demo_database(var)
    django_on(var)
    quiet_refusals()
    figures: dict[str, Any] = {}
    slow: list[str] = []
    for role, username in ROLES.items():
        times = timed_pages(username, page_paths(ids_from_database(username)), args.repeats)
        every = [ms for runs in times.values() for ms in runs]
        if not every:
            raise SystemExit(f"no page answered 200 to {username}: is the demo database complete?")
        figures[role] = {"pages": len(times), "p95_ms": round(p95(every), 1)}
        for path, runs in sorted(times.items(), key=lambda item: -p95(item[1])):
            print(f"{role:>9} {p95(runs):8.1f} ms  {path}")
            if p95(runs) > TARGET_MS:
                slow.append(f"{role} {path} {p95(runs):.0f} ms")
    worst = max(row["p95_ms"] for row in figures.values())
    report_line(
        "pages",
        ratio=round(worst / TARGET_MS, 3),
        target=1.0,
        better="lower",
        baseline_ms=round(baseline_ms(args.repeats), 1),
        slow=slow,
        **figures,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
