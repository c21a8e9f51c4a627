"""The whole pipeline on a synthetic dataset with a simulated crowd (`manage.py demo`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model

from annotation.errors import ServiceError
from annotation.imports.datasets import dataset_import_tsv
from annotation.models import Assignment, AssignmentStatus, Batch, BatchState, Dataset, Release
from annotation.synthetic import synthetic_regenerate
from mitl.config import batch_config
from mitl.evaluation_inputs import release_load
from mitl.explain.table import summary_table
from mitl.positive_sets import set_agreement
from mitl.release_files import I2T_FILE, STATS_FILE, T2I_FILE, positives_by_query
from mitl.relevance.proxies import proxy_unavailable
from mitl.relevance.wordnet import wordnet_available, wordnet_dir
from mitl.synthetic.files import INSTANCES_FILE, write, write_instances
from mitl.synthetic.generation import generate
from mitl.synthetic.truth import truth_matrix

from .annotators import annotator_create
from .bias_page import bias_html_cached
from .explain_report import ExplainRequest, explain_report, report_write
from .progress import ProgressListener
from .qualification_study import qualification_study, study_table
from .simulate import crowd_simulate_reviewed
from .stages import batch_create, batch_run_until

# Four kinds of machine annotator, so the candidates are not one model's blind spots:
# captions' words, captions' meaning, object labels, and pixels (a tiny CLIP trained here).
TEXT_ANNOTATORS: dict[str, tuple[str, dict[str, Any]]] = {
    "tfidf": ("bow", {}),
    "minilm": ("text_embedding", {}),
    "labels": ("object_labels", {"zeta": 1}),
}

# A second, small batch stays open for people: log in and judge its HITs in the browser.
LIVE_BATCH = {"n_image_queries": 8, "n_caption_queries": 8, "k": 3, "assignments_per_hit": 2}
# Local accounts for the demo only (the embedded default is a single-user SQLite file).
DEMO_PASSWORD = "mitl-demo"
DEMO_ACCOUNTS = {"admin": True, "annotator1": False, "annotator2": False}  # name → is staff

# The demo's batch is adaptive (docs/curation.md) with about the judgements the fixed
# strategy spends on the same queries (k = 5 from four annotators, three workers per HIT:
# ~11,000). Adaptive asks two workers per HIT and a second HIT's pair only where they split.
DEMO_BUDGET = 11_000
# The learner annotator lifts recall on synthetic data (docs/curation.md, three seeds).
ADAPTIVE_SETTINGS = {
    "strategy": "adaptive",
    "adjudication": "learned",
    "assignments_per_hit": 2,
    "crowd_learner": True,
}
FIXED_SETTINGS = {"strategy": "fixed", "k": 5}
# The release carries graded qrels of two cheap caption proxies (docs/relevance.md).
DEMO_RELEVANCE = ["bow", "cider_d"]

# Flagged work is rejected and re-posted for other workers, as an admin would.
REJECTION_FEEDBACK = "A golden pair was answered wrongly."


@dataclass
class DemoSummary:
    dataset: str
    batch_id: int
    release_path: str
    counts: dict[str, int] = field(default_factory=dict)
    positives: dict[str, dict[str, float]] = field(default_factory=dict)
    agreement: dict[str, dict[str, float]] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    strategy: str = "adaptive"
    rounds: int = 1
    # per direction: estimated recall with its 95% interval (adaptive only)
    estimated_recall: dict[str, dict[str, float]] = field(default_factory=dict)
    explain_path: str = ""  # the explanation report of the demo's annotators ("" if skipped)
    explain_table: str = ""
    # One sentence per optional part skipped on this machine: what, and what to install
    skipped: list[str] = field(default_factory=list)
    # The same HITs judged without and with a qualification round (qualification_study)
    qualification: list[dict[str, Any]] = field(default_factory=list)
    qualification_table: str = ""
    live_batch_id: int | None = None  # left in annotating for people to judge
    accounts: dict[str, str] = field(default_factory=dict)  # username → role


def demo_run(
    *,
    n_images: int = 300,
    n_queries: int = 100,
    assignments_per_hit: int = 3,
    n_workers: int = 15,
    seed: int = 0,
    strategy: str = "adaptive",
    budget: int = DEMO_BUDGET,
    batch_settings: Mapping[str, Any] | None = None,
    listener: ProgressListener | None = None,
) -> DemoSummary:
    """Generate, import, retrieve, pool, pack, annotate (simulated), aggregate and release.

    `strategy` "adaptive" runs rounds until `budget` judgements are spent; "fixed" judges
    every annotator's top 5 once. `batch_settings` override the batch configuration.
    """
    timings: dict[str, float] = {}
    skipped = optional_parts_missing()
    started = time.monotonic()
    dataset = _demo_dataset(n_images=n_images, seed=seed, listener=listener)
    timings["generate+import"] = time.monotonic() - started
    mark = time.monotonic()
    clip = ("open_clip", _demo_clip(dataset, listener))  # one model per demo dataset
    annotators = {**TEXT_ANNOTATORS, f"clip-{dataset.name}": clip}
    timings["train clip"] = time.monotonic() - mark
    for name, (kind, config) in annotators.items():
        annotator_create(name=name, kind=kind, config=config)
    batch = batch_create(
        dataset=dataset,
        name=f"demo seed {seed}",
        raw_config={
            "annotators": list(annotators),
            "n_image_queries": n_queries,
            "n_caption_queries": n_queries,
            "assignments_per_hit": assignments_per_hit,
            "seed": seed,
            "relevance": [name for name in DEMO_RELEVANCE if not proxy_unavailable(name)],
            **(
                {**ADAPTIVE_SETTINGS, "budget_judgements": budget}
                if strategy == "adaptive"
                else FIXED_SETTINGS
            ),
            **(batch_settings or {}),
        },
    )
    rounds_run(batch, n_workers=n_workers, seed=seed, listener=listener, timings=timings)
    release = Release.objects.filter(batches=batch).latest("version")
    summary = _summarise(batch, release, dataset)
    summary.skipped = skipped
    _bias_page_build(batch)
    if wordnet_available():
        mark = time.monotonic()
        summary.explain_path, summary.explain_table = _demo_explain(
            release, dataset, list(annotators), listener
        )
        timings["explain"] = time.monotonic() - mark
    mark = time.monotonic()
    # The two text annotators are enough to fill the study's HITs, and cost seconds.
    arms = qualification_study(
        dataset=dataset, annotators=list(TEXT_ANNOTATORS)[:2], seed=seed, listener=listener
    )
    summary.qualification = [arm.to_json() for arm in arms]
    summary.qualification_table = study_table(arms)
    timings["qualification study"] = time.monotonic() - mark
    mark = time.monotonic()
    live = batch_create(
        dataset=dataset,
        name=f"demo seed {seed}: for people",
        raw_config={**LIVE_BATCH, "annotators": list(annotators), "seed": seed},
    )
    batch_run_until(batch_id=live.pk, until=BatchState.ANNOTATING, listener=listener)
    timings["batch for people"] = time.monotonic() - mark
    summary.live_batch_id = live.pk
    summary.accounts = _demo_accounts()
    summary.stage_seconds = {name: round(s, 2) for name, s in timings.items()}
    return summary


def optional_parts_missing() -> list[str]:
    """Return one sentence per optional part of the demo this machine cannot run.

    Each says what the demo skips and what to install; the rest of the demo runs as usual.
    """
    skipped = [
        f"Skipped the {name} relevance qrels of the release: {reason}."
        for name in DEMO_RELEVANCE
        if (reason := proxy_unavailable(name))
    ]
    if not wordnet_available():  # the failure metrics compare concepts through WordNet
        skipped.append(
            "Skipped the explanation of the annotators' failures (docs/explain.md): it needs "
            f"WordNet 3.0, not found in {wordnet_dir()}; install it with `apt-get install -y "
            "wordnet-base` (`make wordnet` does, as root) or set WORDNET_DIR to its folder."
        )
    return skipped


def rounds_run(
    batch: Batch,
    *,
    n_workers: int,
    seed: int,
    listener: ProgressListener | None = None,
    timings: dict[str, float] | None = None,
    oracle_dir: Path | None = None,
) -> None:
    """Run the automatic stages and let the simulated crowd judge each round until released.

    The crowd answers from the synthetic truth, or from `oracle_dir`'s ECCV-format files.
    """
    timings = {} if timings is None else timings
    timings.update({"automatic stages": 0.0, "annotate": 0.0})
    mark = time.monotonic()
    state = batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED, listener=listener)
    timings["automatic stages"] += time.monotonic() - mark
    while state == BatchState.ANNOTATING:
        batch.refresh_from_db()
        mark = time.monotonic()
        crowd_simulate_reviewed(
            batch=batch,
            config=batch_config(batch),
            n_workers=n_workers,
            feedback=REJECTION_FEEDBACK,
            oracle_dir=oracle_dir,
            seed=seed + 100 * batch.round,
            listener=listener,
        )
        timings["annotate"] += time.monotonic() - mark
        mark = time.monotonic()
        # force: HITs still short of approved work after the review rounds close as they are
        state = batch_run_until(
            batch_id=batch.pk, until=BatchState.RELEASED, listener=listener, force=True
        )
        timings["automatic stages"] += time.monotonic() - mark


def _bias_page_build(batch: Batch) -> None:
    """Build the released batch's bias page now (seconds of charts), so it opens at once."""
    with suppress(ServiceError):  # no verdicts: the page says so, nothing to build
        bias_html_cached(batch=batch)


