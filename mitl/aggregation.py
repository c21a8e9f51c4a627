"""Aggregate the judgements of each pair into a verdict, under one of four rules.

- `eccv` (ECCV Caption): "100% YES" and "Partially YES" are positive votes; the label is
  the majority of votes. A tie stays negative: a benchmark is hurt more by a false
  positive than by a missed one.
- `strict`: only "100% YES" is a positive vote; majority, ties negative.
- `graded`: the mean graded score (ECCV Caption eq. E.4: 1, 0.5, 0, 0) is positive at
  `GRADED_THRESHOLD` (0.5) or above, i.e. when the answers average at least "Partially
  YES". Being a mean, not a vote, one "100% YES" and one "100% NO" make a positive.
- `dawid_skene`: Dawid and Skene's EM model (crowd-kit) over the ECCV yes/no labels. It
  learns a confusion matrix per worker from every answer of the batch, with golden pairs
  as known labels, so a reliable worker counts for more and a worker who answers the
  opposite of the truth is read the other way round.

Every verdict keeps the answer distribution, the graded score (whatever the rule, so
graded evaluation can use it) and a confidence: the share of answers agreeing with the
label for the three voting rules, the posterior probability of the label for Dawid-Skene.

Pure Python; crowd-kit and pandas are imported only when Dawid-Skene runs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .judgements import GRADED_SCORE, POSITIVE_LEVELS, Level

RULES: tuple[str, ...] = ("eccv", "strict", "graded", "dawid_skene")
RULE_DESCRIPTIONS: dict[str, str] = {
    "eccv": 'majority of "100% YES" and "Partially YES" answers; ties negative',
    "strict": 'majority of "100% YES" answers; ties negative',
    "graded": "mean graded score (1, 0.5, 0, 0) of at least 0.5",
    "dawid_skene": (
        "Dawid-Skene posterior of the ECCV yes/no label above 0.5, golden pairs as known labels"
    ),
}
GRADED_THRESHOLD = 0.5
# Fixed EM settings: crowd-kit's Dawid-Skene has no randomness, so fixed iterations and
# tolerance over rows in a canonical order give the same verdicts on every run.
DS_MAX_ITERATIONS = 100
DS_TOLERANCE = 1e-7


@dataclass(frozen=True)
class VerdictSpec:
    is_positive: bool
    score: float  # graded relevance in [0, 1]
    confidence: float  # share of answers agreeing, or the posterior of the label
    distribution: dict[str, int]


@dataclass(frozen=True)
class WorkerAnswer:
    """One answer of one worker for one task (a pair to judge, or a golden pair)."""

    task: Hashable
    worker: str
    level: Level


def _counts(levels: Sequence[Level | str]) -> Counter[Level]:
    if not levels:
        raise ValueError("cannot aggregate a pair without judgements")
    return Counter(Level(level) for level in levels)


def _distribution(counts: Counter[Level]) -> dict[str, int]:
    return {level.value: counts.get(level, 0) for level in Level}


def _score(counts: Counter[Level]) -> float:
    return sum(GRADED_SCORE[level] * n for level, n in counts.items()) / counts.total()


def _majority(counts: Counter[Level], positive_levels: Iterable[Level]) -> VerdictSpec:
    positive = frozenset(positive_levels)
    total = counts.total()
    positive_votes = sum(n for level, n in counts.items() if level in positive)
    negative_votes = total - positive_votes
    is_positive = positive_votes > negative_votes
    agreeing = positive_votes if is_positive else negative_votes
    return VerdictSpec(
        is_positive=is_positive,
        score=_score(counts),
        confidence=agreeing / total,
        distribution=_distribution(counts),
    )


def eccv_verdict(levels: Sequence[Level | str]) -> VerdictSpec:
    """Return the majority ECCV verdict of a non-empty list of answers."""
    return _majority(_counts(levels), POSITIVE_LEVELS)


def strict_verdict(levels: Sequence[Level | str]) -> VerdictSpec:
    """Return the majority verdict counting only "100% YES" as a positive vote."""
    return _majority(_counts(levels), {Level.YES})


def graded_verdict(
    levels: Sequence[Level | str], *, threshold: float = GRADED_THRESHOLD
) -> VerdictSpec:
    """Return the verdict of the mean graded score against `threshold`.

    The confidence is the share of answers whose own grade falls on the label's side of
    the threshold.
    """
    counts = _counts(levels)
    score = _score(counts)
    is_positive = score >= threshold
    agreeing = sum(
        n for level, n in counts.items() if (GRADED_SCORE[level] >= threshold) == is_positive
    )
    return VerdictSpec(
        is_positive=is_positive,
        score=score,
        confidence=agreeing / counts.total(),
        distribution=_distribution(counts),
    )


PAIR_RULES: dict[str, Callable[[Sequence[Level | str]], VerdictSpec]] = {
    "eccv": eccv_verdict,
    "strict": strict_verdict,
    "graded": graded_verdict,
}


def aggregate(
    rule: str,
    answers: Iterable[WorkerAnswer],
    *,
    known: Mapping[Hashable, bool] | None = None,
) -> dict[Hashable, VerdictSpec]:
    """Return a verdict for every task with answers, under `rule`.

    `known` maps golden tasks to their true label (True for a golden TP). Dawid-Skene uses
    them to learn how reliable each worker is; the voting rules ignore them. Known tasks
    get no verdict.
    """
    if rule not in RULES:
        raise ValueError(f"unknown aggregation rule {rule!r} (rules: {', '.join(RULES)})")
    known = known or {}
    if rule == "dawid_skene":
        return dawid_skene_verdicts(answers, known=known)
    levels: dict[Hashable, list[Level]] = defaultdict(list)
    for answer in answers:
        if answer.task not in known:
            levels[answer.task].append(Level(answer.level))
    verdict = PAIR_RULES[rule]
    return {task: verdict(task_levels) for task, task_levels in levels.items()}


def dawid_skene_verdicts(
    answers: Iterable[WorkerAnswer],
    *,
    known: Mapping[Hashable, bool] | None = None,
    max_iterations: int = DS_MAX_ITERATIONS,
    tolerance: float = DS_TOLERANCE,
) -> dict[Hashable, VerdictSpec]:
    """Return the Dawid-Skene verdict of every task that is not known.

    Answers become ECCV yes/no labels. Known tasks (golden pairs) are clamped to their
    label at each EM step, which anchors each worker's confusion matrix to the truth. The
    label is positive when its posterior exceeds 0.5 (an exact tie stays negative), and
    the confidence is the posterior of the chosen label.
    """
    known = known or {}
    answers = list(answers)
    levels: dict[Hashable, list[Level]] = defaultdict(list)
    for answer in answers:
        levels[answer.task].append(Level(answer.level))
    unknown = [task for task in levels if task not in known]
    if not unknown:
        return {}
    posterior = _ds_posterior_positive(answers, known, max_iterations, tolerance)
    verdicts = {}
    for task in unknown:
        counts = Counter(levels[task])
        p_positive = posterior[task]
        is_positive = p_positive > 0.5
        verdicts[task] = VerdictSpec(
            is_positive=is_positive,
            score=_score(counts),
            confidence=min(1.0, max(0.0, p_positive if is_positive else 1.0 - p_positive)),
            distribution=_distribution(counts),
        )
    return verdicts


def _ds_posterior_positive(
    answers: Sequence[WorkerAnswer],
    known: Mapping[Hashable, bool],
    max_iterations: int,
    tolerance: float,
) -> dict[Hashable, float]:
    """Run crowd-kit's Dawid-Skene; return P(positive) per task."""
    labels = {int(Level(a.level) in POSITIVE_LEVELS) for a in answers}
    if len(labels) == 1:
        # Nobody ever gave the other label: the data holds no evidence for it, and
        # crowd-kit cannot build a two-class confusion matrix.
        only = float(labels.pop())
        return {a.task: only for a in answers}

    import warnings

    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    # Integer codes in a canonical order, so the result does not depend on input order.
    tasks = sorted({a.task for a in answers}, key=repr)
    task_code = {task: i for i, task in enumerate(tasks)}
    worker_code = {w: i for i, w in enumerate(sorted({a.worker for a in answers}))}
    rows = sorted(
        (task_code[a.task], worker_code[a.worker], int(Level(a.level) in POSITIVE_LEVELS))
        for a in answers
    )
    data = pd.DataFrame(rows, columns=["task", "worker", "label"])
    golden = [(task_code[t], int(label)) for t, label in known.items() if t in task_code]
    true_labels = (
        pd.Series(dict(sorted(golden)), name="true_label", dtype="int64") if golden else None
    )
    model = DawidSkene(n_iter=max_iterations, tol=tolerance)
    with warnings.catch_warnings():
        # crowd-kit 1.4 still passes `inplace=` and `copy=`, which pandas 3 deprecates.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"crowdkit\.")
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"crowdkit\.")
        probas = model.fit_predict_proba(data, true_labels)
    positive = probas[1] if 1 in probas.columns else pd.Series(0.0, index=probas.index)
    return {tasks[code]: float(p) for code, p in positive.items()}
