"""Fixed against adaptive curation on real data: COCO 5K with ECCV Caption's queries.

The COCO 5K test captions (`../shared/data/coco5k/captions.tsv`, text only), ECCV
Caption's positives from the `eccv-caption` package, two text-only annotators (TF-IDF and
the packaged MiniLM) and the simulated crowd answering from the known positives (original
∪ ECCV Caption: a pair in them is a YES, anything else a NO, with the crowd's usual
mistakes). `fixed` judges both annotators' top k over ECCV's 1,261 image and 1,332 caption
queries with one worker per HIT; `adaptive` (same workers per HIT, learned adjudication)
gets `--budget` judgements (21,600, issue 32's; 0: fixed's). Prints, for each, the
judgements, the pairs judged, the share of ECCV Caption's new positives (not in the
original set) it recovered per direction and pooled (both directions' new positives
together), the same per 1,000 judgements, and for adaptive the recall it estimated against
the true one (ECCV ∪ original as the truth). The JSON line's ratio is adaptive's pooled
new positives per 1,000 judgements over fixed's.

Each strategy runs in its own copy of a prepared database (corpus, annotators, MiniLM's
caption embeddings): in one database the dataset's cumulative truth would hand fixed's
verdicts to adaptive. Not a speed benchmark: a check of the strategies on real rankings
(8 minutes on 2 shared cores, 2026-11-28; MiniLM's encoding of the 25,000 captions took
12.6 minutes under heavier load before). Ends with one JSON line. `--encoder mpnet` runs
the sentence-embedding annotator on all-mpnet-base-v2 instead (`make encoders`; about five
times MiniLM's encoding time). With `--keep DIR` the prepared database and fixed's result
stay in DIR, and a later run with the same DIR and `--k`/`--encoder` runs adaptive alone.

Usage: python benchmarks/real_curation.py [--k 5] [--keep DIR] [--encoder minilm|mpnet]
       [--budget 21600] [--rounds 10] [--adjudication learned] [--learned-features GROUPS]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from common import REPO_ROOT, report_line

SHARED = Path(os.environ.get("MITL_SHARED_DIR") or REPO_ROOT.parent / "shared")
CAPTIONS = SHARED / "data/coco5k/captions.tsv"
DIRECTIONS = ("i2t", "t2i")
BUDGET = 21_600  # issue 32: adaptive's judgements
ROUNDS = 10  # adaptive: a tenth of the budget a round (the batch default is a fifth)
TARGET = 1.2  # issue 32: adaptive's new positives per 1,000 judgements over fixed's


def eccv_file(name: str) -> Path:
    return Path(str(resources.files("eccv_caption").joinpath("data", name)))


def eccv_pairs(source: str) -> set[tuple[int, int]]:
    i2t = json.loads(eccv_file(f"{source}_image_to_caption.json").read_text())
    t2i = json.loads(eccv_file(f"{source}_caption_to_image.json").read_text())
    return {(int(i), c) for i, cs in i2t.items() for c in cs} | {
        (i, int(c)) for c, images in t2i.items() for i in images
    }


def _eccv_json(name: str) -> dict[str, list[int]]:
    return json.loads(eccv_file(name).read_text())


def _oracle_write(folder: Path) -> Path:
    """ECCV Caption ∪ the original pairs, in the ECCV format: what the crowd says YES to."""
    truth = eccv_pairs("eccv") | eccv_pairs("original")
    i2t: dict[str, list[int]] = {}
    t2i: dict[str, list[int]] = {}
    for image, caption in sorted(truth):
        i2t.setdefault(str(image), []).append(caption)
        t2i.setdefault(str(caption), []).append(image)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "image_to_caption.json").write_text(json.dumps(i2t))
    (folder / "caption_to_image.json").write_text(json.dumps(t2i))
    return folder


def strategy_run(
    dataset: Any, config: dict[str, Any], oracle: Path, queries: dict[str, list[int]]
) -> dict[str, Any]:
    """Create the batch on ECCV's queries, let the crowd judge every round, measure it."""
    from annotation.models import Batch, Judgement, PositivePair, Query
    from pipeline.aggregate import human_set_name
    from pipeline.demo import rounds_run
    from pipeline.launch import batch_create_with_queries

    batch = batch_create_with_queries(
        dataset=dataset, name=config.get("strategy", "fixed"), raw_config=config, **queries
    )
    rounds_run(batch, n_workers=12, seed=0, oracle_dir=oracle)
    batch = Batch.objects.get(pk=batch.pk)
    found = set(
        PositivePair.objects.filter(
            positive_set__dataset=dataset, positive_set__name=human_set_name(batch)
        ).values_list("image__ext_id", "caption__ext_id")
    )
    queries = Query.objects.filter(batch=batch)
    image_queries = set(queries.exclude(image=None).values_list("image__ext_id", flat=True))
    caption_queries = set(queries.exclude(caption=None).values_list("caption__ext_id", flat=True))
    eccv, original = eccv_pairs("eccv"), eccv_pairs("original")
    new = eccv - original
    truth = eccv | original
    recovered = {}
    true_recall = {}
    pooled: set[tuple[int, int]] = set()
    for direction, side, items in (("i2t", 0, image_queries), ("t2i", 1, caption_queries)):
        wanted = {p for p in new if p[side] in items}
        pooled |= wanted
        recovered[direction] = len(found & wanted) / len(wanted)
        population = {p for p in truth if p[side] in items}
        released = (found | original) & population
        true_recall[direction] = len(released) / len(population)
    recovered["pooled"] = len(found & pooled) / len(pooled)
    curation = batch.reports.get("curation", {}).get("directions", {})
    return {
        "strategy": config.get("strategy", "fixed"),
        "rounds": batch.round + 1,
        "judgements": Judgement.objects.filter(assignment__hit__batch=batch).count(),
        "pairs_judged": batch.candidates.filter(verdict__isnull=False).count(),
        "positives_found": len(found),
        "eccv_new_recovered": recovered,
        "eccv_new_found": len(found & pooled),
        "true_recall": true_recall,
        "estimated_recall": {
            d: (curation.get(d, {}).get("estimate") or {}).get("recall") for d in DIRECTIONS
        },
        "human_set": human_set_name(batch),
    }


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=5, help="fixed: candidates per annotator")
    parser.add_argument("--keep", help="folder for the databases (default: temporary)")
    parser.add_argument(
        "--encoder", default="minilm", help="the sentence-embedding annotator's packaged encoder"
    )
    parser.add_argument(
        "--budget", type=int, default=BUDGET, help="adaptive's judgements (0: fixed's)"
    )
    parser.add_argument("--adjudication", default="learned", help="adaptive's policy")
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help="adaptive: rounds the budget is cut into"
    )
    parser.add_argument(
        "--learned-features",
        default="",
        help="the learned policy's feature groups, comma-separated",
    )
    parser.add_argument("--child", choices=("prepare", "fixed", "adaptive"), help=argparse.SUPPRESS)
    return parser.parse_args()


