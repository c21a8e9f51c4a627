"""Batch configuration: defaults, validation and clear messages for bad values.

Pure Python, so the command line, the API and the services validate the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Protocol

from .aggregation import RULES as AGGREGATION_RULES  # eccv, strict, graded, dawid_skene
from .curation.budget import PRIOR_REPOST_SHARE

# pass → approve, fail → flag for a person | pass → approve, fail → reject at once |
# every submission waits for a person (the golden result is shown to the reviewer)
GOLDEN_POLICIES = ("approve_or_flag", "approve_or_reject", "review_all")
# fixed: every annotator's top-k judged once (ECCV Caption's protocol) | adaptive: rounds
# chosen by an adjudication policy until the budget is spent (docs/curation.md)
STRATEGIES = ("fixed", "adaptive")
# bandit: annotators as arms per query (Losada et al.) | depth: per-query depth on the
# reciprocal-rank fusion of every annotator's ranking (mitl.curation.policies) | learned:
# a logistic fusion of the annotators' ranks refit every round (mitl.curation.learned)
ADJUDICATIONS = ("bandit", "depth", "learned")
ADAPTIVE_RANKING_DEPTH = 100  # how deep adaptive rounds may draw when ranking_depth is 0


class ConfigError(ValueError):
    """A batch configuration value is missing or out of range; the message says how to fix it.

    `key` names the offending configuration key (None when the config as a whole is wrong),
    so forms and the API put the message beside the field it is about.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class BatchConfig:
    """How a batch samples queries, retrieves, packs HITs and aggregates."""

    annotators: tuple[str, ...]
    n_image_queries: int = 100
    n_caption_queries: int = 100
    k: int = 5  # candidates per query and annotator
    golden_negative_depth: int = 25  # golden TN: outside every annotator's top-N
    hit_size: int = 16  # pairs to judge per HIT
    golden_tp: int = 1
    golden_tn: int = 1
    assignments_per_hit: int = 1
    followups: bool = True  # ask why for the two middle answers
    assignment_minutes: int = 30  # an accepted HIT not submitted by then goes back to the pool
    golden_policy: str = "approve_or_flag"  # what the golden check decides at submission
    # A golden pair failed by this many distinct workers who pass their other goldens is
    # suspended (mitl.quality.golden_suspect): it is likely wrong itself. 0: never.
    golden_suspend_after: int = 3
    aggregation: str = "eccv"  # one of mitl.aggregation.RULES
    seed: int = 0
    strategy: str = "fixed"  # one of STRATEGIES
    adjudication: str = "bandit"  # adaptive only: one of ADJUDICATIONS
    # Adaptive: every judgement the batch may spend, golden pairs and re-posted work
    # included (mitl.costs turns dollars into judgements); 0 = no budget (fixed only).
    budget_judgements: int = 0
    round_size: int = 0  # adaptive: judgements per round; 0 = a fifth of the budget
    ranking_depth: int = 0  # rankings kept this deep; 0 = golden depth (fixed) or 100
    # Adaptive: the share of each round's pairs drawn at random from the unjudged pairs, to
    # estimate how many positives remain (mitl.curation.estimate).
    estimate_share: float = 0.1
    # Adaptive: stop the rounds once every direction's lower 95% bound of the estimated
    # recall reaches this (a certified recall, pipeline.curation.rounds_continue); 0 = none.
    target_recall: float = 0.0
    # Adaptive: before each round, fit the learner annotator on the verdicts so far and add
    # its ranking of every query (mitl.curation.crowd_learner); off by default.
    crowd_learner: bool = False
    # The queries of this positive set (its `queries`, e.g. ECCV Caption's) instead of a
    # random sample; "" = sample (pipeline.launch.batch_create_with_queries).
    queries_from: str = ""
    # Caption proxies (mitl.relevance.proxies) whose graded qrels the release carries and
    # whose graded metrics (nDCG, NCS, semantic recall) the leaderboard shows.
    relevance: tuple[str, ...] = ()
    # A qualification round: each try shows this many pairs with known answers, each answer
    # followed by feedback, before a worker gets the batch's HITs (annotation.qualification
    # .attempts); 0 = none. Its pool holds `qualification_pool` pairs, so no try of a worker
    # shows a pair whose answer an earlier try told (mitl.qualification.qualification_pool_needs).
    qualification_pairs: int = 0
    qualification_pass: float = 0.8  # share of right answers that passes the round
    qualification_attempts: int = 2  # tries a worker gets before the batch stays closed

    @property
    def qualification_required(self) -> bool:
        return self.qualification_pairs > 0

    @property
    def qualification_pool(self) -> int:
        """The fewest pairs the round's pool holds: a try's pairs times the tries."""
        return self.qualification_pairs * self.qualification_attempts

    @property
    def adaptive(self) -> bool:
        return self.strategy == "adaptive"

    @property
    def depth(self) -> int:
        """How deep every annotator's ranking is kept (and adaptive rounds may draw)."""
        wanted = self.ranking_depth or (ADAPTIVE_RANKING_DEPTH if self.adaptive else 0)
        return max(self.k, self.golden_negative_depth, wanted)

    @property
    def judgements_per_round(self) -> int:
        """`round_size`, or a fifth of the budget but at least one HIT with its reserve."""
        return self.round_size or max(self.budget_judgements // 5, self.judgements_per_hit)

    @property
    def judgements_per_hit(self) -> int:
        """What planning sets aside for one HIT: its judgements plus the re-post reserve."""
        per_hit = self.items_per_hit * self.assignments_per_hit
        return math.ceil(per_hit * (1 + PRIOR_REPOST_SHARE))

    @property
    def items_per_hit(self) -> int:
        return self.hit_size + self.golden_tp + self.golden_tn

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["annotators"] = list(self.annotators)
        data["relevance"] = list(self.relevance)
        return data


_INT_RANGES: dict[str, tuple[int, int]] = {
    "n_image_queries": (0, 1_000_000),
    "n_caption_queries": (0, 1_000_000),
    "k": (1, 100),
    "golden_negative_depth": (1, 1000),
    "hit_size": (1, 200),
    "golden_tp": (0, 10),
    "golden_tn": (0, 10),
    "assignments_per_hit": (1, 50),
    "golden_suspend_after": (0, 50),
    "assignment_minutes": (1, 7 * 24 * 60),
    "seed": (0, 2**31 - 1),
    "budget_judgements": (0, 100_000_000),
    "round_size": (0, 100_000_000),
    "ranking_depth": (0, 1000),
    "qualification_pairs": (0, 50),
    "qualification_attempts": (1, 10),
}
# The largest qualification pool a config can ask for (an admin's CSV may hold as many).
QUALIFICATION_POOL_MAX = (
    _INT_RANGES["qualification_pairs"][1] * _INT_RANGES["qualification_attempts"][1]
)
_CHOICES: dict[str, tuple[str, ...]] = {
    "aggregation": AGGREGATION_RULES,
    "golden_policy": GOLDEN_POLICIES,
    "strategy": STRATEGIES,
    "adjudication": ADJUDICATIONS,
}


def parse_batch_config(raw: Mapping[str, Any]) -> BatchConfig:
    """Validate a raw mapping (from JSON) and return a BatchConfig with defaults filled in."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"batch config must be a JSON object, got {type(raw).__name__}")
    known = {f.name for f in fields(BatchConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(
            f"batch config: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})",
            key=unknown[0],
        )
    values: dict[str, Any] = dict(raw)
    values["annotators"] = _parse_annotators(raw.get("annotators"))
    for name, (low, high) in _INT_RANGES.items():
        if name in values:
            values[name] = _parse_int(name, values[name], low, high)
    for name in ("followups", "crowd_learner"):
        if name in values and not isinstance(values[name], bool):
            raise ConfigError(
                f"batch config: `{name}` must be true or false (got {values[name]!r})",
                key=name,
            )
    for name, choices in _CHOICES.items():
        if name in values and values[name] not in choices:
            raise ConfigError(
                f"batch config: `{name}` must be one of {', '.join(choices)} "
                f"(got {values[name]!r})",
                key=name,
            )
    if "queries_from" in values and not isinstance(values["queries_from"], str):
        raise ConfigError(
            f"batch config: `queries_from` must be the name of a positive set (got "
            f"{values['queries_from']!r})",
            key="queries_from",
        )
    if "relevance" in values:
        values["relevance"] = parse_relevance(values["relevance"])
    if "estimate_share" in values:
        values["estimate_share"] = _parse_share("estimate_share", values["estimate_share"])
    if "target_recall" in values:
        values["target_recall"] = _parse_share(
            "target_recall", values["target_recall"], low=0.0, high=0.99
        )
    if "qualification_pass" in values:
        values["qualification_pass"] = _parse_share(
            "qualification_pass", values["qualification_pass"], low=0.5, high=1.0
        )
    config = BatchConfig(**values)
    if config.n_image_queries + config.n_caption_queries == 0:
        raise ConfigError(
            "batch config: ask for at least one query (n_image_queries or n_caption_queries)"
        )
    if config.golden_negative_depth < config.k:
        raise ConfigError(
            f"batch config: `golden_negative_depth` ({config.golden_negative_depth}) must be at "
            "least "
            f"`k` ({config.k})",
            key="golden_negative_depth",
        )
    if config.adaptive:
        _check_adaptive(config)
    if config.target_recall and not (config.adaptive and config.estimate_share > 0):
        raise ConfigError(
            "batch config: `target_recall` needs the adaptive strategy with an "
            "`estimate_share` above 0 (the recall is estimated from its random sample)",
            key="target_recall",
        )
    return config


def _check_adaptive(config: BatchConfig) -> None:
    """An adaptive batch needs a budget, and rounds, that pay for at least one HIT each.

    One HIT counts with the reserve rounds keep for re-posted work (before any review),
    so a batch that passes here can always buy its first round.
    """
    per_hit = config.judgements_per_hit
    if config.budget_judgements < per_hit:
        raise ConfigError(
            "batch config: the adaptive strategy needs `budget_judgements` of at least one "
            f"HIT's judgements with the re-post reserve ({config.items_per_hit} pairs x "
            f"{config.assignments_per_hit} assignments + "
            f"{PRIOR_REPOST_SHARE:.0%} = {per_hit}; got {config.budget_judgements})",
            key="budget_judgements",
        )
    if config.judgements_per_round < per_hit:
        raise ConfigError(
            f"batch config: `round_size` ({config.judgements_per_round} judgements) must pay "
            f"for at least one HIT with the re-post reserve ({per_hit} judgements)",
            key="round_size",
        )


def _parse_share(name: str, value: Any, *, low: float = 0.0, high: float = 0.5) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"batch config: `{name}` must be a number (got {value!r})", key=name)
    if not low <= value <= high:
        raise ConfigError(
            f"batch config: `{name}` must be between {low:g} and {high:g} (got {value})", key=name
        )
    return float(value)


def parse_relevance(value: Any) -> tuple[str, ...]:
    """Check a list of relevance proxies: cheap, known, each once, runnable here (or
    `calibrated`)."""
    # Here, not at the top: the proxies pull in scipy and the text embedders (about 0.8 s),
    # and every process reads this module at start-up; there is no import cycle.
    from mitl.relevance.proxies import PROXIES, proxy_unavailable

    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"batch config: `relevance` must be a list of proxy names (got {value!r})",
            key="relevance",
        )
    # "calibrated": the dataset's stored calibrated model, looked up when the release is made.
    cheap = [*(name for name, spec in PROXIES.items() if spec.cheap), "calibrated"]
    unknown = [name for name in value if name not in cheap]
    if unknown or len(set(value)) != len(value):
        raise ConfigError(
            f"batch config: `relevance` names proxies among {', '.join(cheap)}, each once "
            f"(got {list(value)!r}; meteor scores pair by pair, too slow for a whole corpus)",
            key="relevance",
        )
    for name in value:
        missing = None if name == "calibrated" else proxy_unavailable(name)
        if missing:
            raise ConfigError(f"batch config: `relevance`: {missing}", key="relevance")
    return tuple(value)


def _parse_annotators(value: Any) -> tuple[str, ...]:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(v, str) for v in value)
    ):
        raise ConfigError(
            "batch config: `annotators` must be a non-empty list of annotator names (got "
            f"{value!r})",
            key="annotators",
        )
    if len(set(value)) != len(value):
        raise ConfigError(
            f"batch config: `annotators` lists a name twice ({value!r})", key="annotators"
        )
    return tuple(value)


def _parse_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"batch config: `{name}` must be an integer (got {value!r})", key=name)
    if not low <= value <= high:
        raise ConfigError(
            f"batch config: `{name}` must be between {low} and {high} (got {value})", key=name
        )
    return value


class HasConfig(Protocol):
    """Anything that stores a raw batch configuration (a `Batch` row, for one)."""

    config: Mapping[str, Any]


def budgetless(raw: Any) -> bool:
    """Say whether a raw config is adaptive but names no budget (enough to plan budgets)."""
    return (
        isinstance(raw, Mapping)
        and raw.get("strategy") == "adaptive"
        and not raw.get("budget_judgements")
    )


def parse_planning_config(raw: Mapping[str, Any]) -> BatchConfig:
    """Parse a config whose budgets are to be compared: an adaptive one may leave it out.

    Everything else is checked as `parse_batch_config` does; the budget comes back as 0.
    """
    if not budgetless(raw):
        return parse_batch_config(raw)
    most = _INT_RANGES["budget_judgements"][1]  # passes the adaptive checks, then is dropped
    return replace(parse_batch_config({**raw, "budget_judgements": most}), budget_judgements=0)


def batch_config(batch: HasConfig) -> BatchConfig:
    """Return a batch's configuration, checked and with every default filled in.

    The one way to read a stored batch's settings: nobody reads `batch.config` with
    `.get()` and a default of its own, so a default changes here and only here.
    A hand-out and a submission read it about five times per HIT, so a checked config is
    kept by its JSON text: the same text always checks the same (`relevance` aside, whose
    proxies' availability is checked every time).
    """
    raw = batch.config
    if not isinstance(raw, Mapping) or raw.get("relevance"):
        return parse_batch_config(raw)
    try:
        key = json.dumps(raw, sort_keys=True)
    except (TypeError, ValueError):  # not JSON (a value set in memory): checked as it is
        return parse_batch_config(raw)
    parsed = _CHECKED.get(key)
    if parsed is None:
        parsed = parse_batch_config(raw)  # a bad config raises, and is never kept
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[key] = parsed
    return parsed


_CHECKED: dict[str, BatchConfig] = {}  # checked configs by their JSON text (batch_config)
_CHECKED_MAX = 512  # batches' configs kept at most; then the store starts again
