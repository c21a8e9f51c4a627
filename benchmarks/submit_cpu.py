"""CPU time and SQL statements per HIT of the crowd's submit path, in-process.

    python benchmarks/submit_cpu.py                      # this tree, 3 runs of 200 HITs
    python benchmarks/submit_cpu.py --tree ../old --tree .   # two trees, alternating

Each run is its own Python process on one tree's code: it creates the database
`bench_submit_cpu` (on `BENCH_POSTGRES_URL`, default postgres://postgres@127.0.0.1:5432/),
migrates it, makes an annotating batch like `bench_submit.py`'s (text-only, 16 tasks + 2
goldens per HIT, follow-ups on, `approve_or_flag`) and one logged-in account, then has
Django's test client send `POST /api/assignments/<id>/submit/?take_next=true` with the HIT's
18 answers, HIT after HIT (20 untimed first). Sessions live in Redis (`BENCH_REDIS_URL`,
default redis://127.0.0.1:6379/14) as in production; `DEBUG` off. It reports this process's
CPU time per HIT (`time.process_time`: the web process's share, without PostgreSQL's), and
in one more pass the SQL statements per HIT (BEGIN/COMMIT and savepoints left out). Runs of
several trees alternate, so a change in the machine's load hits each of them alike; the
medians are reported with the load average beside each run. The database is dropped after
each run. No HTTP server, no concurrency: `bench_submit.py` measures those.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/")
CACHE_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
DB_NAME = "bench_submit_cpu"
WARM_UP = 20


def run_one(tree: Path, hits: int) -> dict[str, Any]:
    """In this process, on `tree`'s code: set up, time `hits` HITs, count one more pass."""
    sys.path[:0] = [str(tree), str(tree / "benchmarks")]
    os.chdir(tree)
    os.environ.update(
        DATABASE_URL=SERVER_URL.rstrip("/") + "/" + DB_NAME,
        CACHE_URL=CACHE_URL,
        DJANGO_SETTINGS_MODULE="config.settings",
        DEBUG="0",
        SECRET_KEY="bench-submit-cpu-" + "x" * 50,
        ALLOWED_HOSTS="testserver",
    )
    _database("DROP DATABASE IF EXISTS {0} WITH (FORCE)", "CREATE DATABASE {0}")
    try:
        client = _set_up(hits + 2 * WARM_UP + 50)
        page = client.post("/api/assignments/next/").json()
        rng = random.Random(0)
        for _ in range(WARM_UP):
            page = _submit(client, page, rng)
        start = time.process_time()
        for _ in range(hits):
            page = _submit(client, page, rng)
        cpu = time.process_time() - start
        statements = _statements_per_hit(client, page, rng, WARM_UP)
    finally:
        from django.db import connection

        connection.close()
        _database("DROP DATABASE IF EXISTS {0} WITH (FORCE)")
    return {"cpu_ms": cpu / hits * 1000, "statements": statements, "load": os.getloadavg()[0]}


def _database(*statements: str) -> None:
    import psycopg2

    admin = psycopg2.connect(SERVER_URL.rstrip("/") + "/postgres")
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement.format(DB_NAME))
    finally:
        admin.close()


def _set_up(n_hits: int) -> Any:
    """Migrate, make the batch and one account; return a test client logged in as it."""
    import django

    import annotation

    if not Path(annotation.__file__).is_relative_to(Path.cwd()):  # another tree's code
        raise RuntimeError(f"annotation comes from {annotation.__file__}, not {Path.cwd()}")
    django.setup()
    from common import dataset_create
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from submit_fixture import CAPTIONS_PER_IMAGE, N_IMAGES, batch_with_hits, workers_create

    from annotation.models import BatchState

    call_command("migrate", verbosity=0)
    cache.clear()
    dataset, images, captions = dataset_create(
        name="cpu",
        description="submit CPU benchmark",
        n_images=N_IMAGES,
        captions_per_image=CAPTIONS_PER_IMAGE,
        caption_text="a caption ({j}) written for image {n}",
    )
    batch_with_hits(dataset, images, captions, "bench ours", n_hits, BatchState.ANNOTATING)
    workers_create(1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench00"))
    return client


def _submit(client: Any, page: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Submit the page's HIT with drawn answers, taking the next; return the next page."""
    from submit_load import answers_make

    answers = answers_make(rng, [item["id"] for item in page["items"]])
    response = client.post(
        page["submit_url"] + "?take_next=true",
        data=json.dumps({"answers": answers}),
        content_type="application/json",
    )
    if response.status_code != 201 or response.json()["next_assignment"] is None:
        raise RuntimeError(f"submit answered {response.status_code}: {response.content[:300]!r}")
    return response.json()["next_assignment"]


def _statements_per_hit(client: Any, page: dict[str, Any], rng: random.Random, n: int) -> float:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counted = 0
    for _ in range(n):
        with CaptureQueriesContext(connection) as captured:
            page = _submit(client, page, rng)
        counted += sum(
            1
            for query in captured.captured_queries
            if query["sql"] not in ("BEGIN", "COMMIT") and "SAVEPOINT" not in query["sql"]
        )
    return counted / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, help="a checkout (repeatable)")
    parser.add_argument("--runs", type=int, default=3, help="runs per tree, alternating")
    parser.add_argument("--hits", type=int, default=200, help="timed HITs per run")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # a run, in a child
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run_one(args.one.resolve(), args.hits)))
        return
    trees = [tree.resolve() for tree in args.tree or [Path(__file__).resolve().parent.parent]]
    results: dict[Path, list[dict[str, Any]]] = {tree: [] for tree in trees}
    for number in range(1, args.runs + 1):
        for tree in trees:
            child = subprocess.run(
                [sys.executable, __file__, "--one", str(tree), "--hits", str(args.hits)],
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(child.stdout.strip().splitlines()[-1])
            results[tree].append(result)
            print(
                f"run {number} {tree}: {result['cpu_ms']:.2f} ms CPU per HIT, "
                f"{result['statements']:.2f} statements per HIT (load {result['load']:.1f})",
                flush=True,
            )
    for tree, runs in results.items():
        print(
            f"{tree}: median {statistics.median(r['cpu_ms'] for r in runs):.2f} ms CPU per HIT "
            f"over {len(runs)} runs of {args.hits} HITs, "
            f"{statistics.median(r['statements'] for r in runs):.2f} statements per HIT"
        )


if __name__ == "__main__":
    main()
