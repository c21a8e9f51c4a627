"""Pooling and building do work in proportion to their candidates, not more.

`benchmarks/bench_scale.py` times the stages at 1× and 10× the ECCV Caption size, which
takes half an hour; a step whose cost grows with HITs × queries (as the golden-negative
draw's once did: it listed and shuffled every query of the batch for every page) shows
there only as a stage that grows faster than its work. This test catches such a step on
a mid-size batch, without timing anything: it runs both stages on the same synthetic
batch at size n and 4n (corpus, queries and so candidates all ×4) and counts

- lines of the project's own Python executed (a loop over the batch per HIT shows here),
- the database's work: SQLite's virtual-machine instructions, or PostgreSQL's tuples read
  (a query that scans a table per HIT shows here),
- SQL statements other than bulk writes (a query per HIT shows here: they must not grow).

Each count may grow at most 1.15 times as fast as the candidates (they all grow 4.0 to 4.1
times here; the draw that shuffled every query per page made the lines grow 5.6 times).
HITs hold 8 tasks, not 16, so that per-HIT steps weigh more.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from django.db import connection

from annotation.models import (
    Batch,
    BatchState,
    Candidate,
    Caption,
    Dataset,
    Direction,
    Image,
    MachineAnnotator,
    Query,
    Ranking,
)
from mitl.config import batch_config
from pipeline.build import hits_build
from pipeline.pool import candidates_pool
from pipeline.progress import StageTracker
from pipeline.stages import batch_create

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
PROJECT_DIRS = tuple(str(ROOT / name) + "/" for name in ("annotation", "mitl", "pipeline"))
ALLOWED_GROWTH = 1.15  # × the candidates' growth (a per-HIT loop over the batch: 1.4)
ANNOTATORS = 3
K = 5
DEPTH = 10  # golden_negative_depth: rankings are stored this deep


@dataclass
class Counts:
    project_lines: int = 0
    database_work: int = 0
    statements: int = 0  # other than bulk writes

    def ratios(self, other: Counts) -> dict[str, float]:
        """`other`'s counts over these, each."""
        return {name: getattr(other, name) / max(1, value) for name, value in vars(self).items()}


def batch_of_size(size: int) -> Batch:
    """A batch in `pooling`: 100·size images with 5 captions each, 25·size image and
    25·size caption queries, each ranked DEPTH deep by 3 annotators (seeded, random)."""
    rng = random.Random(size)
    dataset = Dataset.objects.create(name=f"growth {size}")
    images = Image.objects.bulk_create(
        [Image(dataset=dataset, ext_id=i, file_name=f"{i}.jpg") for i in range(100 * size)]
    )
    captions = Caption.objects.bulk_create(
        [
            Caption(dataset=dataset, ext_id=5 * i + j, image=image, text=f"caption {j} of {i}")
            for i, image in enumerate(images)
            for j in range(5)
        ]
    )
    names = [f"growth-{size}-{a}" for a in range(ANNOTATORS)]
    MachineAnnotator.objects.bulk_create([MachineAnnotator(name=n, kind="bow") for n in names])
    batch = batch_create(
        dataset=dataset,
        name=f"growth {size}",
        raw_config={
            "annotators": names,
            "n_image_queries": 25 * size,
            "n_caption_queries": 25 * size,
            "k": K,
            "golden_negative_depth": DEPTH,
            "hit_size": 8,
            "seed": 0,
        },
    )
    Batch.objects.filter(pk=batch.pk).update(state=BatchState.POOLING)
    queries = Query.objects.bulk_create(
        [
            Query(batch=batch, direction=Direction.I2T, image=i)
            for i in rng.sample(images, 25 * size)
        ]
        + [
            Query(batch=batch, direction=Direction.T2I, caption=c)
            for c in rng.sample(captions, 25 * size)
        ]
    )
    annotators = MachineAnnotator.objects.filter(name__in=names)
    targets = {
        Direction.I2T: [c.pk for c in captions],
        Direction.T2I: [i.pk for i in images],
    }
    Ranking.objects.bulk_create(
        Ranking(
            query=query,
            annotator=annotator,
            targets=rng.sample(targets[query.direction], DEPTH),
            scores=[1.0 - r / DEPTH for r in range(DEPTH)],
        )
        for query in queries
        for annotator in annotators
    )
    return Batch.objects.select_related("dataset").get(pk=batch.pk)


@contextmanager
def counted() -> Iterator[Counts]:
    """Count, while the block runs, the lines of project code run, the database's work and
    the SQL statements that are not bulk writes."""
    counts = Counts()

    def local(frame: FrameType, event: str, arg: Any) -> Callable | None:
        if event == "line":
            counts.project_lines += 1
        return local

    def on_call(frame: FrameType, event: str, arg: Any) -> Callable | None:
        return local if frame.f_code.co_filename.startswith(PROJECT_DIRS) else None

    def statement(execute, sql, params, many, context):
        if not sql.lstrip().upper().startswith(("INSERT", "COPY")):
            counts.statements += 1
        return execute(sql, params, many, context)

    connection.ensure_connection()
    read_before = _tuples_read()
    if connection.vendor == "sqlite":
        connection.connection.set_progress_handler(_sqlite_counter(counts), 100)
    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        with connection.execute_wrapper(statement):
            yield counts
    finally:
        sys.settrace(previous)
        if connection.vendor == "sqlite":
            connection.connection.set_progress_handler(None, 0)
    if connection.vendor != "sqlite":
        counts.database_work = _tuples_read() - read_before


def _sqlite_counter(counts: Counts) -> Callable[[], int]:
    def tick() -> int:
        counts.database_work += 1  # one per 100 virtual-machine instructions
        return 0  # go on

    return tick


def _tuples_read() -> int:
    """PostgreSQL: rows this transaction has read so far, by scans and index fetches."""
    if connection.vendor == "sqlite":
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0) "
            "FROM pg_stat_xact_user_tables"
        )
        return int(cursor.fetchone()[0])


def stages_count(size: int) -> tuple[int, dict[str, Counts]]:
    """Pool and build the batch of `size`; return its candidates and each stage's counts."""
    batch = batch_of_size(size)
    config = batch_config(batch)
    counts = {}
    for stage, run in (("pooling", candidates_pool), ("building", hits_build)):
        with counted() as counts[stage]:
            run(batch=batch, config=config, tracker=StageTracker(batch=batch, stage=stage))
    candidates = Candidate.objects.filter(batch=batch).count()
    # Gone before the next size: a scan must read only the batch being measured.
    annotators = list(batch.annotators.all())
    batch.delete()
    Dataset.objects.filter(pk=batch.dataset_id).delete()
    MachineAnnotator.objects.filter(pk__in=[a.pk for a in annotators]).delete()
    return candidates, counts


def test_pooling_and_building_grow_no_faster_than_their_candidates():
    small_candidates, small = stages_count(1)
    large_candidates, large = stages_count(4)
    work = large_candidates / small_candidates
    assert 3.5 < work < 4.5, (small_candidates, large_candidates)
    for stage in ("pooling", "building"):
        ratios = small[stage].ratios(large[stage])
        assert small[stage].project_lines > 1000 and small[stage].database_work > 100, small
        for measure in ("project_lines", "database_work"):
            assert ratios[measure] <= ALLOWED_GROWTH * work, (stage, measure, ratios, work)
        assert large[stage].statements <= small[stage].statements + 2, (stage, small, large)