def _demo_accounts() -> dict[str, str]:
    """Create the demo's admin and annotator accounts the first time; return name → role."""
    users = get_user_model().objects
    for username, is_staff in DEMO_ACCOUNTS.items():
        if not users.filter(username=username).exists():
            if is_staff:
                users.create_superuser(username, password=DEMO_PASSWORD)
            else:
                users.create_user(username, password=DEMO_PASSWORD)
    return {name: "admin" if staff else "annotator" for name, staff in DEMO_ACCOUNTS.items()}


def _relay(listener: ProgressListener | None, stage: str) -> Callable[[int, int], None]:
    """Return a (done, total) callback that reports to `listener` as `stage`."""

    def report(done: int, total: int) -> None:
        if listener:
            listener(stage, done, total)

    return report


def _demo_dataset(*, n_images: int, seed: int, listener: ProgressListener | None) -> Dataset:
    name = f"synthetic-{n_images}-s{seed}"
    existing = Dataset.objects.filter(name=name).first()
    if existing is not None:
        return existing
    out_dir = settings.VAR_DIR / "synthetic" / name
    if not (out_dir / "captions.tsv").exists():  # written once, e.g. by train_demo_clip
        generated = generate(n_images=n_images, seed=seed)
        write(generated, out_dir, progress=_relay(listener, "generating"))
    elif not (out_dir / INSTANCES_FILE).exists():  # written before instances.json existed
        write_instances(generate(n_images=n_images, seed=seed), out_dir)
    meta = json.loads((out_dir / "synthetic.json").read_text())
    return dataset_import_tsv(
        name=name,
        captions_path=out_dir / "captions.tsv",
        images_dir=out_dir / "images",
        labels_path=out_dir / "labels.json",
        instances_path=out_dir / INSTANCES_FILE,
        description=f"Synthetic scenes of coloured shapes ({n_images} images, seed {seed}).",
        meta={"synthetic": meta},
        progress=_relay(listener, "importing"),
    )


