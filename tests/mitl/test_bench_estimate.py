"""`benchmarks/bench_estimate.py` runs, on two seeds and a small budget, and says what it found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipeline.demo import ADAPTIVE_SETTINGS, DEMO_BUDGET

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_estimate  # noqa: E402  (a script beside its fixture, not a package)


def test_the_benchmark_simulates_the_demos_batch() -> None:
    assert bench_estimate.DEMO_BUDGET == DEMO_BUDGET
    assert bench_estimate.DEMO_SETTINGS == ADAPTIVE_SETTINGS
    plans = bench_estimate.round_plans(bench_estimate.demo_config(0.1))
    assert len(plans) == 5 and plans[0].task_pairs == 848  # a fifth of the budget a round


def test_two_seeds_run_and_end_with_both_estimators_figures() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_estimate.py", "--seeds", "2", "--budget", "2000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "estimate" and report["cases"] == 8
    names = {"rank_strata", "rank_strata_new_interval", "model_assisted"}
    names |= {"model_assisted_fay_feuer"}
    assert set(report["interval_coverage"]) == set(report["mean_half_width"]) == names
    assert all(0 <= value <= 1 for value in report["interval_coverage"].values())
    assert all(0 < value < 0.5 for value in report["mean_half_width"].values())
    assert report["ratio"] == report["mean_half_width"]["model_assisted"]
    assert "i2t batch 2" in done.stdout and "t2i batch 1" in done.stdout
