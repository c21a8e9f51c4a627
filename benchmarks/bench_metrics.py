"""Benchmark: the evaluation metrics against the `eccv-caption` reference, same rankings.

1,261 image queries and 1,332 caption queries (the ECCV Caption positives shipped with the
`eccv-caption` package), each with a seeded top-100 ranking over the COCO 5K test ids.
Ours: `mitl.metrics.retrieval_metrics` in both directions on positives prepared once
(Recall@1/5/10, R-Precision, mAP@R, PMRP, nDCG@10). Reference: `Metrics.eccv_metrics`
(R@1, R-Precision, mAP@R) plus `Metrics.eccv_recalls` for K = 5 and 10, both directions,
on positives it loaded once. The values must agree to 1e-9 before anything is timed.

Timing as `timeit` does it: samples of calls in a row lasting at least `--sample-s` (the
loop count found as `timeit`'s autorange finds it, per side), with the garbage collector
off, the two sides alternating sample by sample; the medians of the per-call means give
ratio = reference / ours (higher is better, target >= 20). The first call of each sample,
right after the other side ran, is reported too (`ratio_first_call`): colder caches.

Run from the repository root: .venv/bin/python benchmarks/bench_metrics.py [--repeats N]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from common import alternate, report_line

from mitl.metric_truth import prepare
from mitl.metrics import retrieval_metrics

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "failed to import ujson"
    import eccv_caption
    from eccv_caption import Metrics

TARGET = 20.0
DEPTH = 100
SEED = 0


def build_rankings(reference: Metrics, rng: np.random.Generator) -> dict[str, dict[int, list]]:
    """Rank DEPTH targets per ECCV query: a third random, a third with every positive on top,
    a third with some positives scattered over the top 40."""
    captions = np.load(Path(eccv_caption.__file__).parent / "data" / "coco_test_ids.npy")
    images = np.unique([v[0] for v in reference.coco_gts["t2i"].values()])
    pools = {"i2t": captions.astype(np.int64), "t2i": images.astype(np.int64)}
    rankings: dict[str, dict[int, list]] = {}
    for direction, pool in pools.items():
        rankings[direction] = {}
        for i, (query, positives) in enumerate(reference.eccv_gts[direction].items()):
            wanted = set(positives)
            drawn = pool[rng.permutation(len(pool))[: DEPTH + len(positives)]].tolist()
            others = [t for t in drawn if t not in wanted][:DEPTH]
            if i % 3 == 1:
                ranking = (rng.permutation(positives).tolist() + others)[:DEPTH]
            elif i % 3 == 2:
                for target in rng.permutation(positives)[: len(positives) // 2 + 1].tolist():
                    others.insert(int(rng.integers(0, 40)), target)
                ranking = others[:DEPTH]
            else:
                ranking = others
            rankings[direction][query] = ranking
    return rankings


def reference_run(reference: Metrics, rankings) -> dict:
    with contextlib.redirect_stderr(io.StringIO()):  # its tqdm bars
        values = reference.eccv_metrics(rankings, "all")
        for k in (5, 10):
            values[f"r{k}"] = reference.eccv_recalls(rankings, "all", K=k)
    return values


def ours_run(truths, rankings) -> dict:
    return {d: retrieval_metrics(truths[d], rankings[d]) for d in ("i2t", "t2i")}


def calls_per_sample(call, minimum_s: float) -> int:
    """Return how many calls in a row last at least `minimum_s` (1, 2, 5, 10, 20, ...),
    the way `timeit`'s autorange picks its loop count."""
    for number in (n * 10**e for e in range(6) for n in (1, 2, 5)):
        if timed(call, number)[1] * number >= minimum_s:
            return number
    return number


def timed(call, number: int) -> tuple[float, float]:
    """Return (seconds of the first call, mean seconds per call) over `number` calls in a row.

    The garbage collector is off, as in `timeit`, so neither side pays for a collection
    that the other's garbage set off. The first call follows the other side's run, so it
    finds colder caches; the mean is the `timeit`-style figure.
    """
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        call()
        first = time.perf_counter() - started
        for _ in range(number - 1):
            call()
        return first, (time.perf_counter() - started) / number
    finally:
        gc.enable()


def check(ours: dict, ref: dict) -> None:
    pairs = {"recall@1": "eccv_r1", "r_precision": "eccv_rprecision", "map_at_r": "eccv_map_at_r"}
    pairs |= {"recall@5": "r5", "recall@10": "r10"}
    for direction in ("i2t", "t2i"):
        for ours_key, ref_key in pairs.items():
            difference = abs(ours[direction][ours_key] - ref[ref_key][direction])
            if difference > 1e-9:
                raise SystemExit(f"{direction} {ours_key}: ours differs by {difference:.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="alternating samples (15)")
    parser.add_argument(
        "--sample-s", type=float, default=0.2, help="least seconds per sample (0.2)"
    )
    args = parser.parse_args()

    reference = Metrics()
    rankings = build_rankings(reference, np.random.default_rng(SEED))
    n_i2t, n_t2i = len(rankings["i2t"]), len(rankings["t2i"])
    print(f"metrics benchmark: {n_i2t:,} image and {n_t2i:,} caption queries, top-{DEPTH}")

    started = time.perf_counter()
    truths = {d: prepare(reference.eccv_gts[d]) for d in ("i2t", "t2i")}
    prepare_s = time.perf_counter() - started
    check(ours_run(truths, rankings), reference_run(reference, rankings))
    print("  values: ours equal the reference to 1e-9 (R@1/5/10, R-Precision, mAP@R)")

    calls = {
        "reference": lambda: reference_run(reference, rankings),
        "ours": lambda: ours_run(truths, rankings),
    }
    number = {side: calls_per_sample(call, args.sample_s) for side, call in calls.items()}
    samples = alternate(
        args.repeats,
        {side: lambda c=call, n=number[side]: timed(c, n) for side, call in calls.items()},
    )
    mean = {side: statistics.median(s[1] for s in runs) for side, runs in samples.items()}
    first = {side: statistics.median(s[0] for s in runs) for side, runs in samples.items()}
    ratio = mean["reference"] / mean["ours"]
    ratio_first = first["reference"] / first["ours"]
    print(
        f"  medians of {args.repeats} alternating samples of calls in a row "
        f"(reference {number['reference']}, ours {number['ours']} per sample):"
    )
    for side, what in (
        ("reference", "eccv_metrics + eccv_recalls K=5, 10"),
        ("ours", "retrieval_metrics, 7 metrics"),
    ):
        print(
            f"  {side:<9} ({what}): {mean[side] * 1e3:.2f} ms per call, "
            f"first call of a sample {first[side] * 1e3:.2f} ms"
        )
    print(f"  ratio {ratio:.1f} (target >= {TARGET:g}); first calls only: {ratio_first:.1f}")
    print(f"  prepare positives (once per release, outside the ratio): {prepare_s * 1e3:.1f} ms")
    report_line(
        "metrics",
        round(ratio, 2),
        TARGET,
        "higher",
        ratio_first_call=round(ratio_first, 2),
        ours_s=round(mean["ours"], 5),
        reference_s=round(mean["reference"], 5),
        ours_first_call_s=round(first["ours"], 5),
        reference_first_call_s=round(first["reference"], 5),
        prepare_s=round(prepare_s, 5),
        image_queries=n_i2t,
        caption_queries=n_t2i,
        depth=DEPTH,
        repeats=args.repeats,
        calls_per_sample=number,
    )


if __name__ == "__main__":
    main()