def _demo_clip(dataset: Dataset, listener: ProgressListener | None) -> dict[str, str]:
    """Train the tiny CLIP on the demo images once; return its open_clip annotator config."""
    from mitl import clip_training  # torch: only when the demo needs it

    out_dir = settings.VAR_DIR / "models" / f"clip-{dataset.name}"
    if not (out_dir / clip_training.CHECKPOINT_FILE).is_file():
        source = settings.VAR_DIR / "synthetic" / dataset.name
        clip_training.train_tiny_clip(
            source / "captions.tsv",
            source / "images",
            out_dir,
            seed=0,
            progress=_relay(listener, "training clip"),
        )
    return clip_training.trained_model_config(out_dir)


def _demo_explain(
    release: Release, dataset: Dataset, annotators: list[str], listener: ProgressListener | None
) -> tuple[str, str]:
    """Explain every demo annotator's failures and re-rank its perturbed caption queries."""
    request = ExplainRequest(
        release_dir=Path(release.path),
        truth=release_load(release.path),
        dataset=dataset,
        annotators=annotators,
        adversarial=True,
    )
    report = explain_report(request, listener=listener)
    html_path, _ = report_write(report, settings.VAR_DIR / "explain" / dataset.name)
    return str(html_path), summary_table(report)


def _summarise(batch: Batch, release: Release, dataset: Dataset) -> DemoSummary:
    stats = json.loads((Path(release.path) / STATS_FILE).read_text())
    statuses = dict(
        (status, Assignment.objects.filter(hit__batch=batch, status=status).count())
        for status in (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
    )
    summary = DemoSummary(dataset=dataset.name, batch_id=batch.pk, release_path=release.path)
    summary.counts = {
        "image queries": stats["i2t"]["queries"],
        "caption queries": stats["t2i"]["queries"],
        "candidates": stats["candidates"],
        "HITs": stats["hits"],
        "judgements": stats["judgements"],
        "approved assignments": statuses[AssignmentStatus.APPROVED],
        "rejected assignments": statuses[AssignmentStatus.REJECTED],
        "verdicts positive": stats["verdicts"]["positive"],
    }
    summary.positives = {direction: stats[direction] for direction in ("i2t", "t2i")}
    summary.agreement = _agreement_with_truth(release, dataset)
    batch.refresh_from_db()
    summary.strategy = batch_config(batch).strategy
    summary.rounds = batch.round + 1
    curation = stats.get("curation", {}).get("directions", {})
    summary.estimated_recall = {
        direction: values["estimate"]
        for direction, values in curation.items()
        if values.get("estimate") is not None
    }
    return summary


def _agreement_with_truth(release: Release, dataset: Dataset) -> dict[str, dict[str, float]]:
    """Precision and recall of the original and released positives against the synthetic truth."""
    generated = synthetic_regenerate(dataset=dataset)
    truth = truth_matrix(generated)
    image_ids = np.array([scene.image_id for scene in generated.scenes])
    caption_ids = np.array([caption.caption_id for caption in generated.captions])
    released = {
        "i2t": json.loads((Path(release.path) / I2T_FILE).read_text()),
        "t2i": json.loads((Path(release.path) / T2I_FILE).read_text()),
    }
    image_queries = [int(q) for q in released["i2t"]]
    caption_queries = [int(q) for q in released["t2i"]]
    true_pairs = [
        (int(image_ids[r]), int(caption_ids[c])) for r, c in zip(*np.nonzero(truth), strict=True)
    ]
    original_pairs = [(caption.image_id, caption.caption_id) for caption in generated.captions]
    truth_i2t, truth_t2i = positives_by_query(
        true_pairs, image_queries=image_queries, caption_queries=caption_queries
    )
    original_i2t, original_t2i = positives_by_query(
        original_pairs, image_queries=image_queries, caption_queries=caption_queries
    )
    result = {}
    for label, i2t, t2i in (
        ("original", original_i2t, original_t2i),
        ("released", released["i2t"], released["t2i"]),
    ):
        for direction, predicted, true in (("i2t", i2t, truth_i2t), ("t2i", t2i, truth_t2i)):
            agreement = set_agreement(predicted, true)
            result[f"{label} {direction}"] = {
                "precision": agreement.precision,
                "recall": agreement.recall,
                "pairs": agreement.predicted,
                "true pairs": agreement.true,
            }
    return result
