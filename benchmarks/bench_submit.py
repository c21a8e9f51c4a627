"""Benchmark HIT submission over HTTP: gunicorn and PostgreSQL under concurrent workers.

Run from the repository root (``make bench`` does)::

    python benchmarks/bench_submit.py                  # 16 clients for 60 s
    python benchmarks/bench_submit.py --seconds 10     # a quick look

What it measures ("ours"): the production-like path. gunicorn (``config.wsgi``, 2 sync
workers, ``DEBUG=0``) on PostgreSQL, with Redis as the cache (sessions, login counts) as in
docker-compose.yml; 16 clients, each logged in as its own account, loop over
``POST /api/assignments/next/`` then ``POST /api/assignments/<id>/submit/`` with the 18
answers of the whole HIT (16 tasks + 1 golden TP + 1 golden TN). With ``--take-next`` the
submit hands out the next HIT as well (``?take_next=true``): one request per HIT, whose
latency then includes taking the next HIT. Reported: judgements stored per second and the
latency of the submit request (p50, p95).
The baseline, measured in the same run, is the floor for the same writes: the same 16
clients store the same judgements straight into PostgreSQL with psycopg2, one transaction
per HIT (one INSERT of the 18 rows and one UPDATE of the assignment, as the service writes
them), no web layer.
``ratio`` = baseline judgements/s / ours; lower is better, the target is at most 3, and the
p95 target is at most 150 ms.

The script creates its own database ``bench_submit`` on the server named by
``BENCH_POSTGRES_URL`` (default ``postgres://postgres@127.0.0.1:5432/``), dropped and
created again at every start and dropped at the end (``--keep-db`` keeps it). Nothing else
on the server is read or written; ``DATABASE_URL`` is ignored.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from typing import Any

from common import dataset_create, django_setup, report_line

SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/")
# gunicorn's cache, as docker-compose gives it one; its keys are prefixed per run.
CACHE_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
DB_NAME = "bench_submit"
DATABASE_URL = SERVER_URL.rstrip("/") + "/" + DB_NAME
# This process and gunicorn both use the throwaway database, whatever the caller configured.
os.environ["DATABASE_URL"] = DATABASE_URL
django_setup()

import psycopg2  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from submit_baseline import (  # noqa: E402
    baseline_assignments_create,
    baseline_prepare,
    baseline_reset,
    baseline_run,
)
from submit_fixture import (  # noqa: E402
    CAPTIONS_PER_IMAGE,
    ITEMS_PER_HIT,
    N_IMAGES,
    BenchError,
    batch_with_hits,
    workers_create,
)
from submit_load import answers_make, clients_run  # noqa: E402
from submit_server import Gunicorn, cpu_seconds  # noqa: E402

from annotation.models import BatchState, Judgement  # noqa: E402

# HITs made for "ours", all in one annotating batch: under three ECCV-Caption-size batches
# (2,902 HITs each), and more than 16 clients take in 60 s (80-115 HITs/s here). Finding the
# next free HIT reads every HIT of the annotating batches, so this number matters; it does
# not depend on --seconds, so short and long runs compare. A client that gets a 204 stops
# and the run is reported as cut short.
DEFAULT_HITS = 8_000
TARGET_RATIO = 3.0
P95_TARGET_MS = 150.0


# --------------------------------------------------------------------------- database


def database_recreate() -> None:
    """Drop `bench_submit` (closing its sessions) and create it empty."""
    _admin_execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)", f"CREATE DATABASE {DB_NAME}")


def database_drop() -> None:
    connection.close()
    _admin_execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


def _admin_execute(*statements: str) -> None:
    """Run statements outside a transaction in the server's `postgres` database."""
    admin = psycopg2.connect(SERVER_URL.rstrip("/") + "/postgres")
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
    finally:
        admin.close()


# --------------------------------------------------------------------------- queries


def queries_show() -> None:
    """Print the SQL of one more next + submit, run in this process by Django's test client."""
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    settings.ALLOWED_HOSTS = ["testserver"]
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench00"))
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


# --------------------------------------------------------------------------- report