def child(stage: str, args: argparse.Namespace, folder: Path, database: str) -> dict[str, Any]:
    """Run one stage in a fresh process on its own SQLite file; return its JSON line."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{folder / database}"}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", stage]
    for option in ("k", "encoder", "budget", "adjudication", "rounds", "learned_features"):
        command += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"the {stage} stage failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _database_copy(source: Path, target: Path) -> None:
    """A fresh copy of the prepared database, without an earlier run's journal beside it."""
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, target)


def strategies_run(args: argparse.Namespace, folder: Path) -> list[dict[str, Any]]:
    """Prepare the corpus once (kept with --keep), then each strategy on its own copy of it.

    Separate databases, as a batch on a fresh dataset: the platform's cumulative truth
    would otherwise hand fixed's verdicts to adaptive as already decided.
    """
    prepared = folder / "prepared.sqlite3"
    if not prepared.exists():
        child("prepare", args, folder, "preparing.sqlite3")
        (folder / "preparing.sqlite3").rename(prepared)
    _oracle_write(folder / "oracle")
    cached = folder / f"fixed-k{args.k}-{args.encoder}.json"
    if cached.exists():  # fixed does not depend on the adaptive options
        fixed = json.loads(cached.read_text())
    else:
        _database_copy(prepared, folder / "fixed.sqlite3")
        fixed = child("fixed", args, folder, "fixed.sqlite3")
        cached.write_text(json.dumps(fixed))
    if not args.budget:
        args.budget = fixed["judgements"]
    _database_copy(prepared, folder / "adaptive.sqlite3")
    return [fixed, child("adaptive", args, folder, "adaptive.sqlite3")]


def main() -> None:
    args = _arguments()
    if not CAPTIONS.is_file():
        raise SystemExit(f"{CAPTIONS} is not there (../shared beside the checkout)")
    if args.child:
        print(json.dumps(child_run(args)))
        return
    with tempfile.TemporaryDirectory(prefix="real-curation-") as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        # A packaged encoder unpacked once (mpnet's 438 MB) stays in the project's var/.
        os.environ.setdefault("MITL_ENCODER_DIR", str(REPO_ROOT / "var" / "encoders"))
        os.environ["MITL_VAR_DIR"] = str(folder)
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.pop("CELERY_BROKER_URL", None)
        results = strategies_run(args, folder)
    table_print(results)
    fixed, adaptive = results
    per_thousand = [1000 * r["eccv_new_found"] / max(r["judgements"], 1) for r in results]
    report_line(
        "real_curation",
        round(per_thousand[1] / max(per_thousand[0], 1e-9), 3),
        TARGET,
        "higher",
        encoder=args.encoder,
        adjudication=args.adjudication,
        rounds=args.rounds,
        learned_features=args.learned_features or None,
        judgements={"fixed": fixed["judgements"], "adaptive": adaptive["judgements"]},
        eccv_new_found={r["strategy"]: r["eccv_new_found"] for r in results},
        eccv_new_per_1000={
            r["strategy"]: round(v, 1) for r, v in zip(results, per_thousand, strict=True)
        },
        eccv_new_recovered={r["strategy"]: r["eccv_new_recovered"] for r in results},
        true_recall=adaptive["true_recall"],
        estimated_recall=adaptive["estimated_recall"],
    )


