"""Adaptive against fixed curation at equal judgements, on synthetic data with full truth.

Both strategies run the demo's set-up (300 synthetic images, 100 image and 100 caption
queries, four machine annotators, the same simulated crowd and seed), each in its own
SQLite database beside a shared folder (the synthetic files and the tiny CLIP are made
once). `fixed` judges every annotator's top 5 once with three workers per HIT; its
judgements, golden pairs and re-posted work included, become the budget of `adaptive`
(the demo's: learned adjudication, the learner annotator, two workers per HIT and a
second HIT only for pairs they split on). A third run, "selection only", gives adaptive
fixed's three workers per HIT, to show what the choice of pairs alone buys. The script
checks that no run spent more than fixed, then prints for each the true positives the
crowd found, the release's true and estimated recall, and the verdicts' precision, and
ends with the JSON line

    {"benchmark": "curation", "ratio": adaptive true positives / fixed true positives,
     "target": 2.0, "better": "higher", "recall_estimate_error": ..., "precision": ...}

Usage: python benchmarks/bench_curation.py [--seed 0] [--keep DIR] [--settings JSON]
       [--no-ablation] [--learned-features GROUPS]   (about 3 minutes on 2 cores)
       python benchmarks/bench_curation.py --feature-sets "rank,yield;rank,score,yield"
         (fixed once, then one adaptive run per feature set: a line each, and one JSON line;
         a set may end in '|{"rounds": 10}', adaptive settings for that run alone)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import REPO_ROOT, django_setup, report_line

TARGET = 2.0  # issue 32 (at precision 0.97 or better)
DIRECTIONS = ("i2t", "t2i")


def strategy_run(
    strategy: str, *, budget: int, seed: int, settings: dict[str, Any], features: str = ""
) -> dict[str, Any]:
    """Run the demo pipeline with one strategy in this process; measure it against the truth."""
    django_setup()
    if features:  # the learned policy's feature groups, for comparing them
        from mitl.curation import learned

        learned.FEATURE_GROUPS = tuple(features.split(","))
    from django.core.management import call_command

    from annotation.models import Batch, Candidate, Judgement
    from annotation.synthetic import synthetic_regenerate
    from mitl.config import batch_config
    from mitl.synthetic.truth import truth_matrix
    from pipeline.demo import demo_run

    call_command("migrate", verbosity=0)
    summary = demo_run(seed=seed, strategy=strategy, budget=budget, batch_settings=settings)
    batch = Batch.objects.select_related("dataset").get(pk=summary.batch_id)
    generated = synthetic_regenerate(dataset=batch.dataset)
    truth = truth_matrix(generated)
    image_index = {scene.image_id: i for i, scene in enumerate(generated.scenes)}
    caption_index = {caption.caption_id: j for j, caption in enumerate(generated.captions)}
    verdicts = list(
        Candidate.objects.filter(batch=batch, verdict__isnull=False).values_list(
            "image__ext_id", "caption__ext_id", "verdict__is_positive"
        )
    )
    positives = [(i, c) for i, c, positive in verdicts if positive]
    true_positives = sum(bool(truth[image_index[i], caption_index[c]]) for i, c in positives)
    return {
        "strategy": strategy,
        "assignments_per_hit": batch_config(batch).assignments_per_hit,
        "rounds": summary.rounds,
        "judgements": Judgement.objects.filter(assignment__hit__batch=batch).count(),
        "pairs_judged": len(verdicts),
        "positive_verdicts": len(positives),
        "true_positives": true_positives,
        "precision": true_positives / len(positives) if positives else 0.0,
        "true_recall": {d: summary.agreement[f"released {d}"]["recall"] for d in DIRECTIONS},
        "true_positives_total": {
            d: summary.agreement[f"released {d}"]["true pairs"] for d in DIRECTIONS
        },
        "released_true": {
            d: round(
                summary.agreement[f"released {d}"]["precision"]
                * summary.agreement[f"released {d}"]["pairs"]
            )
            for d in DIRECTIONS
        },
        "estimated_recall": summary.estimated_recall,
    }


def child(
    strategy: str,
    *,
    folder: Path,
    budget: int,
    seed: int,
    settings: dict[str, Any],
    label: str,
    features: str = "",
) -> dict[str, Any]:
    """Run one strategy in a fresh process and database; return its measurements."""
    # A kept folder's database of an earlier run would hand that run's verdicts to this
    # one (the dataset's cumulative truth): every run starts from an empty file.
    for suffix in ("", "-wal", "-shm"):
        (folder / f"{label}.sqlite3{suffix}").unlink(missing_ok=True)
    env = {
        **os.environ,
        "MITL_VAR_DIR": str(folder),
        "DATABASE_URL": f"sqlite:///{folder / f'{label}.sqlite3'}",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("CELERY_BROKER_URL", None)  # stages run in this process
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        strategy,
        "--budget",
        str(budget),
        "--seed",
        str(seed),
        "--settings",
        json.dumps(settings),
        "--learned-features",
        features,
    ]
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"the {strategy} run failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def combined_recall(result: dict[str, Any], key: str) -> float | None:
    """Recall over both directions' pairs: found ÷ (found + still missing)."""
    if key == "true":
        found = sum(
            result["true_recall"][d] * result["true_positives_total"][d] for d in DIRECTIONS
        )
        return found / sum(result["true_positives_total"].values())
    estimates = result["estimated_recall"]
    if not all(d in estimates for d in DIRECTIONS):
        return None
    found = sum(estimates[d]["found"] for d in DIRECTIONS)
    missing = sum(
        estimates[d]["found"] / estimates[d]["recall"] - estimates[d]["found"] for d in DIRECTIONS
    )
    return found / (found + missing)