def percentile(values: list[float], pct: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    n_clients, seconds, n_hits = args.clients, args.seconds, args.hits

    print("set-up (not timed):", flush=True)
    start = time.perf_counter()
    database_recreate()
    call_command("migrate", verbosity=0)
    print(f"  database {DB_NAME}, migrated: {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    dataset, image_pks, caption_pks = dataset_create(
        name="bench-submit",
        description="submit benchmark",
        n_images=N_IMAGES,
        captions_per_image=CAPTIONS_PER_IMAGE,
        caption_text="a caption ({j}) written for image {n}",
    )
    batch_with_hits(dataset, image_pks, caption_pks, "bench ours", n_hits, BatchState.ANNOTATING)
    workers_create(n_clients)
    # The baseline's HITs, with their accepted assignments, in a batch that is no longer
    # annotating (ours' next-HIT query does not see it).
    base_hits = batch_with_hits(
        dataset, image_pks, caption_pks, "bench baseline", n_hits, BatchState.AGGREGATING
    )
    base_assignments = baseline_assignments_create(base_hits, n_clients)
    with connection.cursor() as cursor:
        # Statistics, as autovacuum gathers them on a live database. Taken while the
        # assignment table is empty, they make the planner read the whole table once per
        # HIT in the next-HIT query; never taken, they leave it guessing.
        cursor.execute("ANALYZE")
    print(
        f"  {N_IMAGES} images, {len(caption_pks):,} captions, {n_hits:,} HITs of "
        f"{ITEMS_PER_HIT} pairs for ours and {n_hits:,} with accepted assignments for the "
        f"baseline, {n_clients} accounts: {time.perf_counter() - start:.1f} s",
        flush=True,
    )

    with tempfile.TemporaryFile(prefix="bench-submit-gunicorn-") as log:
        server = Gunicorn(
            workers=args.workers,
            threads=args.threads,
            log=log,
            database_url=DATABASE_URL,
            cache_url=CACHE_URL,
        )
        try:
            server.wait_healthy()
            print(
                f"  gunicorn config.wsgi, {args.workers} workers on port {server.port}; "
                f"logging in {n_clients} clients, one warm-up HIT each",
                flush=True,
            )
            load = os.getloadavg()[0]
            worker_pids = server.worker_pids()
            stats, elapsed, cpu_server, cpu_here = clients_run(
                server.port,
                n_clients,
                seconds,
                lambda: cpu_seconds(worker_pids),
                take_next=args.take_next,
            )
        except BenchError:
            print(f"gunicorn's log (last lines):\n{server.tail()}", flush=True)
            raise
        finally:
            server.stop()

    hits_done = sum(mine.hits for mine in stats)
    if hits_done == 0:
        raise BenchError("no HIT was submitted in the timed window")
    ran_out = any(mine.ran_out for mine in stats)
    submit_ms = [ms for mine in stats for ms in mine.submit_ms]
    next_ms = [ms for mine in stats for ms in mine.next_ms]
    stored = Judgement.objects.filter(assignment__hit__batch__name="bench ours").count()
    expected = (hits_done + n_clients) * ITEMS_PER_HIT  # timed HITs + one warm-up each
    if stored != expected:
        raise BenchError(f"{stored} judgements stored, expected {expected}")
    ours_rate = hits_done * ITEMS_PER_HIT / elapsed
    print(
        f"ours (HTTP, {n_clients} clients, load average {load:.1f} before):\n"
        f"  {hits_done:,} HITs = {hits_done * ITEMS_PER_HIT:,} judgements in {elapsed:.1f} s: "
        f"{ours_rate:.0f} judgements/s ({hits_done / elapsed:.1f} HITs/s)\n"
        f"  submit latency p50 {percentile(submit_ms, 50):.1f} ms, "
        f"p95 {percentile(submit_ms, 95):.1f} ms, max {max(submit_ms):.1f} ms\n"
        + (
            "  next HIT: handed out by the submit request (take_next)\n"
            if args.take_next
            else f"  next latency   p50 {percentile(next_ms, 50):.1f} ms, "
            f"p95 {percentile(next_ms, 95):.1f} ms\n"
        )
        + f"  CPU per HIT: gunicorn workers {cpu_server / hits_done * 1000:.1f} ms, "
        f"clients (this process) {cpu_here / hits_done * 1000:.1f} ms",
        flush=True,
    )
    if ran_out:
        print(f"  WARNING: the {n_hits:,} HITs ran out before the end; raise --hits", flush=True)

    if args.queries:
        print("SQL of one more next + submit (in this process, DEBUG query capture):")
        queries_show()

    # Baseline: the same judgements (ours' answers, HIT by HIT) on a second set of HITs.
    answers = [hit for mine in stats for hit in mine.submitted]
    work = baseline_prepare(base_hits[:hits_done], base_assignments[:hits_done], answers)
    print(
        f"baseline (psycopg2, one transaction per HIT, same {n_clients} clients), "
        f"{args.baseline_repeats} runs:",
        flush=True,
    )
    runs: list[tuple[float, list[float]]] = []
    for run in range(args.baseline_repeats):
        if run:
            baseline_reset(work)
        connection.close()  # the baseline's clients hold their own connections
        base_elapsed, base_ms = baseline_run(work, n_clients, DATABASE_URL)
        stored = Judgement.objects.filter(assignment_id__in=[w.assignment_id for w in work]).count()
        if stored != hits_done * ITEMS_PER_HIT:
            raise BenchError(f"baseline stored {stored} judgements, expected {hits_done * 18}")
        runs.append((base_elapsed, base_ms))
        print(
            f"  run {run + 1}: the same {hits_done * ITEMS_PER_HIT:,} judgements in "
            f"{base_elapsed:.2f} s: {hits_done * ITEMS_PER_HIT / base_elapsed:.0f} judgements/s; "
            f"per-HIT transaction p50 {percentile(base_ms, 50):.1f} ms, "
            f"p95 {percentile(base_ms, 95):.1f} ms",
            flush=True,
        )
    base_elapsed = statistics.median(elapsed for elapsed, _ in runs)
    base_rate = hits_done * ITEMS_PER_HIT / base_elapsed
    print(f"  median: {base_rate:.0f} judgements/s", flush=True)
    return {
        "ours_rate": ours_rate,
        "base_rate": base_rate,
        "p50": percentile(submit_ms, 50),
        "p95": percentile(submit_ms, 95),
        "protocol": "take_next" if args.take_next else "separate_next",
        "elapsed": elapsed,
        "hits": hits_done,
        "ran_out": ran_out,
    }


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="timed window (default 60)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads per gunicorn worker (default 1: sync workers; more overlap database waits)",
    )
    parser.add_argument(
        "--hits",
        type=int,
        default=DEFAULT_HITS,
        help=f"HITs in the annotating batch that ours works on (default {DEFAULT_HITS:,})",
    )
    parser.add_argument(
        "--baseline-repeats",
        type=int,
        default=3,
        help="baseline runs over the same HITs; the median counts (default 3)",
    )
    parser.add_argument(
        "--take-next",
        action="store_true",
        help="let each submit hand out the next HIT too (one request per HIT)",
    )
    parser.add_argument(
        "--queries", action="store_true", help="also print the SQL of one next + submit"
    )
    parser.add_argument(
        "--keep-db", action="store_true", help=f"leave the database {DB_NAME} for inspection"
    )
    args = parser.parse_args()
    if min(args.seconds, args.clients, args.workers, args.baseline_repeats) <= 0:
        parser.error("--seconds, --clients, --workers and --baseline-repeats must be positive")
    if args.hits < 2 * args.clients:
        parser.error(f"--hits must be at least 2 x --clients ({2 * args.clients})")

    # SIGTERM runs the clean-up too (gunicorn stopped, database dropped), like Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    # Like the test runner: no query log in this process while it bulk-inserts.
    settings.DEBUG = False
    print(f"submit benchmark: {DATABASE_URL}", flush=True)
    try:
        result = benchmark(args)
    except BenchError as exc:
        sys.exit(f"bench_submit: {exc}")
    except KeyboardInterrupt:
        sys.exit("bench_submit: interrupted (gunicorn was stopped)")
    finally:
        if not args.keep_db:
            database_drop()

    ratio = result["base_rate"] / result["ours_rate"]
    print(
        f"ratio {ratio:.2f} (baseline / ours judgements per second; target <= {TARGET_RATIO}); "
        f"submit p95 {result['p95']:.1f} ms (target <= {P95_TARGET_MS:.0f})"
    )
    report_line(
        "submit",
        round(ratio, 3),
        TARGET_RATIO,
        "lower",
        judgements_per_s=round(result["ours_rate"], 1),
        baseline_judgements_per_s=round(result["base_rate"], 1),
        p50_ms=round(result["p50"], 1),
        p95_ms=round(result["p95"], 1),
        p95_target_ms=P95_TARGET_MS,
        clients=args.clients,
        protocol=result["protocol"],
        seconds=round(result["elapsed"], 1),
        hits=result["hits"],
        ran_out_of_hits=result["ran_out"],
        database="postgresql",
    )


if __name__ == "__main__":
    main()
