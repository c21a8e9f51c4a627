"""A small hand-built explanation and `explain` report, shaped as mitl.explain writes them.

Shared by the HTML renderer's tests, the leaderboard's Explain page and the API, so none of
them needs the real pipeline (concepts, WordNet, annotators) to run.
"""

from __future__ import annotations

import copy
from typing import Any

SCRIPT_CAPTION = "a dog <script>alert('x')</script> chasing a ball"
NO_SRC_CAPTION = "a dog catching a frisbee & more"
IMAGE_FILE = "images/1.png"
IMAGE_SRC = "/media/images/1.png"  # as the `explain` command's report would link it


def failure_metrics(**overrides: Any) -> dict[str, Any]:
    """Return one failure's metrics: dog & park shared, ball swapped for a frisbee."""
    metrics = {
        "ca": 2 / 3,
        "ncs": 0.25,
        "ce": 1,
        "sd": 0.5,
        "sd_binary": 1,
        "sd_matches": 2,
        "sd_rate": 0.5,
        "common": ["dog", "park"],
        "missing": ["ball"],
        "extra": ["frisbee"],
        "ncs_pairs": [{"truth": "ball", "retrieved": "frisbee", "weight": 0.25}],
        "count_differences": [["dog", 2, 1]],
    }
    return metrics | overrides


def summary(*, ca: float | None = 2 / 3) -> dict[str, Any]:
    """Return a metric summary of one failure (`summarise_metrics`)."""
    share_edges = [round(i / 10, 6) for i in range(11)]
    share_counts = [0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    return {
        "means": {"ca": ca, "ncs": 0.25, "ce": 1.0, "sd": 0.5, "sd_rate": 0.5},
        "defined": {"ca": 1, "ncs": 1, "ce": 1, "sd": 1, "sd_rate": 1},
        "histograms": {
            "ca": {"edges": share_edges, "counts": share_counts},
            "ncs": {"edges": share_edges, "counts": [0, 0, 1, 0, 0, 0, 0, 0, 0, 0]},
            "ce": {"edges": [0.0, 1.0], "counts": [1]},
            "sd": {"edges": [0.0, 1.0], "counts": [1]},
            "sd_rate": {"edges": share_edges, "counts": [0, 0, 0, 0, 0, 1, 0, 0, 0, 0]},
        },
        "object_hit": 2,
        "object_miss": 1,
        "matched_share": 2 / 3,
        "enumeration_disagreement": 1 / 3,
    }


def direction_result(direction: str, *, informed: bool = True) -> dict[str, Any]:
    """Return one direction's explanation with one worst failure (images 1 → 2)."""
    query, retrieved = (10, 2) if direction == "t2i" else (1, 20)
    return {
        "queries": 4,
        "failures": 1,
        "failure_rate": 0.25,
        "explained": 1,
        "agnostic": summary(),
        "informed": summary(ca=0.5) if informed else None,
        "confusions": {
            "missed": [{"concept": "ball", "failures": 1}],
            "swapped": [{"truth": "ball", "retrieved": "frisbee", "failures": 1}],
        },
        "worst": [
            {
                "direction": direction,
                "query": query,
                "retrieved": retrieved,
                "truth_image": 1,
                "retrieved_image": 2,
                "truth_rank": 3,
                "agnostic": failure_metrics(),
                "informed": failure_metrics(ca=0.5, common=["dog"]) if informed else None,
            }
        ],
    }


def explanation_block(*, informed: bool = True) -> dict[str, Any]:
    """Return a model's {t2i, i2t} explanation."""
    return {d: direction_result(d, informed=informed) for d in ("t2i", "i2t")}


def images(*, stored: bool = False) -> dict[str, Any]:
    """Return the two images the failures show: one with a file, one text only.

    `stored`: as an explanation is stored, with file names and no URL yet.
    """
    return {
        "1": {
            "src": None if stored else IMAGE_SRC,
            "file": IMAGE_FILE,
            "caption": SCRIPT_CAPTION,
            "concepts": {"ball": 1, "dog": 2, "park": 1},
            "source": "instances",
        },
        "2": {
            "src": None,
            "file": "",
            "caption": NO_SRC_CAPTION,
            "concepts": {"dog": 1, "frisbee": 1, "park": 1},
            "source": "instances",
        },
    }


def evaluation_explanation() -> dict[str, Any]:
    """Return what a leaderboard submission stores in `Evaluation.explanation` (no URLs)."""
    return {
        "dataset": "tiny",
        "concept_sources": {"instances": 2},
        "explanation": explanation_block(),
        "images": images(stored=True),
    }


def moved(kind: str, *, lower: int, perturbed: int = 10) -> dict[str, Any]:
    """Return one perturbation kind's movement (`mitl.explain.reranking.movement`)."""
    share = lower / perturbed
    blind = share < 0.2
    words = "blind to" if blind else "reads"
    return {
        "kind": kind,
        "perturbed": perturbed,
        "perturbed_share": 0.5,
        "lower": lower,
        "higher": 0,
        "same": perturbed - lower,
        "shares": {"lower": share, "higher": 0.0, "same": 1 - share},
        "before": {"recall@1": 0.6, "recall@5": 0.9, "recall@10": 1.0, "mrr": 0.7},
        "after": {"recall@1": 0.4, "recall@5": 0.8, "recall@10": 1.0, "mrr": 0.55},
        "delta": {"recall@1": -0.2, "recall@5": -0.1, "recall@10": 0.0, "mrr": -0.15},
        "blind": blind,
        "verdict": f"{words} {kind}: the positive moved lower for {share:.0%} of {perturbed}",
        "examples": [
            {
                "query": 10,
                "original": "a red <b>car</b>",
                "perturbed": "a blue <b>car</b>",
                "rank_before": 1,
                "rank_after": 7,
            }
        ],
        "unmoved": [],
    }


def report(**overrides: Any) -> dict[str, Any]:
    """Return a whole `explain` report: a rankings model and an annotator with re-ranking."""
    full = {
        "release": "var/releases/tiny/1",
        "dataset": "tiny",
        "concept_sources": {"instances": 2},
        "settings": {"worst": 12, "size_threshold": 1.0, "seed": 0, "kinds": ["color_all"]},
        "models": [
            {
                "name": "model",
                "source": "rankings",
                "explanation": explanation_block(),
                "adversarial": None,
            },
            {
                "name": "bow",
                "source": "annotator (bow)",
                "explanation": explanation_block(),
                "adversarial": {
                    "queries": 20,
                    "kinds": {
                        "color_all": moved("color_all", lower=1),
                        "size": moved("size", lower=6),
                    },
                },
            },
        ],
        "crowd": {
            "bow": {
                "judgements": 40,
                "wrong_description": 8,
                "wrong_concepts": {"quantity": 0.25, "color": 0.5, "species": None},
            },
            "clip": {
                "judgements": 30,
                "wrong_description": 0,
                "wrong_concepts": {"quantity": None, "color": None, "species": None},
            },
        },
        "images": images(),
    }
    return copy.deepcopy(full | overrides)
