"""Benchmark: one evaluation from files, ours against the `eccv-caption` reference.

1,261 image queries and 1,332 caption queries (the ECCV Caption positives shipped with the
`eccv-caption` package), each with a seeded top-100 ranking over the COCO 5K test ids,
written once to a rankings file; the positives are written as a release directory.

The headline ratio is one evaluation as a user waits for it, from the files to the numbers,
each side with its own loading and preparation:

- ours: what `manage.py evaluate --release DIR --rankings FILE` does (without starting the
  process): `release_load`, `rankings_read` (parse and check), `evaluate` (prepare the
  positives, then Recall@1/5/10, R-Precision, mAP@R, PMRP and nDCG@10 in both directions);
- reference: what its README shows: `Metrics()` (which loads its COCO, CxC and ECCV
  positives), the rankings file read with `json` (integer query ids), `eccv_metrics` (R@1,
  R-Precision, mAP@R) and `eccv_recalls` for K = 5 and 10, both directions.

Also printed: the amortised figure for a leaderboard that scores many models on one release
(release or `Metrics` loaded once; per model, the rankings file read and scored), and the
metrics alone on inputs both sides prepared beforehand. The values must agree to 1e-9 before
anything is timed.

Timing as `timeit` does it: samples of calls in a row lasting at least `--sample-s` (the
loop count found as `timeit`'s autorange finds it, per side), with the garbage collector
off, all sides alternating sample by sample; medians of the per-call means give each
ratio = reference / ours (higher is better, target >= 20 for the headline).

Run from the repository root: .venv/bin/python benchmarks/bench_metrics.py [--repeats N]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from common import alternate, report_line

from mitl.evaluation import evaluate
from mitl.evaluation_inputs import ReleaseTruth, rankings_read, release_load
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


DATA = Path(eccv_caption.__file__).parent / "data"


def reference_run(reference: Metrics, rankings) -> dict:
    with contextlib.redirect_stderr(io.StringIO()):  # its tqdm bars
        values = reference.eccv_metrics(rankings, "all")
        for k in (5, 10):
            values[f"r{k}"] = reference.eccv_recalls(rankings, "all", K=k)
    return values


def reference_read_rankings(path: Path) -> dict[str, dict[int, list]]:
    """The rankings file as the reference takes it: integer query ids."""
    with path.open("rb") as handle:
        data = json.load(handle)
    return {
        direction: {int(q): r for q, r in queries.items()} for direction, queries in data.items()
    }


def reference_from_files(rankings_path: Path) -> dict:
    return reference_run(Metrics(), reference_read_rankings(rankings_path))


def ours_run(truths, rankings) -> dict:
    return {d: retrieval_metrics(truths[d], rankings[d]) for d in ("i2t", "t2i")}


def ours_from_files(release_dir: Path, rankings_path: Path) -> dict:
    return evaluate(release_load(release_dir), rankings_read(rankings_path))


def ours_per_model(release: ReleaseTruth, rankings_path: Path) -> dict:
    return evaluate(release, rankings_read(rankings_path))


def files_write(folder: Path, rankings: dict[str, dict[int, list]]) -> tuple[Path, Path]:
    """A release directory with the ECCV positives, and the rankings file."""
    release_dir = folder / "release"
    release_dir.mkdir()
    shutil.copy(DATA / "eccv_image_to_caption.json", release_dir / "image_to_caption.json")
    shutil.copy(DATA / "eccv_caption_to_image.json", release_dir / "caption_to_image.json")
    rankings_path = folder / "rankings.json"
    rankings_path.write_text(
        json.dumps({d: {str(q): r for q, r in queries.items()} for d, queries in rankings.items()})
    )
    return release_dir, rankings_path


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
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, folder: Path) -> None:
    reference = Metrics()
    rankings = build_rankings(reference, np.random.default_rng(SEED))
    n_i2t, n_t2i = len(rankings["i2t"]), len(rankings["t2i"])
    release_dir, rankings_path = files_write(folder, rankings)
    size_mb = rankings_path.stat().st_size / 1e6
    print(
        f"metrics benchmark: {n_i2t:,} image and {n_t2i:,} caption queries, top-{DEPTH} "
        f"(rankings file {size_mb:.1f} MB)"
    )

    truths = {d: prepare(reference.eccv_gts[d]) for d in ("i2t", "t2i")}
    release = release_load(release_dir)
    expected = reference_from_files(rankings_path)
    for values in (
        ours_from_files(release_dir, rankings_path),
        ours_per_model(release, rankings_path),
        ours_run(truths, rankings),
    ):
        check(values, expected)
    check(ours_run(truths, rankings), reference_run(reference, rankings))
    print("  values: ours equal the reference to 1e-9 (R@1/5/10, R-Precision, mAP@R)")

    calls = {
        "reference": lambda: reference_from_files(rankings_path),
        "ours": lambda: ours_from_files(release_dir, rankings_path),
        "reference_per_model": lambda: reference_run(
            reference, reference_read_rankings(rankings_path)
        ),
        "ours_per_model": lambda: ours_per_model(release, rankings_path),
        "reference_metrics": lambda: reference_run(reference, rankings),
        "ours_metrics": lambda: ours_run(truths, rankings),
        # Where ours spends its time (not compared): each step alone.
        "ours_release_load": lambda: release_load(release_dir),
        "ours_rankings_read": lambda: rankings_read(rankings_path),
        "ours_evaluate": lambda: evaluate(release, rankings),
    }
    number = {side: calls_per_sample(call, args.sample_s) for side, call in calls.items()}
    samples = alternate(
        args.repeats,
        {side: lambda c=call, n=number[side]: timed(c, n) for side, call in calls.items()},
    )
    mean = {side: statistics.median(s[1] for s in runs) for side, runs in samples.items()}
    ratios = {
        what: mean[f"reference{suffix}"] / mean[f"ours{suffix}"]
        for what, suffix in (("files", ""), ("per_model", "_per_model"), ("metrics", "_metrics"))
    }
    print(f"  medians of {args.repeats} alternating samples, ms per call:")
    for label, key, suffix in (
        ("one evaluation from files", "files", ""),
        ("per model, release loaded once", "per_model", "_per_model"),
        ("metrics alone, inputs prepared", "metrics", "_metrics"),
    ):
        print(
            f"    {label:<32} reference {mean['reference' + suffix] * 1e3:7.2f}, "
            f"ours {mean['ours' + suffix] * 1e3:6.2f}: ratio {ratios[key]:.1f}"
        )
    print(
        f"  ours from files = release_load {mean['ours_release_load'] * 1e3:.2f} + "
        f"rankings_read {mean['ours_rankings_read'] * 1e3:.2f} + "
        f"evaluate {mean['ours_evaluate'] * 1e3:.2f} ms"
    )
    print(f"  ratio {ratios['files']:.1f} (target >= {TARGET:g})")
    report_line(
        "metrics",
        round(ratios["files"], 2),
        TARGET,
        "higher",
        ratio_per_model=round(ratios["per_model"], 2),
        ratio_metrics_only=round(ratios["metrics"], 2),
        **{f"{side}_s": round(seconds, 5) for side, seconds in mean.items()},
        image_queries=n_i2t,
        caption_queries=n_t2i,
        depth=DEPTH,
        repeats=args.repeats,
    )


if __name__ == "__main__":
    main()
