"""Benchmark the whole pipeline at ECCV Caption's size and at 10×: does cost grow only with work?

Run from the repository root (``make bench-scale`` does; PostgreSQL is what it is meant for)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python benchmarks/bench_scale.py
    ... bench_scale.py --scales 1,3     # a quicker look
    ... bench_scale.py --until building --repeats 3   # the stages up to building, 3 runs each

At scale s (1 = ECCV Caption on COCO 5K): 5,000·s images, 25,000·s captions, 1,261·s image
and 1,333·s caption queries, 5 annotators with exported embeddings (the `embeddings` kind,
64 dimensions), k = 5, HITs of 16 + 1 golden TP + 1 golden TN, one assignment each. The
stages run in this process as a single-process deployment runs them (`stage_run`, the
simulated crowd of `simulate`), each timed from its call to its return:

    retrieving   rank every query against the whole corpus (work: queries × corpus)
    pooling      proposals -> unique candidates (work: proposals)
    building     candidates -> HITs (work: candidates)
    annotating   the simulated crowd answers every HIT, then the stage closes (work: judgements)
    aggregating  verdicts and the release files (work: judgements)

With `--repeats N` every scale runs N times, the scales taking turns, and a stage's time
at a scale is the median of its N runs (its peak, the highest). Each run is a process of
its own on a throwaway database of its own (created and dropped with Django's test
machinery), so its peak memory is its own; a stage's peak is this process's peak RSS
during it (the database server's memory is not counted). A stage's growth is its
time ratio divided by its work ratio between the smallest and the largest scale; the JSON
line's `ratio` is the worst stage's growth (target <= 1.2), with the largest scale's peak
memory (target <= 4 GB). Every stage's output is checked: row counts, every stored ranking
of a sample of queries against a brute-force ranking of the file vectors, one submitted
assignment per HIT, a verdict per candidate and the release.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from common import MIB, peak_rss_bytes, peak_rss_reset, report_line

if TYPE_CHECKING:  # it imports the project's models, which need django_setup() first
    from scale_fixture import ScaleWorld

TARGET_GROWTH = 1.2
TARGET_PEAK_GIB = 4.0  # the "4 GB", read as GiB
STAGES = ("retrieving", "pooling", "building", "annotating", "aggregating")
CHECKED_QUERIES = 40  # per annotator and direction, against brute force
RANKING_DEPTH = 25  # the batch's golden_negative_depth (default): rankings are kept this deep


# --------------------------------------------------------------------------- one scale


def run_scale(
    scale: int, workdir: Path, profile_dir: Path | None, until: str = STAGES[-1]
) -> dict[str, Any]:
    """Build the world at `scale`, run the stages up to `until` timed and checked; return
    the figures."""
    from common import django_setup

    django_setup()
    from django.conf import settings
    from django.db import connection

    settings.DEBUG = False
    settings.RELEASES_DIR = workdir / "releases"
    old_name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        connection.settings_dict["TEST"]["NAME"] = str(workdir / "bench.sqlite3")
    else:  # its own name: never clobber a test run's database
        connection.settings_dict["TEST"]["NAME"] = f"test_{old_name}_bench_scale"
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        return _stages_run(scale, workdir, connection.vendor, profile_dir, until)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)


def _stages_run(
    scale: int, workdir: Path, vendor: str, profile_dir: Path | None, until: str
) -> dict[str, Any]:
    from scale_fixture import CAPTIONS_PER_IMAGE, N_ANNOTATORS, K, world_create

    from annotation.models import BatchState
    from mitl.config import batch_config
    from pipeline.progress import StageTracker
    from pipeline.simulate import crowd_simulate
    from pipeline.stages import stage_run

    start = time.perf_counter()
    world = world_create(scale=scale, workdir=workdir)
    setup_s = time.perf_counter() - start
    print(
        f"[{scale}x] set-up {setup_s:.1f} s: {world.n_images:,} images, "
        f"{world.n_captions:,} captions, {N_ANNOTATORS} vector files",
        flush=True,
    )
    batch_id = world.batch.pk
    from annotation.models import Batch

    Batch.objects.filter(pk=batch_id).update(state=BatchState.RETRIEVING)

    def annotate() -> None:
        batch = Batch.objects.select_related("dataset").get(pk=batch_id)
        crowd_simulate(
            batch=batch,
            config=batch_config(batch),
            tracker=StageTracker(batch=batch, stage=BatchState.ANNOTATING),
            oracle_dir=world.oracle_dir,
        )
        # Work that failed its golden check is not approved: close the stage as an admin does.
        stage_run(batch_id=batch_id, stage=BatchState.ANNOTATING, force=True)

    steps: dict[str, Callable[[], Any]] = {
        "retrieving": lambda: stage_run(batch_id=batch_id, stage=BatchState.RETRIEVING),
        "pooling": lambda: stage_run(batch_id=batch_id, stage=BatchState.POOLING),
        "building": lambda: stage_run(batch_id=batch_id, stage=BatchState.BUILDING),
        "annotating": annotate,
        "aggregating": lambda: stage_run(batch_id=batch_id, stage=BatchState.AGGREGATING),
    }
    checks = {
        "retrieving": lambda: _check_rankings(world),
        "pooling": lambda: _check_pool(world, K),
        "building": lambda: _check_hits(world),
        "annotating": lambda: _check_judgements(world),
        "aggregating": lambda: _check_release(world),
    }
    figures: dict[str, Any] = {"scale": scale, "setup_s": setup_s, "stages": {}}
    for stage in STAGES[: STAGES.index(until) + 1]:
        profiler = cProfile.Profile() if profile_dir else None
        if not peak_rss_reset():
            raise SystemExit("cannot reset the peak-memory mark (/proc/self/clear_refs)")
        began = time.perf_counter()
        if profiler:
            profiler.runcall(steps[stage])
        else:
            steps[stage]()
        elapsed = time.perf_counter() - began
        peak = peak_rss_bytes()
        if profiler:
            profiler.dump_stats(profile_dir / f"{scale}x-{stage}.pstats")
        work = checks[stage]()
        figures["stages"][stage] = {"seconds": elapsed, "peak_bytes": peak, **work}
        print(
            f"[{scale}x] {stage:<11} {elapsed:8.2f} s  peak {peak / MIB:6.0f} MiB  "
            + "  ".join(f"{key} {value:,}" for key, value in work.items()),
            flush=True,
        )
    if until == STAGES[-1]:
        state = Batch.objects.values_list("state", flat=True).get(pk=batch_id)
        assert state == BatchState.RELEASED, state
    figures["database"] = vendor
    figures["corpus"] = [world.n_images, world.n_images * CAPTIONS_PER_IMAGE]
    return figures


# --------------------------------------------------------------------------- checks


def _check_rankings(world: ScaleWorld) -> dict[str, int]:
    """Every (annotator, query) ranked; a sample of them equal to brute force."""
    from scale_fixture import N_ANNOTATORS

    from annotation.models import Caption, Direction, Image, MachineAnnotator, Ranking

    batch = world.batch
    n_queries = world.n_image_queries + world.n_caption_queries
    rankings = Ranking.objects.filter(query__batch=batch)
    assert rankings.count() == n_queries * N_ANNOTATORS, rankings.count()
    image_ext = dict(Image.objects.filter(dataset=world.dataset).values_list("pk", "ext_id"))
    caption_ext = dict(Caption.objects.filter(dataset=world.dataset).values_list("pk", "ext_id"))
    for path in world.vector_files:
        annotator = MachineAnnotator.objects.get(config__vectors=str(path))
        with np.load(path) as archive:  # ids are 0..n-1 in ext id order
            images = _unit(archive["image_vectors"])
            captions = _unit(archive["caption_vectors"])
        for direction, query_vectors, target_vectors, target_ext in (
            (Direction.I2T, images, captions, caption_ext),
            (Direction.T2I, captions, images, image_ext),
        ):
            sample = (
                rankings.filter(annotator=annotator, query__direction=direction)
                .order_by("query_id")
                .values_list("query__image__ext_id", "query__caption__ext_id", "targets", "scores")
            )[:CHECKED_QUERIES]
            for image, caption, targets, scores in sample:
                query = query_vectors[image if direction == Direction.I2T else caption]
                truth = target_vectors @ query
                depth = len(targets)
                assert depth == RANKING_DEPTH, depth
                best = np.sort(truth)[::-1][:depth]
                stored = truth[[target_ext[t] for t in targets]]
                # Ties within float32 rounding may swap places; the scores may not differ.
                np.testing.assert_allclose(stored, best, atol=2e-5)
                np.testing.assert_allclose(scores, best, atol=2e-5)
    return {"queries": n_queries, "work": _retrieval_work(world)}


def _retrieval_work(world: ScaleWorld) -> int:
    from scale_fixture import N_ANNOTATORS

    pairs = world.n_image_queries * world.n_captions + world.n_caption_queries * world.n_images
    return pairs * N_ANNOTATORS


def _check_pool(world: ScaleWorld, k: int) -> dict[str, int]:
    from scale_fixture import N_ANNOTATORS

    from annotation.models import Candidate, Proposal

    proposals = Proposal.objects.filter(candidate__batch=world.batch).count()
    n_queries = world.n_image_queries + world.n_caption_queries
    assert proposals == n_queries * N_ANNOTATORS * k, proposals
    candidates = Candidate.objects.filter(batch=world.batch).count()
    assert 0 < candidates <= proposals
    return {"proposals": proposals, "candidates": candidates, "work": proposals}


def _check_hits(world: ScaleWorld) -> dict[str, int]:
    from annotation.models import HIT, Candidate, HITItem

    candidates = Candidate.objects.filter(batch=world.batch).count()
    hits = HIT.objects.filter(batch=world.batch).count()
    items = HITItem.objects.filter(hit__batch=world.batch)
    assert hits == math.ceil(candidates / 16), (hits, candidates)
    assert items.count() == candidates + 2 * hits, items.count()
    tasks = items.filter(role="task")
    assert tasks.count() == tasks.values("candidate_id").distinct().count() == candidates
    return {"hits": hits, "items": items.count(), "work": candidates}


def _check_judgements(world: ScaleWorld) -> dict[str, int]:
    from django.db.models import Count

    from annotation.models import HIT, Judgement

    per_hit = HIT.objects.filter(batch=world.batch).annotate(n=Count("assignments"))
    assert not per_hit.exclude(n=1).exists(), "a HIT without exactly one assignment"
    judgements = Judgement.objects.filter(assignment__hit__batch=world.batch).count()
    items = HIT.objects.filter(batch=world.batch).aggregate(n=Count("items"))["n"]
    assert judgements == items, (judgements, items)
    return {"judgements": judgements, "work": judgements}


def _check_release(world: ScaleWorld) -> dict[str, int]:
    from annotation.models import AssignmentStatus, Candidate, Judgement, Release, Verdict

    # Work flagged at the golden check is not approved: its candidates get no verdict.
    judged = (
        Candidate.objects.filter(
            batch=world.batch, hit_items__hit__assignments__status=AssignmentStatus.APPROVED
        )
        .distinct()
        .count()
    )
    verdicts = Verdict.objects.filter(candidate__batch=world.batch)
    assert verdicts.count() == judged > 0, (verdicts.count(), judged)
    release = Release.objects.get(batches=world.batch)
    stats = release.manifest["counts"]
    for direction in ("i2t", "t2i"):
        counts = stats[direction]
        assert counts["positives_extended"] >= counts["positives_original"] > 0, counts
    judgements = Judgement.objects.filter(assignment__hit__batch=world.batch).count()
    positives = verdicts.filter(is_positive=True).count()
    return {"positive_verdicts": positives, "work": judgements}


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = vectors.astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


# --------------------------------------------------------------------------- report


def stage_medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One scale's runs as one: each stage's median seconds and highest peak (same work)."""
    stages = {}
    for stage in runs[0]["stages"]:
        figures = [run["stages"][stage] for run in runs]
        works = {f["work"] for f in figures}
        assert len(works) == 1, f"{stage}: the work differs between runs of one scale {works}"
        stages[stage] = {
            **figures[0],
            "seconds": statistics.median(f["seconds"] for f in figures),
            "all_seconds": [f["seconds"] for f in figures],
            "peak_bytes": max(f["peak_bytes"] for f in figures),
        }
    return {**runs[0], "stages": stages}