def _arguments() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="folder for the databases and files (default: temporary)")
    parser.add_argument(
        "--settings",
        default="{}",
        help="adaptive batch settings over the demo's, as JSON, e.g. "
        '\'{"adjudication": "bandit"}\'',
    )
    parser.add_argument(
        "--no-ablation",
        action="store_true",
        help="skip the third run (adaptive selection with fixed's three workers per HIT)",
    )
    parser.add_argument(
        "--learned-features",
        default="",
        help="the learned policy's feature groups, comma-separated (default: its own), e.g. "
        "rank,score,share,agreement,yield",
    )
    parser.add_argument(
        "--feature-sets",
        default="",
        help="compare the learned policy's feature groups: sets separated by ';', each "
        "comma-separated, optionally '|' and adaptive settings as JSON ({\"rounds\": 10} "
        "cuts the budget into 10 rounds); fixed runs once (once per --keep folder and seed), "
        "adaptive once per set (no ablation run)",
    )
    parser.add_argument("--child", choices=("fixed", "adaptive"), help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    settings = json.loads(args.settings)
    if args.child:
        result = strategy_run(
            args.child,
            budget=args.budget,
            seed=args.seed,
            settings=settings,
            features=args.learned_features,
        )
        print(json.dumps(result))
        return
    if args.feature_sets:
        feature_sets_compare(args, settings)
        return
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-curation-") as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        common = {"folder": folder, "seed": args.seed, "features": args.learned_features}
        runs["fixed"] = child("fixed", budget=0, settings={}, label="fixed", **common)
        budget = runs["fixed"]["judgements"]
        runs["adaptive"] = child(
            "adaptive", budget=budget, settings=settings, label="adaptive", **common
        )
        if not args.no_ablation:  # how much the choice of pairs alone buys
            runs["selection only"] = child(
                "adaptive",
                budget=budget,
                settings={**settings, "assignments_per_hit": 3},
                label="selection-only",
                **common,
            )
    for name, run in runs.items():
        if run["judgements"] > budget:
            raise SystemExit(f"{name} spent {run['judgements']} judgements of {budget}")
    table_print(runs)
    fixed, adaptive = runs["fixed"], runs["adaptive"]
    errors = {
        d: abs(adaptive["estimated_recall"][d]["recall"] - adaptive["true_recall"][d])
        for d in DIRECTIONS
        if d in adaptive["estimated_recall"]
    }
    true_all = combined_recall(adaptive, "true")
    estimated_all = combined_recall(adaptive, "estimated")
    ratio = adaptive["true_positives"] / max(fixed["true_positives"], 1)
    report_line(
        "curation",
        round(ratio, 3),
        TARGET,
        "higher",
        recall_estimate_error=None
        if estimated_all is None
        else round(abs(estimated_all - true_all), 4),
        recall_estimate_error_by_direction={d: round(e, 4) for d, e in errors.items()},
        precision=round(adaptive["precision"], 4),
        judgements={name: run["judgements"] for name, run in runs.items()},
        selection_only_ratio=round(
            runs["selection only"]["true_positives"] / max(fixed["true_positives"], 1), 3
        )
        if "selection only" in runs
        else None,
    )


def feature_sets_compare(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """Fixed once, then adaptive once per feature set at fixed's budget: a line per set."""
    sets = [s.strip() for s in args.feature_sets.split(";") if s.strip()]
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-curation-") as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        common = {"folder": folder, "seed": args.seed}
        cached = folder / f"fixed-seed{args.seed}.json"  # with --keep: fixed runs once
        if cached.exists():
            fixed = json.loads(cached.read_text())
        else:
            fixed = child("fixed", budget=0, settings={}, label="fixed", **common)
            cached.write_text(json.dumps(fixed))
        budget = fixed["judgements"]
        for number, entry in enumerate(sets):
            features, _, extra = entry.partition("|")
            own = {**settings, **json.loads(extra or "{}")}
            if "rounds" in own:  # a number of rounds: the round size that cuts the budget so
                own["round_size"] = budget // own.pop("rounds")
            run = child(
                "adaptive",
                budget=budget,
                settings=own,
                label=f"set{number}",
                features=features,
                **common,
            )
            if run["judgements"] > budget:
                raise SystemExit(f"{entry} spent {run['judgements']} judgements of {budget}")
            results[entry] = run
            ratio = run["true_positives"] / max(fixed["true_positives"], 1)
            print(
                f"{entry:<48} judgements {run['judgements']:>6} of {budget}  true positives "
                f"{run['true_positives']:>5} (fixed {fixed['true_positives']})  ratio {ratio:.3f}"
                f"  precision {run['precision']:.4f}",
                flush=True,
            )
    ratios = {f: r["true_positives"] / max(fixed["true_positives"], 1) for f, r in results.items()}
    best = max(ratios, key=ratios.__getitem__)
    report_line(
        "curation_features",
        round(ratios[best], 3),
        TARGET,
        "higher",
        seed=args.seed,
        best=best,
        fixed={"judgements": budget, "true_positives": fixed["true_positives"]},
        sets={
            f: {
                "ratio": round(ratios[f], 3),
                "precision": round(r["precision"], 4),
                "true_positives": r["true_positives"],
                "judgements": r["judgements"],
            }
            for f, r in results.items()
        },
    )


def table_print(runs: dict[str, dict[str, Any]]) -> None:
    """One column per run: work, positives, precision, true and estimated recall."""
    width = 16
    print(f"{'':<36}" + "".join(f"{name:>{width}}" for name in runs))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:<36}" + "".join(f"{value:>{width}}" for value in values))

    row("workers per HIT", [str(r["assignments_per_hit"]) for r in runs.values()])
    for label, key in (
        ("rounds", "rounds"),
        ("judgements (budget: fixed's)", "judgements"),
        ("pairs judged", "pairs_judged"),
        ("positive verdicts", "positive_verdicts"),
        ("true positives found by the crowd", "true_positives"),
    ):
        row(label, [str(r[key]) for r in runs.values()])
    row("precision of the verdicts", [f"{r['precision']:.3f}" for r in runs.values()])
    for d in DIRECTIONS:
        row(f"release recall {d}, truth", [f"{r['true_recall'][d]:.3f}" for r in runs.values()])
        row(
            f"release recall {d}, estimated",
            [_estimate_text(r["estimated_recall"].get(d)) for r in runs.values()],
        )
    row(
        "release recall, both: truth",
        [f"{combined_recall(r, 'true'):.3f}" for r in runs.values()],
    )
    row(
        "release recall, both: estimated",
        [
            "-" if (value := combined_recall(r, "estimated")) is None else f"{value:.3f}"
            for r in runs.values()
        ],
    )


def _estimate_text(estimate: dict[str, Any] | None) -> str:
    if not estimate:
        return "-"
    return f"{estimate['recall']:.3f} ±{(estimate['recall_high'] - estimate['recall_low']) / 2:.2f}"


if __name__ == "__main__":
    main()