def table_print(results: list[dict[str, Any]]) -> None:
    """One column per strategy: work, pairs, positives, ECCV's new positives recovered."""
    print(f"{'':<44}{'fixed':>12}{'adaptive':>12}")
    for label, key in (
        ("rounds", "rounds"),
        ("judgements", "judgements"),
        ("pairs judged", "pairs_judged"),
        ("positives found", "positives_found"),
        ("ECCV new positives found", "eccv_new_found"),
    ):
        print(f"{label:<44}" + "".join(f"{r[key]:>12}" for r in results))
    for d in (*DIRECTIONS, "pooled"):
        print(
            f"{'ECCV new positives recovered, ' + d:<44}"
            + "".join(f"{r['eccv_new_recovered'][d]:>12.3f}" for r in results)
        )
    print(
        f"{'ECCV new positives per 1,000 judgements':<44}"
        + "".join(f"{1000 * r['eccv_new_found'] / max(r['judgements'], 1):>12.1f}" for r in results)
    )
    for d in DIRECTIONS:
        estimate = results[1]["estimated_recall"][d]
        print(
            f"{'release recall ' + d + ', true / estimated':<44}"
            f"{results[1]['true_recall'][d]:>12.3f}"
            f"{'-' if estimate is None else f'{estimate:.3f}':>12}"
        )


def corpus_prepare(encoder: str) -> None:
    """Import COCO 5K and create both annotators, unless a kept database has them."""
    from django.core.management import call_command

    from annotation.models import Dataset, MachineAnnotator

    if not Dataset.objects.filter(name="coco5k").exists():
        call_command("import_dataset", "coco5k", "--captions", str(CAPTIONS), verbosity=0)
    if not MachineAnnotator.objects.filter(name="tfidf").exists():
        call_command("annotator_create", "tfidf", "--kind", "bow", verbosity=0)
    if not MachineAnnotator.objects.filter(name=encoder).exists():
        config = json.dumps({"encoder": encoder})
        call_command(
            "annotator_create", encoder, "--kind", "text_embedding", "--config", config, verbosity=0
        )


def embeddings_warm(encoder: str) -> None:
    """Embed every caption once, into this database's cache (what takes the time)."""
    from annotation.models import Dataset, MachineAnnotator
    from pipeline.corpus import corpus_load
    from pipeline.retrieve import annotator_prepare

    dataset = Dataset.objects.get(name="coco5k")
    loaded = corpus_load(dataset=dataset)
    annotator_prepare(
        row=MachineAnnotator.objects.get(name=encoder), dataset=dataset, loaded=loaded
    )


def child_run(args: argparse.Namespace) -> dict[str, Any]:
    """One stage in this process: prepare the corpus, or run one strategy and measure it."""
    from common import django_setup

    django_setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if args.child == "prepare":
        corpus_prepare(args.encoder)
        embeddings_warm(args.encoder)
        from django.db import connection

        with connection.cursor() as cursor:  # all in the main file: it is copied next
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.close()
        return {"prepared": args.encoder}
    if args.learned_features:
        from mitl.curation import learned

        learned.FEATURE_GROUPS = tuple(args.learned_features.split(","))
    from annotation.models import Dataset

    dataset = Dataset.objects.get(name="coco5k")
    # ECCV Caption stays outside the dataset: it is the crowd's truth, not a known set (a
    # known positive is never chosen again, so importing it would hide every answer).
    oracle = Path(os.environ["MITL_VAR_DIR"]) / "oracle"
    image_queries = sorted(int(i) for i in _eccv_json("eccv_image_to_caption.json"))
    caption_queries = sorted(int(c) for c in _eccv_json("eccv_caption_to_image.json"))
    config: dict[str, Any] = {"annotators": ["tfidf", args.encoder], "assignments_per_hit": 1}
    if args.child == "fixed":
        config["k"] = args.k
    else:
        config |= {
            "strategy": "adaptive",
            "adjudication": args.adjudication,
            "budget_judgements": args.budget,
            "round_size": args.budget // args.rounds,
        }
    queries = {"image_ids": image_queries, "caption_ids": caption_queries}
    return strategy_run(dataset, config, oracle, queries)


if __name__ == "__main__":
    main()