def growth_table(small: dict[str, Any], large: dict[str, Any]) -> dict[str, float]:
    """Each stage's time ratio divided by its work ratio, large scale over small."""
    growth = {}
    for stage in small["stages"]:
        a, b = small["stages"][stage], large["stages"][stage]
        growth[stage] = (b["seconds"] / a["seconds"]) / (b["work"] / a["work"])
    return growth


def scales_run(
    scales: list[int], repeats: int, until: str, profile: Path | None
) -> dict[int, list[dict[str, Any]]]:
    """Run every scale `repeats` times, each in its own process, the scales alternating
    (1, 10, 1, 10, ...) so that a change in the machine's load falls on both alike."""
    results: dict[int, list[dict[str, Any]]] = {scale: [] for scale in scales}
    with tempfile.TemporaryDirectory(prefix="bench-scale-results-") as out:
        for repeat in range(1, repeats + 1):
            for scale in scales:
                result = Path(out) / f"{scale}-{repeat}.json"
                command = [sys.executable, __file__, "--one-scale", str(scale)]
                command += ["--result", result, "--until", until]
                if profile:
                    where = profile / f"run{repeat}" if repeats > 1 else profile
                    where.mkdir(parents=True, exist_ok=True)
                    command += ["--profile", where.resolve()]
                if repeats > 1:
                    print(f"[{scale}x] run {repeat} of {repeats}", flush=True)
                subprocess.run([str(part) for part in command], check=True)
                results[scale].append(json.loads(result.read_text()))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scales", default="1,10", help="comma-separated scales, smallest first (default 1,10)"
    )
    parser.add_argument(
        "--until",
        choices=STAGES,
        default=STAGES[-1],
        help="stop after this stage (default: all of them)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run each scale N times; growth is taken from each stage's median time (default 1)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="cProfile every stage into DIR/<scale>x-<stage>.pstats (DIR/run<N>/... with "
        "--repeats; slows the stages down)",
    )
    parser.add_argument("--one-scale", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.one_scale:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as workdir:
            figures = run_scale(args.one_scale, Path(workdir), args.profile, args.until)
        args.result.write_text(json.dumps(figures))
        return

    scales = sorted({int(s) for s in args.scales.split(",")})
    if len(scales) < 2 or scales[0] < 1:
        parser.error("give at least two positive scales, e.g. --scales 1,10")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    runs = scales_run(scales, args.repeats, args.until, args.profile)
    results = [stage_medians(runs[scale]) for scale in scales]
    report(results, args.repeats)


def report(results: list[dict[str, Any]], repeats: int) -> None:
    """Print each stage's growth, smallest to largest scale, and the JSON line."""
    small, large = results[0], results[-1]
    growth = growth_table(small, large)
    what = "median time ratio" if repeats > 1 else "time ratio"
    print(f"growth from {small['scale']}x to {large['scale']}x ({what} / work ratio):")
    for stage in growth:
        a, b = small["stages"][stage], large["stages"][stage]
        spread = ""
        if repeats > 1:
            runs = " / ".join(f"{'/'.join(f'{t:.1f}' for t in s['all_seconds'])}" for s in (a, b))
            spread = f"  runs {runs}"
        print(
            f"  {stage:<11} {a['seconds']:8.2f} s -> {b['seconds']:8.2f} s  "
            f"work x{b['work'] / a['work']:6.1f}  growth {growth[stage]:.2f}  "
            f"peak {b['peak_bytes'] / MIB:,.0f} MiB{spread}"
        )
    worst = max(growth, key=growth.get)
    peak_gib = max(s["peak_bytes"] for s in large["stages"].values()) / (1 << 30)
    total = {r["scale"]: round(sum(s["seconds"] for s in r["stages"].values()), 1) for r in results}
    print(f"  worst: {worst} {growth[worst]:.2f} (target <= {TARGET_GROWTH})")
    print(f"  peak memory at {large['scale']}x: {peak_gib:.2f} GiB (target <= {TARGET_PEAK_GIB})")
    report_line(
        "scale",
        round(growth[worst], 3),
        TARGET_GROWTH,
        "lower",
        worst_stage=worst,
        growth={stage: round(value, 3) for stage, value in growth.items()},
        seconds={
            str(r["scale"]): {s: round(v["seconds"], 2) for s, v in r["stages"].items()}
            for r in results
        },
        repeats=repeats,
        total_s=total,
        peak_gib=round(peak_gib, 2),
        peak_target_gib=TARGET_PEAK_GIB,
        database=large["database"],
    )


if __name__ == "__main__":
    main()
