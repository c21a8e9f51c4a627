"""Replay the adaptive rounds on a kept synthetic batch: compare policies in seconds.

`bench_curation.py --keep DIR` leaves each run's SQLite database in DIR. This script opens
its adaptive batch, reads the rankings, the known positives and the synthetic truth, and
replays the rounds without the crowd: each round the policy chooses its pairs from the
same rankings (a share of them a uniform random sample of unjudged pairs, standing in for
the estimate's stratified sample), the truth answers, and the next round learns from it.
The pairs per round are the batch's own (what its judgements bought), so a variant's true
positives compare with the batch's and with fixed's at the same cost. The crowd's mistakes
and the sample's design are left out: a screen for policy changes, whose winners the full
benchmark then measures.

Usage: python benchmarks/replay_curation.py DIR [--database set0.sqlite3]
       [--sets "rank,yield;rank,score,yield"] [--rounds 5] [--estimate-share 0.1]
Ends with one JSON line: each set's true positives, and the ratio to fixed's.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import django_setup, report_line

ALL = "rank,score,share,agreement,yield"


def replay_inputs(folder: Path, database: str) -> dict[str, Any]:
    """The adaptive batch's rankings, known pairs, pairs judged, and the truth as a set."""
    os.environ["DATABASE_URL"] = f"sqlite:///{folder / database}"
    os.environ["MITL_VAR_DIR"] = str(folder)
    django_setup()
    from annotation.models import Batch, Caption, Image
    from annotation.synthetic import synthetic_regenerate
    from mitl.config import batch_config
    from mitl.synthetic.truth import truth_matrix
    from pipeline.curation import curation_inputs

    # The demo's batch is the first; later ones (the qualification study's, the people's)
    # are small and only add to the cumulative truth.
    batch = Batch.objects.select_related("dataset").order_by("pk").first()
    config = batch_config(batch)
    inputs = curation_inputs(batch=batch, config=config)
    generated = synthetic_regenerate(dataset=batch.dataset)
    truth = truth_matrix(generated)
    image_row = {scene.image_id: i for i, scene in enumerate(generated.scenes)}
    caption_row = {caption.caption_id: j for j, caption in enumerate(generated.captions)}
    images = dict(Image.objects.filter(dataset=batch.dataset).values_list("pk", "ext_id"))
    captions = dict(Caption.objects.filter(dataset=batch.dataset).values_list("pk", "ext_id"))
    positives = {
        (i, c)
        for i, ext_i in images.items()
        for c, ext_c in captions.items()
        if truth[image_row[ext_i], caption_row[ext_c]]
    }
    return {
        "rankings": inputs.rankings,
        "known": inputs.known,
        "pairs": batch.candidates.filter(verdict__isnull=False).count(),
        "truth": positives,
        "image_pks": inputs.image_pks,
        "caption_pks": inputs.caption_pks,
        "estimate_share": config.estimate_share,
    }


def random_pairs(
    data: dict[str, Any], taken: set[tuple[int, int]], count: int, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """`count` unjudged pairs of random queries with random targets (the sample's stand-in)."""
    drawn: list[tuple[int, int]] = []
    queries = data["rankings"]
    while len(drawn) < count:
        query = queries[rng.integers(len(queries))]
        anchor = next((p for ranked in query.lists.values() for p in ranked), None)
        if anchor is None:
            continue
        if query.group == "i2t":
            pair = (anchor[0], int(rng.choice(data["caption_pks"])))
        else:
            pair = (int(rng.choice(data["image_pks"])), anchor[1])
        if pair not in taken:
            taken.add(pair)
            drawn.append(pair)
    return drawn


def replay(data: dict[str, Any], groups: Sequence[str], rounds: int, share: float) -> int:
    """True positives the policy (with these feature groups) finds in the batch's pairs."""
    from mitl.curation import learned
    from mitl.curation.policies import PolicySettings, policy_select

    learned.FEATURE_GROUPS = tuple(groups)
    rng = np.random.default_rng(0)
    outcomes: dict[tuple[int, int], bool] = {}
    per_round = data["pairs"] // rounds
    for number in range(rounds):
        quota = per_round if number < rounds - 1 else data["pairs"] - len(outcomes)
        sample = round(quota * share)
        picks = policy_select(
            "learned",
            data["rankings"],
            outcomes,
            quota=quota - sample,
            settings=PolicySettings(),
            excluded=data["known"],
        )
        chosen = [pick.pair for pick in picks]
        taken = set(outcomes) | data["known"] | set(chosen)
        chosen += random_pairs(data, taken, quota - len(chosen), rng)
        outcomes.update({pair: pair in data["truth"] for pair in chosen})
    return sum(outcomes.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="a bench_curation.py --keep folder")
    parser.add_argument("--database", default="set0.sqlite3", help="the adaptive run's file")
    parser.add_argument("--sets", default=f"{ALL};{ALL},neighbour")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--estimate-share", type=float, default=None)
    parser.add_argument("--fixed-true-positives", type=int, default=0)
    args = parser.parse_args()
    data = replay_inputs(Path(args.folder), args.database)
    share = data["estimate_share"] if args.estimate_share is None else args.estimate_share
    found = {}
    for groups in (s.strip() for s in args.sets.split(";") if s.strip()):
        found[groups] = replay(data, groups.split(","), args.rounds, share)
        print(
            f"{groups:<56} true positives {found[groups]:>5} of {data['pairs']} pairs", flush=True
        )
    fixed = args.fixed_true_positives
    best = max(found, key=found.__getitem__)
    report_line(
        "replay_curation",
        round(found[best] / fixed, 3) if fixed else None,
        2.0,
        "higher",
        pairs=data["pairs"],
        rounds=args.rounds,
        estimate_share=share,
        true_positives=found,
        ratios={g: round(n / fixed, 3) for g, n in found.items()} if fixed else None,
    )


if __name__ == "__main__":
    main()
