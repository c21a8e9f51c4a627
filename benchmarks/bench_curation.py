"""Adaptive against fixed curation at equal judgements, on synthetic data with full truth.

Both strategies run the demo's set-up (300 synthetic images, 100 image and 100 caption
queries, four machine annotators, three simulated workers per HIT, the same crowd seed),
each in its own SQLite database beside a shared folder (the synthetic files and the tiny
CLIP are made once). `fixed` judges every annotator's top 5 once; its judgements, golden
pairs and re-posted work included, become the budget of `adaptive`. The script checks
that adaptive spent no more than fixed, then prints for each strategy the true positives
the crowd found, the release's true and estimated recall, and the verdicts' precision,
and ends with the JSON line

    {"benchmark": "curation", "ratio": adaptive true positives / fixed true positives,
     "target": 1.5, "better": "higher", "recall_estimate_error": ..., "precision": ...}

Usage: python benchmarks/bench_curation.py [--seed 0] [--keep DIR]
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

TARGET = 1.5
DIRECTIONS = ("i2t", "t2i")


def strategy_run(
    strategy: str, *, budget: int, seed: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """Run the demo pipeline with one strategy in this process; measure it against the truth."""
    django_setup()
    from django.core.management import call_command

    from annotation.models import Batch, Candidate, Judgement
    from mitl.services.demo import demo_run
    from mitl.services.simulate import synthetic_regenerate
    from mitl.synthetic.truth import truth_matrix

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
    strategy: str, *, folder: Path, budget: int, seed: int, settings: dict[str, Any], label: str
) -> dict[str, Any]:
    """Run one strategy in a fresh process and database; return its measurements."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="folder for the databases and files (default: temporary)")
    parser.add_argument("--child", choices=("fixed", "adaptive"), help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--settings",
        default="{}",
        help='adaptive batch settings over the demo\'s, as JSON (e.g. \'{"adjudication": "bandit"}\')',
    )
    args = parser.parse_args()
    if args.child:
        settings = json.loads(args.settings)
        print(
            json.dumps(
                strategy_run(args.child, budget=args.budget, seed=args.seed, settings=settings)
            )
        )
        return
    with tempfile.TemporaryDirectory(prefix="bench-curation-") as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        fixed = child("fixed", folder=folder, budget=0, seed=args.seed, settings={}, label="fixed")
        adaptive = child(
            "adaptive",
            folder=folder,
            budget=fixed["judgements"],
            seed=args.seed,
            settings=json.loads(args.settings),
            label="adaptive",
        )
    if adaptive["judgements"] > fixed["judgements"]:
        raise SystemExit(
            f"adaptive spent {adaptive['judgements']} judgements, more than fixed's "
            f"{fixed['judgements']}"
        )
    print(f"{'':<34}{'fixed':>12}{'adaptive':>12}")
    rows = [
        ("rounds", "rounds"),
        ("judgements (budget: fixed's)", "judgements"),
        ("pairs judged", "pairs_judged"),
        ("positive verdicts", "positive_verdicts"),
        ("true positives found by the crowd", "true_positives"),
    ]
    for label, key in rows:
        print(f"{label:<34}{fixed[key]:>12}{adaptive[key]:>12}")
    print(
        f"{'precision of the verdicts':<34}{fixed['precision']:>12.3f}{adaptive['precision']:>12.3f}"
    )
    errors = []
    for d in DIRECTIONS:
        estimate = adaptive["estimated_recall"].get(d)
        print(
            f"{'release recall ' + d + ' (truth)':<34}{fixed['true_recall'][d]:>12.3f}"
            f"{adaptive['true_recall'][d]:>12.3f}"
        )
        if estimate:
            errors.append(abs(estimate["recall"] - adaptive["true_recall"][d]))
            print(
                f"{'  estimated (95% interval)':<34}{'':>12}{estimate['recall']:>12.3f} "
                f"({estimate['recall_low']:.3f}-{estimate['recall_high']:.3f})"
            )
    true_all = combined_recall(adaptive, "true")
    estimated_all = combined_recall(adaptive, "estimated")
    if estimated_all is not None:
        print(f"{'release recall, both (truth / est.)':<34}{true_all:>12.3f}{estimated_all:>12.3f}")
    ratio = adaptive["true_positives"] / max(fixed["true_positives"], 1)
    report_line(
        "curation",
        round(ratio, 3),
        TARGET,
        "higher",
        recall_estimate_error=None
        if estimated_all is None
        else round(abs(estimated_all - true_all), 4),
        recall_estimate_error_by_direction=[round(e, 4) for e in errors],
        precision=round(adaptive["precision"], 4),
        judgements={"fixed": fixed["judgements"], "adaptive": adaptive["judgements"]},
    )


if __name__ == "__main__":
    main()
