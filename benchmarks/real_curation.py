"""Fixed against adaptive curation on real data: COCO 5K with ECCV Caption's queries.

The COCO 5K test captions (`../shared/data/coco5k/captions.tsv`, text only), ECCV
Caption's positives from the `eccv-caption` package, two text-only annotators (TF-IDF and
the packaged MiniLM) and the simulated crowd answering from the known positives (original
∪ ECCV Caption: a pair in them is a YES, anything else a NO, with the crowd's usual
mistakes). `fixed` judges both annotators' top k over ECCV's 1,261 image and 1,332 caption
queries with one worker per HIT; its judgements are `adaptive`'s budget (same workers per
HIT, learned adjudication). Prints, for each, the judgements, the pairs judged, the share
of ECCV Caption's new positives (not in the original set) it recovered per direction, and
for adaptive the recall it estimated against the true one (ECCV ∪ original as the truth).

Not a speed benchmark: a check of the strategies on real rankings (about 15 minutes on 2
cores, most of it MiniLM embedding the 25,000 captions once). Ends with one JSON line.
`--encoder mpnet` runs the sentence-embedding annotator on all-mpnet-base-v2 instead
(`make encoders`; about five times MiniLM's encoding time).

Usage: python benchmarks/real_curation.py [--k 5] [--keep DIR] [--encoder minilm|mpnet]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from common import REPO_ROOT, report_line

SHARED = Path(os.environ.get("MITL_SHARED_DIR") or REPO_ROOT.parent / "shared")
CAPTIONS = SHARED / "data/coco5k/captions.tsv"
DIRECTIONS = ("i2t", "t2i")


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
    for direction, side, items in (("i2t", 0, image_queries), ("t2i", 1, caption_queries)):
        wanted = {p for p in new if p[side] in items}
        recovered[direction] = len(found & wanted) / len(wanted)
        population = {p for p in truth if p[side] in items}
        released = (found | original) & population
        true_recall[direction] = len(released) / len(population)
    curation = batch.reports.get("curation", {}).get("directions", {})
    return {
        "strategy": config.get("strategy", "fixed"),
        "rounds": batch.round + 1,
        "judgements": Judgement.objects.filter(assignment__hit__batch=batch).count(),
        "pairs_judged": batch.candidates.filter(verdict__isnull=False).count(),
        "positives_found": len(found),
        "eccv_new_recovered": recovered,
        "true_recall": true_recall,
        "estimated_recall": {
            d: (curation.get(d, {}).get("estimate") or {}).get("recall") for d in DIRECTIONS
        },
        "human_set": human_set_name(batch),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=5, help="fixed: candidates per annotator")
    parser.add_argument("--keep", help="folder for the database (default: temporary)")
    parser.add_argument(
        "--encoder", default="minilm", help="the sentence-embedding annotator's packaged encoder"
    )
    args = parser.parse_args()
    if not CAPTIONS.is_file():
        raise SystemExit(f"{CAPTIONS} is not there (../shared beside the checkout)")
    with tempfile.TemporaryDirectory(prefix="real-curation-") as scratch:
        folder = Path(args.keep or scratch)
        # A packaged encoder unpacked once (mpnet's 438 MB) stays in the project's var/.
        os.environ.setdefault("MITL_ENCODER_DIR", str(REPO_ROOT / "var" / "encoders"))
        os.environ["MITL_VAR_DIR"] = str(folder)
        os.environ["DATABASE_URL"] = f"sqlite:///{folder / 'real.sqlite3'}"
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.pop("CELERY_BROKER_URL", None)
        results = run(folder, k=args.k, encoder=args.encoder)
    print(f"{'':<40}{'fixed':>12}{'adaptive':>12}")
    for label, key in (
        ("rounds", "rounds"),
        ("judgements", "judgements"),
        ("pairs judged", "pairs_judged"),
        ("positives found", "positives_found"),
    ):
        print(f"{label:<40}" + "".join(f"{r[key]:>12}" for r in results))
    for d in DIRECTIONS:
        print(
            f"{'ECCV new positives recovered, ' + d:<40}"
            + "".join(f"{r['eccv_new_recovered'][d]:>12.3f}" for r in results)
        )
    for d in DIRECTIONS:
        estimate = results[1]["estimated_recall"][d]
        print(
            f"{'release recall ' + d + ', true / estimated':<40}"
            f"{results[1]['true_recall'][d]:>12.3f}"
            f"{'-' if estimate is None else f'{estimate:.3f}':>12}"
        )
    fixed, adaptive = results
    gained = sum(adaptive["eccv_new_recovered"].values()) / max(
        sum(fixed["eccv_new_recovered"].values()), 1e-9
    )
    report_line(
        "real_curation",
        round(gained, 3),
        1.5,
        "higher",
        encoder=args.encoder,
        judgements={"fixed": fixed["judgements"], "adaptive": adaptive["judgements"]},
        eccv_new_recovered={r["strategy"]: r["eccv_new_recovered"] for r in results},
        true_recall=adaptive["true_recall"],
        estimated_recall=adaptive["estimated_recall"],
    )


def run(folder: Path, *, k: int, encoder: str = "minilm") -> list[dict[str, Any]]:
    from common import django_setup

    django_setup()
    from django.core.management import call_command

    from annotation.models import Dataset, PositiveSet

    call_command("migrate", verbosity=0)
    call_command("import_dataset", "coco5k", "--captions", str(CAPTIONS), verbosity=0)
    call_command("annotator_create", "tfidf", "--kind", "bow", verbosity=0)
    config = json.dumps({"encoder": encoder})
    call_command(
        "annotator_create", encoder, "--kind", "text_embedding", "--config", config, verbosity=0
    )
    dataset = Dataset.objects.get(name="coco5k")
    # ECCV Caption stays outside the dataset: it is the crowd's truth, not a known set (a
    # known positive is never chosen again, so importing it would hide every answer).
    oracle = _oracle_write(folder / "oracle")
    image_queries = sorted(int(i) for i in _eccv_json("eccv_image_to_caption.json"))
    caption_queries = sorted(int(c) for c in _eccv_json("eccv_caption_to_image.json"))
    base = {"annotators": ["tfidf", encoder], "assignments_per_hit": 1}
    queries = {"image_ids": image_queries, "caption_ids": caption_queries}
    fixed = strategy_run(dataset, {**base, "k": k}, oracle, queries)
    # The next batch must not see the first one's finds as known positives.
    PositiveSet.objects.filter(dataset=dataset, name=fixed["human_set"]).delete()
    adaptive = strategy_run(
        dataset,
        {
            **base,
            "strategy": "adaptive",
            "adjudication": "learned",
            "budget_judgements": fixed["judgements"],
        },
        oracle,
        queries,
    )
    return [fixed, adaptive]


if __name__ == "__main__":
    main()
