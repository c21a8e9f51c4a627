"""Benchmark the pooling and building stages at the size of the ECCV Caption run.

Run from the repository root (``make bench`` does)::

    python benchmarks/bench_hit_building.py
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python benchmarks/bench_hit_building.py

What it measures: ``candidates_pool`` then ``hits_build`` ("ours"), called as the pipeline
calls them, on a COCO-5K-sized dataset (5,000 images, 25,000 captions) with 1,261 image and
1,333 caption queries, 5 annotators and k = 5: 64,850 proposals pooled into 46,424 unique
candidates, packed into HITs of 16 tasks + 1 golden TP + 1 golden TN. The baseline is the
floor for the same work: exactly the rows ours wrote (snapshotted, deleted, then written
again) by the fastest means the database offers, prepared before the clock starts: COPY on
PostgreSQL, ``bulk_create`` on SQLite (which has no COPY). The two run
alternately, the median of each is reported, and the last line is one JSON object. After
every "ours" run the four row counts are asserted and every HIT is validated (16 tasks, the
last HIT fewer; one golden TP and one golden TN; positions 0..n-1; no pair twice on a page;
each candidate on exactly one page).

It uses the configured database engine (DATABASE_URL, else SQLite) but only a throwaway test
database created and destroyed with Django's own machinery, like the test runner. Nothing in
the configured database itself is read or written.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import BULK_BATCH, MIB, django_setup, maxrss_bytes, report_line

django_setup()

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.db.models import Model  # noqa: E402
from hit_building_fixture import (  # noqa: E402
    EXPECTED_CANDIDATES,
    EXPECTED_PROPOSALS,
    HIT_SIZE,
    batch_prepare,
    dataset_with_positives_create,
)

from annotation.models import (  # noqa: E402
    HIT,
    Batch,
    BatchStageProgress,
    BatchState,
    Candidate,
    HITItem,
    Proposal,
)
from mitl.config import batch_config  # noqa: E402
from pipeline.build import hits_build  # noqa: E402
from pipeline.bulk import copy_text  # noqa: E402
from pipeline.pool import candidates_pool  # noqa: E402
from pipeline.progress import StageTracker  # noqa: E402

TARGET_RATIO = 2.0
TARGET_SECONDS = 2.0  # pool + build at the ECCV size, on PostgreSQL
# 16 tasks a HIT, the last HIT takes the rest; each HIT has 1 golden TP and 1 golden TN.
EXPECTED_HITS = -(-EXPECTED_CANDIDATES // HIT_SIZE)  # 2,902
EXPECTED_ITEMS = EXPECTED_CANDIDATES + 2 * EXPECTED_HITS  # 52,228

# The rows the two stages write, in insertion (foreign-key) order.
WRITTEN: tuple[type[Model], ...] = (Candidate, Proposal, HIT, HITItem)


# --------------------------------------------------------------------------- runs


def rows_delete(batch: Batch) -> None:
    """Remove what the two stages wrote (and their progress rows), children first.

    The throwaway database holds this one batch only. On PostgreSQL the four tables are
    truncated (instant, and no dead tuples or index bloat carry over into the next run);
    elsewhere the rows are deleted with raw DELETEs (the deletion collector would fetch
    ~160k rows only to find that nothing else points at them).
    """
    BatchStageProgress.objects.filter(batch=batch).delete()
    if connection.vendor == "postgresql":
        assert Batch.objects.count() == 1, "TRUNCATE would empty other batches' rows"
        tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in WRITTEN)
        with connection.cursor() as cursor:
            # CASCADE also empties the (empty) tables that reference these: judgements,
            # verdicts.
            cursor.execute(f"TRUNCATE {tables} CASCADE")
        return
    hits = HIT.objects.filter(batch=batch).values("pk")
    candidates = Candidate.objects.filter(batch=batch).values("pk")
    with transaction.atomic():
        for queryset in (
            HITItem.objects.filter(hit__in=hits),
            HIT.objects.filter(batch=batch),
            Proposal.objects.filter(candidate__in=candidates),
            Candidate.objects.filter(batch=batch),
        ):
            queryset._raw_delete(queryset.db)


def rows_count(batch: Batch) -> dict[str, int]:
    return {
        "Candidate": Candidate.objects.filter(batch=batch).count(),
        "Proposal": Proposal.objects.filter(candidate__batch=batch).count(),
        "HIT": HIT.objects.filter(batch=batch).count(),
        "HITItem": HITItem.objects.filter(hit__batch=batch).count(),
    }


def hits_validate(batch: Batch) -> None:
    """Check every HIT: 16 tasks (the last may hold fewer), one golden TP and one golden TN,
    positions 0..n-1, no pair twice on a page, and every candidate on exactly one page."""
    pages: dict[int, list[tuple[int, str, int | None, int, int]]] = {}
    for row in HITItem.objects.filter(hit__batch=batch).values_list(
        "hit__index", "position", "role", "candidate_id", "image_id", "caption_id"
    ):
        pages.setdefault(row[0], []).append(row[1:])
    assert sorted(pages) == list(range(EXPECTED_HITS)), "HIT indices are not 0..n-1"
    seen_candidates: set[int] = set()
    for index, items in pages.items():
        roles = Counter(role for _, role, *_ in items)
        tasks = roles["task"]
        last = index == EXPECTED_HITS - 1
        assert tasks == HIT_SIZE or (last and 0 < tasks <= HIT_SIZE), f"HIT {index}: {roles}"
        assert roles["golden_tp"] == 1 and roles["golden_tn"] == 1, f"HIT {index}: {roles}"
        assert sorted(p for p, *_ in items) == list(range(len(items))), f"HIT {index} positions"
        pairs = [(image, caption) for *_, image, caption in items]
        assert len(set(pairs)) == len(pairs), f"HIT {index} shows a pair twice"
        candidates = [c for _, role, c, *_ in items if role == "task"]
        assert not seen_candidates.intersection(candidates), f"HIT {index} repeats a candidate"
        seen_candidates.update(candidates)
    assert len(seen_candidates) == EXPECTED_CANDIDATES, "a candidate is on no HIT"


def rows_snapshot(batch: Batch) -> dict[type[Model], list[dict[str, Any]]]:
    """The stored values of every row the two stages wrote, primary keys included."""
    filters = {
        Candidate: {"batch": batch},
        Proposal: {"candidate__batch": batch},
        HIT: {"batch": batch},
        HITItem: {"hit__batch": batch},
    }
    snapshot = {}
    for model in WRITTEN:
        columns = [field.attname for field in model._meta.concrete_fields]
        snapshot[model] = list(
            model.objects.filter(**filters[model]).order_by("pk").values(*columns)
        )
    return snapshot


def content_fingerprint(snapshot: dict[type[Model], list[dict[str, Any]]]) -> int:
    """Hash of what the rows say, independent of primary keys (runs must agree)."""
    candidates = {row["id"]: (row["image_id"], row["caption_id"]) for row in snapshot[Candidate]}
    hit_index = {row["id"]: row["index"] for row in snapshot[HIT]}
    items = sorted(
        (
            hit_index[row["hit_id"]],
            row["position"],
            row["role"],
            row["image_id"],
            row["caption_id"],
            candidates.get(row["candidate_id"]),
        )
        for row in snapshot[HITItem]
    )
    proposals = sorted(
        (
            candidates[row["candidate_id"]],
            row["annotator_id"],
            row["query_id"],
            row["rank"],
            row["score"],
        )
        for row in snapshot[Proposal]
    )
    return hash((tuple(items), tuple(proposals)))


def run_ours(batch_id: int) -> tuple[float, float, float, float]:
    """candidates_pool then hits_build, as `stage_run` calls them.

    Returns seconds: (wall total, wall pool, wall build, this process's CPU total).
    """
    batch = Batch.objects.select_related("dataset").get(pk=batch_id)
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    config = batch_config(batch)
    candidates_pool(
        batch=batch, config=config, tracker=StageTracker(batch=batch, stage=BatchState.POOLING)
    )
    pooled = time.perf_counter()
    hits_build(
        batch=batch, config=config, tracker=StageTracker(batch=batch, stage=BatchState.BUILDING)
    )
    end = time.perf_counter()
    return end - start, pooled - start, end - pooled, time.process_time() - cpu


def run_baseline(snapshot: dict[type[Model], list[dict[str, Any]]]) -> tuple[float, float]:
    """The fastest write of exactly the snapshotted rows, primary keys included.

    PostgreSQL: COPY of each table from a text buffer built before the clock (the floor the
    database offers). SQLite, which has no COPY: `bulk_create` of objects built before the
    clock. One transaction per stage, as the services write. Returns seconds: (wall, this
    process's CPU).
    """
    if connection.vendor == "postgresql":
        prepared = {model: _copy_buffer(model, rows) for model, rows in snapshot.items()}

        def write(model: type[Model]) -> None:
            columns, text = prepared[model]
            with connection.cursor() as cursor:
                cursor.copy_expert(
                    f"COPY {model._meta.db_table} ({columns}) FROM STDIN", io.StringIO(text)
                )
    else:
        objects = {model: [model(**row) for row in rows] for model, rows in snapshot.items()}

        def write(model: type[Model]) -> None:
            model.objects.bulk_create(objects[model], batch_size=BULK_BATCH)

    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    with transaction.atomic():
        write(Candidate)
        write(Proposal)
    with transaction.atomic():
        write(HIT)
        write(HITItem)
    return time.perf_counter() - start, time.process_time() - cpu


def _copy_buffer(model: type[Model], rows: list[dict[str, Any]]) -> tuple[str, str]:
    """(column list, COPY text) of the rows, formatted as the stages format theirs."""
    columns = [field.attname for field in model._meta.concrete_fields]
    return ", ".join(columns), copy_text(tuple(row[c] for c in columns) for row in rows)


def peak_rss_mib() -> float:
    return maxrss_bytes() / MIB


def timed(label: str, action: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = action()
    print(f"  {label}: {time.perf_counter() - start:.2f} s", flush=True)
    return result


def benchmark(repeats: int, profile_path: str | None) -> dict[str, Any]:
    dataset = timed(
        "dataset (5,000 images, 25,000 captions, 25,000 original pairs)",
        dataset_with_positives_create,
    )
    batch = timed(
        "batch, 2,594 queries, 12,970 rankings of depth 25", lambda: batch_prepare(dataset)
    )
    print(f"  peak RSS after set-up: {peak_rss_mib():.0f} MiB", flush=True)

    ours: list[float] = []
    stages: list[tuple[float, float]] = []
    baseline: list[float] = []
    fingerprint = None
    counts: dict[str, int] = {}
    for run in range(1, repeats + 1):
        rows_delete(batch)
        total, pool_s, build_s, ours_cpu = run_ours(batch.pk)
        counts = rows_count(batch)
        expected = {
            "Candidate": EXPECTED_CANDIDATES,
            "Proposal": EXPECTED_PROPOSALS,
            "HIT": EXPECTED_HITS,
            "HITItem": EXPECTED_ITEMS,
        }
        assert counts == expected, counts
        hits_validate(batch)
        snapshot = rows_snapshot(batch)
        current = content_fingerprint(snapshot)
        assert fingerprint in (None, current), "ours wrote different rows in different runs"
        fingerprint = current
        ours.append(total)
        stages.append((pool_s, build_s))

        rows_delete(batch)
        assert not any(rows_count(batch).values())
        base, base_cpu = run_baseline(snapshot)
        assert rows_count(batch) == counts, (rows_count(batch), counts)
        baseline.append(base)
        del snapshot
        print(
            f"  run {run}: ours {total:.2f} s (pool {pool_s:.2f} + build {build_s:.2f}; "
            f"CPU here {ours_cpu:.2f}), baseline {base:.2f} s (CPU here {base_cpu:.2f})",
            flush=True,
        )

    if profile_path:
        import cProfile

        rows_delete(batch)
        profiler = cProfile.Profile()
        profiler.enable()
        run_ours(batch.pk)
        profiler.disable()
        profiler.dump_stats(profile_path)
        print(f"  profile of one 'ours' run written to {profile_path}", flush=True)

    return {
        "counts": counts,
        "ours": ours,
        "stages": stages,
        "baseline": baseline,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=3, help="alternating runs of each (default 3)"
    )
    parser.add_argument(
        "--profile",
        metavar="PATH",
        help="also cProfile one extra 'ours' run and dump pstats to PATH",
    )
    args = parser.parse_args()

    # Like the test runner: DEBUG off, so the query log does not format every bulk INSERT.
    settings.DEBUG = False
    vendor = connection.vendor
    old_name = connection.settings_dict["NAME"]
    tmpdir = None
    if vendor == "sqlite":
        # On disk with the configured options (WAL), not the test runner's in-memory default.
        tmpdir = tempfile.mkdtemp(prefix="bench-hit-building-")
        connection.settings_dict["TEST"]["NAME"] = str(Path(tmpdir) / "bench.sqlite3")
    else:
        # Its own name, never the test runner's `test_<NAME>`: autoclobber would drop the
        # database of a test run going on at the same time.
        connection.settings_dict["TEST"]["NAME"] = f"test_{old_name}_bench_hit_building"
    print(f"hit_building benchmark on {vendor}", flush=True)
    print("set-up (not timed):", flush=True)
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        print(f"  throwaway database: {test_name}", flush=True)
        result = benchmark(args.repeats, args.profile)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
        if tmpdir:
            for leftover in Path(tmpdir).iterdir():
                leftover.unlink()
            os.rmdir(tmpdir)

    counts = result["counts"]
    ours_s = statistics.median(result["ours"])
    baseline_s = statistics.median(result["baseline"])
    pool_s = statistics.median(s[0] for s in result["stages"])
    build_s = statistics.median(s[1] for s in result["stages"])
    ratio = ours_s / baseline_s
    print("sizes:", flush=True)
    print(
        f"  {EXPECTED_PROPOSALS:,} proposals -> {counts['Candidate']:,} candidates, "
        f"{counts['HIT']:,} HITs, {counts['HITItem']:,} HIT items "
        f"({HIT_SIZE} tasks + 1 golden TP + 1 golden TN each)"
    )
    print(f"medians of {len(result['ours'])} alternating runs:")
    print(
        f"  ours     {ours_s:.3f} s  (candidates_pool {pool_s:.3f} s, hits_build {build_s:.3f} s)"
    )
    floor = "COPY" if vendor == "postgresql" else "bulk_create"
    print(f"  baseline {baseline_s:.3f} s  ({floor} of the same rows)")
    print(f"  ratio    {ratio:.2f}  (target <= {TARGET_RATIO})")
    if vendor == "postgresql":
        print(f"  pool + build {ours_s:.2f} s (target <= {TARGET_SECONDS:g} s at this size)")
    print(f"  peak RSS {peak_rss_mib():.0f} MiB")
    report_line(
        "hit_building",
        round(ratio, 3),
        TARGET_RATIO,
        "lower",
        candidates=counts["Candidate"],
        proposals=counts["Proposal"],
        hits=counts["HIT"],
        ours_s=round(ours_s, 3),
        baseline_s=round(baseline_s, 3),
        baseline=floor,
        seconds_target=TARGET_SECONDS if vendor == "postgresql" else None,
        database=vendor,
    )


if __name__ == "__main__":
    main()
