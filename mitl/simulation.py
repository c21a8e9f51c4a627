"""A simulated crowd that answers the four-level question from a known truth.

A careful worker gives the true level with probability `accuracy`; otherwise an adjacent
level along YES, WEAK_YES, WEAK_NO, NO (from an end, the only neighbour). Only a middle
level has a neighbour across the positive/negative boundary, and a careful worker picks it
less often than the one on the same side, so boundary flips happen but are rarer than
mistakes within a side. A careless worker ignores the pair: mostly YES, otherwise a
uniformly random level, and four times faster. A learning worker has not understood the
scale yet: until it has done a practice round with feedback, a `learning_gain` share of its
answers is a uniformly random level (so it fails golden pairs that a trained worker passes);
afterwards it answers like a careful worker. Follow-ups (shortcomings, wrong concepts)
come with the two middle levels only, copied from the truth when it has them, and are
listed in vocabulary order.

Pure Python: no Django import. Every draw comes from the generator passed in, so a seeded
generator replays the same answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mitl.judgements import MIDDLE_LEVELS, SHORTCOMINGS, WRONG_CONCEPTS, Level
from mitl.synthetic.truth import Truth

_ORDER: tuple[Level, ...] = (Level.YES, Level.WEAK_YES, Level.WEAK_NO, Level.NO)
# From a middle level, how often a careful worker's mistake crosses the boundary.
_CROSS_SHARE = 0.25
_CARELESS_YES = 0.6  # the rest of a careless worker's answers are uniform over the levels
_CARELESS_SPEEDUP = 0.25
_FOLLOWUP_SLOWDOWN = 1.4  # the follow-up questions take extra time
_ELAPSED_SIGMA = 0.45
# Plausible shortcomings for a middle level when the truth gives none.
_GUESSED_SHORTCOMINGS: dict[Level, dict[str, float]] = {
    Level.WEAK_YES: {"misses_main_concept": 0.45, "wrong_description": 0.45, "grammar": 0.1},
    Level.WEAK_NO: {"not_in_image": 0.5, "wrong_description": 0.4, "misses_main_concept": 0.1},
}
# The concepts a shape scene can get wrong, then the rest of the vocabulary.
_LIKELY_CONCEPTS: tuple[str, ...] = ("quantity", "color", "species", "location")
_OTHER_TEXTS: tuple[str, ...] = ("size", "wrong size", "shape outline", "hard to tell")


@dataclass(frozen=True)
class WorkerProfile:
    """A simulated worker: how often they are right, whether they care, how fast they are,
    and how much of the scale they misread before practice (`learning_gain`)."""

    name: str
    accuracy: float  # careless workers ignore it
    careless: bool = False
    median_ms: int = 4000
    learning_gain: float = 0.0  # share of random answers before the practice round

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ValueError(f"accuracy must be within [0, 1], got {self.accuracy}")
        if not 0.0 <= self.learning_gain <= 1.0:
            raise ValueError(f"learning_gain must be within [0, 1], got {self.learning_gain}")
        if self.median_ms <= 0:
            raise ValueError(f"median_ms must be positive, got {self.median_ms}")


@dataclass(frozen=True)
class Answer:
    """One simulated answer, shaped like what the crowd UI submits."""

    level: Level
    shortcomings: tuple[str, ...]
    wrong_concepts: tuple[str, ...]
    other_text: str
    elapsed_ms: int


def crowd_profiles(
    n_workers: int,
    *,
    careless_share: float = 0.1,
    accuracy_range: tuple[float, float] = (0.85, 0.98),
    seed: int = 0,
    learning_share: float = 0.0,
    learning_gain: float = 0.4,
) -> list[WorkerProfile]:
    """Draw `n_workers` profiles, a `careless_share` of them careless (rounded), and a
    `learning_share` of the careful ones learning (rounded; see `WorkerProfile`)."""
    if n_workers < 0 or not 0.0 <= careless_share <= 1.0:
        raise ValueError("n_workers must be >= 0 and careless_share within [0, 1]")
    if not 0.0 <= learning_share <= 1.0:
        raise ValueError(f"learning_share must be within [0, 1], got {learning_share}")
    low, high = accuracy_range
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"accuracy_range must be within [0, 1] and ordered, got {accuracy_range}")
    rng = np.random.default_rng(seed)
    n_careless = round(n_workers * careless_share)
    careless = set(rng.choice(n_workers, size=n_careless, replace=False).tolist())
    accuracies = rng.uniform(low, high, size=n_workers)
    medians = rng.lognormal(math.log(4000), 0.25, size=n_workers)
    careful = [i for i in range(n_workers) if i not in careless]
    # Drawn after the other draws, so a crowd without learners stays the one it always was.
    n_learning = round(len(careful) * learning_share)
    learning = (
        set(rng.choice(careful, size=n_learning, replace=False).tolist()) if careful else set()
    )
    return [
        WorkerProfile(
            name=f"sim-worker-{i + 1:03d}",
            accuracy=round(float(accuracies[i]), 4),
            careless=i in careless,
            median_ms=max(500, round(float(medians[i]))),
            learning_gain=learning_gain if i in learning else 0.0,
        )
        for i in range(n_workers)
    ]


def oracle_truth(is_positive: bool) -> Truth:
    """Return the truth of a pair known only as in or out of the reference set."""
    return Truth(Level.YES if is_positive else Level.NO)


def _mistake(level: Level, rng: np.random.Generator) -> Level:
    """Return a level one step away, staying on the same side more often."""
    i = _ORDER.index(level)
    if i == 0:
        return _ORDER[1]
    if i == len(_ORDER) - 1:
        return _ORDER[-2]
    same_side = i - 1 if i == 1 else i + 1
    cross = i + 1 if i == 1 else i - 1
    return _ORDER[cross if rng.random() < _CROSS_SHARE else same_side]


def _careless_level(rng: np.random.Generator) -> Level:
    if rng.random() < _CARELESS_YES:
        return Level.YES
    return _ORDER[int(rng.integers(len(_ORDER)))]


def _guess_concepts(rng: np.random.Generator) -> tuple[str, ...]:
    if rng.random() < 0.1:
        return ("other",)
    n = 2 if rng.random() < 0.2 else 1
    picked = set(rng.choice(len(_LIKELY_CONCEPTS), size=n, replace=False).tolist())
    return tuple(name for i, name in enumerate(_LIKELY_CONCEPTS) if i in picked)


def _guess_followups(level: Level, rng: np.random.Generator) -> tuple[tuple[str, ...], ...]:
    """Return plausible (shortcomings, wrong concepts) for a middle level."""
    weights = _GUESSED_SHORTCOMINGS[level]
    names = list(weights)
    p = np.array([weights[name] for name in names])
    n = 2 if rng.random() < 0.2 else 1
    picked = set(rng.choice(len(names), size=n, replace=False, p=p / p.sum()).tolist())
    chosen = {names[i] for i in picked}
    shortcomings = tuple(name for name in SHORTCOMINGS if name in chosen)
    concepts = _guess_concepts(rng) if "wrong_description" in chosen else ()
    return shortcomings, tuple(name for name in WRONG_CONCEPTS if name in concepts)


def _elapsed_ms(median_ms: float, rng: np.random.Generator) -> int:
    return max(1, round(float(rng.lognormal(math.log(median_ms), _ELAPSED_SIGMA))))


def answer(
    truth: Truth,
    worker: WorkerProfile,
    rng: np.random.Generator,
    *,
    followups: bool = True,
    trained: bool = False,
) -> Answer:
    """Simulate `worker` answering a pair whose truth is `truth`; `trained`: after a
    practice round with feedback (only a learning worker answers differently)."""
    if worker.careless:
        level = _careless_level(rng)
    elif not trained and worker.learning_gain and rng.random() < worker.learning_gain:
        level = _ORDER[int(rng.integers(len(_ORDER)))]  # misread the scale
    elif rng.random() < worker.accuracy:
        level = truth.level
    else:
        level = _mistake(truth.level, rng)
    shortcomings: tuple[str, ...] = ()
    concepts: tuple[str, ...] = ()
    other_text = ""
    asked = followups and level in MIDDLE_LEVELS
    if asked:
        if truth.shortcomings and not worker.careless:
            shortcomings, concepts = truth.shortcomings, truth.wrong_concepts
        else:
            shortcomings, concepts = _guess_followups(level, rng)
        if "wrong_description" in shortcomings and not concepts:
            # The UI requires a concept with this shortcoming; a hand-made truth may lack one.
            concepts = _guess_concepts(rng)
        if "other" in concepts:
            other_text = _OTHER_TEXTS[int(rng.integers(len(_OTHER_TEXTS)))]
    shortcomings = tuple(name for name in SHORTCOMINGS if name in shortcomings)
    concepts = tuple(name for name in WRONG_CONCEPTS if name in concepts)
    median = worker.median_ms * (_CARELESS_SPEEDUP if worker.careless else 1.0)
    median *= _FOLLOWUP_SLOWDOWN if asked else 1.0
    return Answer(level, shortcomings, concepts, other_text, _elapsed_ms(median, rng))
