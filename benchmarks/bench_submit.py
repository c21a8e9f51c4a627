"""Benchmark HIT submission over HTTP: gunicorn and PostgreSQL under concurrent workers.

Run from the repository root (``make bench`` does)::

    python benchmarks/bench_submit.py                  # 16 clients, 3 rounds of 20 s
    python benchmarks/bench_submit.py --seconds 5 --rounds 1   # a quick look

What it measures ("ours"): the production-like path. gunicorn (``config.wsgi``, as many sync
workers as the Dockerfile runs, 3; ``DEBUG=0``) on PostgreSQL, with Redis as the cache
(sessions, login counts) as in docker-compose.yml; 16 clients, each logged in as its own
account, loop over ``POST /api/assignments/next/`` then
``POST /api/assignments/<id>/submit/`` with the 18 answers of the whole HIT (16 tasks + 1
golden TP + 1 golden TN). With ``--take-next`` the submit hands out the next HIT as well
(``?take_next=true``): one request per HIT, whose latency then includes taking the next HIT.
Reported: judgements stored per second and the latency of the submit request (p50, p95).
The baseline, measured in the same run, is the floor for the same writes: the same 16
clients store the same judgements straight into PostgreSQL with psycopg2, one transaction
per HIT (one INSERT of the 18 rows and one UPDATE of the assignment, as the service writes
them), no web layer.
The two alternate: each of ``--rounds`` (3) rounds runs ours for ``--seconds`` (20), checks
that every timed HIT stored exactly the answers its client sent, then runs the baseline on
those answers (on HITs no earlier round used); at the end no HIT may hold more assignments
than it allows. ``ratio`` = median baseline judgements/s / median ours; lower is better, the
target is at most 3, and the p95 target (over every round's submits) is at most 150 ms.

The script creates its own database ``bench_submit`` on the server named by
``BENCH_POSTGRES_URL`` (default ``postgres://postgres@127.0.0.1:5432/``), dropped and
created again at every start and dropped at the end (``--keep-db`` keeps it). Nothing else
on the server is read or written; ``DATABASE_URL`` is ignored.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
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
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count, F, Q  # noqa: E402
from submit_baseline import (  # noqa: E402
    baseline_assignments_create,
    baseline_prepare,
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
from submit_load import clients_run  # noqa: E402
from submit_queries import queries_show  # noqa: E402
from submit_server import Gunicorn, cpu_seconds, dockerfile_workers  # noqa: E402

from annotation.handout import ACTIVE_STATUSES  # noqa: E402
from annotation.models import HIT, Assignment, BatchState, Judgement  # noqa: E402
from annotation.pages import page_numbers  # noqa: E402

# HITs made for "ours", all in one annotating batch: under three ECCV-Caption-size batches
# (2,902 HITs each), and more than 16 clients take in 60 s (80-115 HITs/s here). Finding the
# next free HIT reads every HIT of the annotating batches, so this number matters; it does
# not depend on --seconds, so short and long runs compare. A client that gets a 204 stops
# and the run is reported as cut short.
DEFAULT_HITS = 8_000
TARGET_RATIO = 3.0

PRODUCTION_WORKERS = dockerfile_workers()
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

    rounds: list[RoundResult] = []
    with tempfile.TemporaryDirectory(prefix="bench-submit-gunicorn-") as log_dir:
        server = Gunicorn(
            workers=args.workers,
            threads=args.threads,
            log_dir=Path(log_dir),
            database_url=DATABASE_URL,
            cache_url=CACHE_URL,
        )
        try:
            server.wait_healthy()
            print(
                f"  gunicorn config.wsgi, {args.workers} workers on port {server.port}; "
                f"{args.rounds} rounds of ours ({seconds:g} s, {n_clients} clients logged in "
                "again, one warm-up HIT each) then the baseline on the same answers",
                flush=True,
            )
            for number in range(1, args.rounds + 1):
                done = round_run(args, server, base_hits, base_assignments, rounds)
                rounds.append(done)
                print(
                    f"  round {number}: ours {done.ours_rate:.0f} judgements/s "
                    f"({done.hits:,} HITs, submit p95 {percentile(done.submit_ms, 95):.1f} ms, "
                    f"load {done.load:.1f}); baseline {done.base_rate:.0f} judgements/s; "
                    f"{done.hits:,} HITs' stored answers equal those sent",
                    flush=True,
                )
        except BenchError:
            print(f"gunicorn's log (last lines):\n{server.tail()}", flush=True)
            raise
        finally:
            server.stop()

    over = (
        HIT.objects.filter(batch__name="bench ours")
        .annotate(live=Count("assignments", filter=Q(assignments__status__in=ACTIVE_STATUSES)))
        .filter(live__gt=F("max_assignments"))
        .count()
    )
    if over:
        raise BenchError(f"{over} HITs hold more assignments than they allow")
    submit_ms = [ms for done in rounds for ms in done.submit_ms]
    ours_rate = statistics.median(done.ours_rate for done in rounds)
    base_rate = statistics.median(done.base_rate for done in rounds)
    hits_done = sum(done.hits for done in rounds)
    ran_out = any(done.ran_out for done in rounds)
    print(
        f"ours (HTTP, {n_clients} clients), median of {len(rounds)} rounds: "
        f"{ours_rate:.0f} judgements/s\n"
        f"  submit latency p50 {percentile(submit_ms, 50):.1f} ms, "
        f"p95 {percentile(submit_ms, 95):.1f} ms, max {max(submit_ms):.1f} ms\n"
        + (
            "  next HIT: handed out by the submit request (take_next)\n"
            if args.take_next
            else "  next latency   p50 "
            f"{percentile([ms for d in rounds for ms in d.next_ms], 50):.1f} ms\n"
        )
        + f"  CPU per HIT: gunicorn workers "
        f"{sum(d.cpu_server for d in rounds) / hits_done * 1000:.1f} ms, "
        f"clients (this process) {sum(d.cpu_here for d in rounds) / hits_done * 1000:.1f} ms\n"
        f"baseline (psycopg2, one transaction per HIT, same {n_clients} clients), median: "
        f"{base_rate:.0f} judgements/s\n"
        f"checks: every timed HIT's stored answers equal those sent, no HIT over its limit",
        flush=True,
    )
    if ran_out:
        print(f"  WARNING: the {n_hits:,} HITs ran out before the end; raise --hits", flush=True)
    if args.queries:
        print("SQL of one more next + submit (in this process, DEBUG query capture):")
        queries_show()
    return {
        "ours_rate": ours_rate,
        "base_rate": base_rate,
        "p50": percentile(submit_ms, 50),
        "p95": percentile(submit_ms, 95),
        "protocol": "take_next" if args.take_next else "separate_next",
        "elapsed": sum(done.elapsed for done in rounds),
        "hits": hits_done,
        "ran_out": ran_out,
    }


@dataclass
class RoundResult:
    """One round: ours for the window, then the baseline writing the same answers."""

    hits: int
    elapsed: float
    ours_rate: float
    base_rate: float
    submit_ms: list[float]
    next_ms: list[float]
    cpu_server: float
    cpu_here: float
    load: float
    ran_out: bool


def round_run(
    args: argparse.Namespace,
    server: Gunicorn,
    base_hits: list,
    base_assignments: list[int],
    earlier: list[RoundResult],
) -> RoundResult:
    """Run ours for one window, check what it stored, then the baseline on fresh HITs."""
    load = os.getloadavg()[0]
    worker_pids = server.worker_pids()
    before = Judgement.objects.filter(assignment__hit__batch__name="bench ours").count()
    stats, elapsed, cpu_server, cpu_here = clients_run(
        server.port,
        args.clients,
        args.seconds,
        lambda: cpu_seconds(worker_pids),
        take_next=args.take_next,
    )
    hits_done = sum(mine.hits for mine in stats)
    if hits_done == 0:
        raise BenchError("no HIT was submitted in the timed window")
    stored = Judgement.objects.filter(assignment__hit__batch__name="bench ours").count() - before
    expected = (hits_done + args.clients) * ITEMS_PER_HIT  # timed HITs + one warm-up each
    if stored != expected:
        raise BenchError(f"{stored} judgements stored, expected {expected}")
    sent = {
        assignment_id: answers
        for mine in stats
        for assignment_id, answers in zip(mine.assignment_ids, mine.submitted, strict=True)
    }
    answers_stored_check(sent)

    # The baseline writes the same answers, HIT by HIT, on HITs no earlier round used.
    offset = sum(done.hits for done in earlier)
    answers = [hit for mine in stats for hit in mine.submitted]
    work = baseline_prepare(
        base_hits[offset : offset + hits_done],
        base_assignments[offset : offset + hits_done],
        answers,
    )
    connection.close()  # the baseline's clients hold their own connections
    base_elapsed, _ = baseline_run(work, args.clients, DATABASE_URL)
    base_stored = Judgement.objects.filter(
        assignment_id__in=[w.assignment_id for w in work]
    ).count()
    if base_stored != hits_done * ITEMS_PER_HIT:
        raise BenchError(f"baseline stored {base_stored}, expected {hits_done * ITEMS_PER_HIT}")
    return RoundResult(
        hits=hits_done,
        elapsed=elapsed,
        ours_rate=hits_done * ITEMS_PER_HIT / elapsed,
        base_rate=hits_done * ITEMS_PER_HIT / base_elapsed,
        submit_ms=[ms for mine in stats for ms in mine.submit_ms],
        next_ms=[ms for mine in stats for ms in mine.next_ms],
        cpu_server=cpu_server,
        cpu_here=cpu_here,
        load=load,
        ran_out=any(mine.ran_out for mine in stats),
    )


def answers_stored_check(sent: dict[int, list[dict[str, Any]]]) -> None:
    """Every answered assignment stored exactly the answers its client sent."""
    stored: dict[int, dict[int, tuple]] = {}
    for assignment_id, item_id, level, other_text, elapsed_ms in Judgement.objects.filter(
        assignment_id__in=list(sent)
    ).values_list("assignment_id", "item_id", "level", "other_text", "elapsed_ms"):
        stored.setdefault(assignment_id, {})[item_id] = (level, other_text, elapsed_ms)
    handed_out = Assignment.objects.in_bulk(list(sent))
    for assignment_id, answers in sent.items():
        # The clients name pairs by their numbers on the page (annotation.pages).
        number = page_numbers(assignment=handed_out[assignment_id])
        mine = {number[item]: answer for item, answer in stored.get(assignment_id, {}).items()}
        wanted = {a["item"]: (a["level"], a["other_text"], a["elapsed_ms"]) for a in answers}
        if mine != wanted:
            raise BenchError(f"assignment {assignment_id}: stored answers differ from those sent")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _arguments() -> argparse.Namespace:
    """Read and check the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=20, help="timed window of each round (default 20)"
    )
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument(
        "--workers",
        type=int,
        default=PRODUCTION_WORKERS,
        help=f"gunicorn workers (default {PRODUCTION_WORKERS}: the Dockerfile's --workers)",
    )
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
        "--rounds",
        type=int,
        default=3,
        help="rounds of ours then the baseline on the same answers; medians count (default 3)",
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
    if min(args.seconds, args.clients, args.workers, args.rounds) <= 0:
        parser.error("--seconds, --clients, --workers and --rounds must be positive")
    if args.hits < 2 * args.clients:
        parser.error(f"--hits must be at least 2 x --clients ({2 * args.clients})")
    return args


def main() -> None:
    args = _arguments()
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
        rounds=args.rounds,
        database="postgresql",
    )


if __name__ == "__main__":
    main()
