"""Evaluate one model's rankings on a release: read and check the files, compute every metric.

Pure Python (no Django); `python manage.py evaluate` and the leaderboard call it.

Inputs
    A release directory: `image_to_caption.json` = {"<image id>": [caption ids]} and
    `caption_to_image.json` = {"<caption id>": [image ids]}, whose keys are the queries
    (a query may have no positive), and optionally `verdicts.csv` (`mitl.releases`).
    Rankings: {"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>":
    [image ids, best first]}}.

Checks (an `EvaluationError` that names the file and what is wrong): both directions are
present; ids are integers; no ranking lists a target twice; every query of the release is
ranked; a ranked query that is not a query of the release is refused, unless the rankings
cover a whole split (below). `mitl.metrics` then refuses rankings too short for a metric.

Gains for nDCG
    With `verdicts.csv`, a pair that has a verdict row gains its `score` (the crowd's
    graded relevance in [0, 1]: 1 per "100% YES", 0.5 per "Partially YES", 0 otherwise,
    averaged; ECCV Caption eq. E.4), whether or not the verdict made it a positive, and a
    positive of the ECCV-format files without a verdict row (an original or imported
    positive) gains 1.0. Without `verdicts.csv` the gains are binary: 1 per positive.
    Positives for every other metric are the ECCV-format files, unchanged.

COCO 5K / 1K recalls
    They rank every caption and image of a split (e.g. the COCO 5K test split), not only the
    release's queries, against the original links. Given a `CaptionSplit` (captions in any
    order, each with its own image; the images' split order is their first appearance)
    and rankings for every image (i2t) and caption (t2i) of it, the result adds
    `coco_5k_recall@K` and `coco_1k_recall@K` (1K: 5 folds of whole images, see
    `mitl.metrics`); otherwise, or when the split has fewer images than folds, they are
    not defined for these rankings and left out.

Output
    {"i2t": {...}, "t2i": {...}}, each with `recall@1/5/10`, `r_precision`, `map_at_r`,
    `pmrp`, `ndcg@10`, then the COCO recalls when defined, then `queries` (queries scored:
    those with a positive) and `queries_without_positives` (ranked but not scored). A
    metric over no query is None.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mitl import metrics
from mitl.releases import I2T_FILE, T2I_FILE, VERDICTS_FILE

DIRECTIONS: tuple[str, ...] = ("i2t", "t2i")
KS: tuple[int, ...] = (1, 5, 10)
NDCG_K = 10
COUNT_KEYS: tuple[str, ...] = ("queries", "queries_without_positives")
VERDICT_NEEDS: tuple[str, ...] = ("image_id", "caption_id", "score")
_ID = re.compile(r"-?[0-9]+")
ID_MIN, ID_MAX = -(2**63), 2**63 - 1  # ids are stored and ranked as int64

RankingsByDirection = dict[str, dict[int, list[int]]]  # {"i2t": {query: ranking}, "t2i": …}


class EvaluationError(ValueError):
    """A release or rankings file that cannot be evaluated; the message says which and why."""


@dataclass(frozen=True)
class CaptionSplit:
    """A dataset's captions, each with the image it was written for.

    The captions may come in any order (a COCO annotations file interleaves images); the
    images' order, which the COCO 1K folds follow, is their first appearance.
    """

    caption_ids: Sequence[int]
    image_ids: Sequence[int]


@dataclass(eq=False)
class ReleaseTruth:
    """A release's positives per direction (every query, even without positives) and gains."""

    path: Path
    positives: dict[str, dict[int, list[int]]]
    gains: dict[tuple[int, int], float] | None  # (image id, caption id) -> graded relevance
    _prepared: dict[str, metrics.Truth] = field(default_factory=dict, repr=False)

    def prepared(self, direction: str) -> metrics.Truth:
        """Return the direction's positives and gains prepared for `mitl.metrics` (cached)."""
        if direction not in self._prepared:
            self._prepared[direction] = metrics.prepare(
                self.positives[direction], self._direction_gains(direction)
            )
        return self._prepared[direction]

    def _direction_gains(self, direction: str) -> dict[int, dict[int, float]] | None:
        if self.gains is None:
            return None
        queries = self.positives[direction]
        by_query: dict[int, dict[int, float]] = {}
        for (image, caption), score in self.gains.items():
            query, target = (image, caption) if direction == "i2t" else (caption, image)
            if query in queries:
                by_query.setdefault(query, {})[target] = score
        return by_query


def release_load(path: Path | str) -> ReleaseTruth:
    """Read a release directory's positives and, when present, its verdicts' graded scores."""
    path = Path(path)
    if not path.is_dir():
        raise EvaluationError(f"{path}: not a release directory (no such directory)")
    positives = {
        "i2t": _read_positives(path / I2T_FILE),
        "t2i": _read_positives(path / T2I_FILE),
    }
    verdicts = path / VERDICTS_FILE
    gains = _read_verdict_scores(verdicts) if verdicts.exists() else None
    return ReleaseTruth(path=path, positives=positives, gains=gains)


def _read_json(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise EvaluationError(f"{path}: file not found") from None
    except OSError as exc:
        raise EvaluationError(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise EvaluationError(f"{path}: not valid JSON ({exc})") from None


def _read_positives(path: Path) -> dict[int, list[int]]:
    data = _read_json(path)
    try:
        return _id_lists(data, what="positives")
    except EvaluationError as exc:
        raise EvaluationError(f"{path}: {exc}") from None


def _read_verdict_scores(path: Path) -> dict[tuple[int, int], float]:
    scores: dict[tuple[int, int], float] = {}
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in VERDICT_NEEDS if c not in (reader.fieldnames or [])]
            if missing:
                raise EvaluationError(f"{path}: the header lacks {', '.join(missing)}")
            for line, row in enumerate(reader, start=2):
                pair = (
                    _csv_id(path, line, row, "image_id"),
                    _csv_id(path, line, row, "caption_id"),
                )
                try:
                    score = float(row["score"])
                except (TypeError, ValueError):
                    score = math.nan
                if not 0.0 <= score <= 1.0:
                    raise EvaluationError(
                        f"{path}:{line}: score {row['score']!r} is not a number in [0, 1]"
                    )
                scores[pair] = score
    except OSError as exc:
        raise EvaluationError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise EvaluationError(f"{path}: not UTF-8 text ({exc})") from None
    return scores


def _csv_id(path: Path, line: int, row: Mapping[str, str | None], column: str) -> int:
    value = row.get(column) or ""
    if not _ID.fullmatch(value):
        raise EvaluationError(f"{path}:{line}: {column} {value!r} is not an integer id")
    return int(value)


def _id_lists(
    data: Any, *, what: str, max_length: int | None = None, max_keys: int | None = None
) -> dict[int, list[int]]:
    """Check {"<id>": [ids]} and return it with integer keys; refuse repeated ids in a list.

    Ids are integers of 64 bits at most. With `max_keys` and `max_length`, more keys or a
    longer list are refused before any id is looked at.
    """
    if not isinstance(data, dict):
        raise EvaluationError(f"{what} must be a JSON object of id lists, not {_kind(data)}")
    if max_keys is not None and len(data) > max_keys:
        raise EvaluationError(
            f"{what} ranks {len(data)} queries, more than the {max_keys} there are to rank"
        )
    parsed: dict[int, list[int]] = {}
    for key, values in data.items():
        if isinstance(key, bool) or not (
            isinstance(key, int) or (isinstance(key, str) and _ID.fullmatch(key))
        ):
            raise EvaluationError(f"{what}: key {key!r} is not an integer id")
        query = int(key)
        if not ID_MIN <= query <= ID_MAX:
            raise EvaluationError(f"{what}: key {key!r} is not an id of at most 64 bits")
        if query in parsed:
            raise EvaluationError(f"{what}: id {query} appears twice as a key")
        if max_length is not None and isinstance(values, list) and len(values) > max_length:
            raise EvaluationError(
                f"{what}: the list of {key!r} has {len(values)} ids, more than the "
                f"{max_length} accepted; rank each query only as deep as the metrics need "
                "(its number of positives for R-Precision and mAP@R, 10 for nDCG@10)"
            )
        if not isinstance(values, list) or not all(type(v) is int for v in values):
            raise EvaluationError(
                f"{what}: the value of {key!r} must be a list of integer ids"
                + (f" (found {_first_non_id(values)!r})" if isinstance(values, list) else "")
            )
        if values and (min(values) < ID_MIN or max(values) > ID_MAX):
            wide = next(v for v in values if not ID_MIN <= v <= ID_MAX)
            raise EvaluationError(
                f"{what}: the list of {key!r} holds {wide}, not an id of at most 64 bits"
            )
        if len(set(values)) != len(values):
            seen: set[int] = set()
            repeated = next(v for v in values if v in seen or seen.add(v))
            raise EvaluationError(f"{what}: the list of {key!r} holds {repeated} twice")
        parsed[query] = values
    return parsed


def _first_non_id(values: list[Any]) -> Any:
    return next(v for v in values if type(v) is not int)


def _kind(data: Any) -> str:
    return {list: "a list", str: "a string", type(None): "null"}.get(
        type(data), type(data).__name__
    )


def rankings_parse(
    data: Any,
    *,
    max_length: int | None = None,
    max_queries: Mapping[str, int] | None = None,
) -> RankingsByDirection:
    """Check the shape of parsed rankings JSON and return it with integer ids.

    With `max_length`, a ranking of more targets than that is refused (the API's cap);
    with `max_queries` (per direction), more ranked queries than that.
    """
    if not isinstance(data, dict):
        raise EvaluationError(
            f'rankings must be a JSON object {{"i2t": {{…}}, "t2i": {{…}}}}, not {_kind(data)}'
        )
    missing = [d for d in DIRECTIONS if d not in data]
    unknown = [repr(key) for key in data if key not in DIRECTIONS]
    if missing or unknown:
        raise EvaluationError(
            'rankings must have exactly the keys "i2t" and "t2i"'
            + (f" (missing: {', '.join(missing)})" if missing else "")
            + (
                f" (unknown: {', '.join(unknown[:3])}{', …' if len(unknown) > 3 else ''})"
                if unknown
                else ""
            )
        )
    return {
        d: _id_lists(
            data[d],
            what=f"rankings {d}",
            max_length=max_length,
            max_keys=None if max_queries is None else max_queries[d],
        )
        for d in DIRECTIONS
    }


def rankings_read(path: Path | str) -> RankingsByDirection:
    """Read and check a rankings JSON file; errors name the file."""
    path = Path(path)
    data = _read_json(path)
    try:
        return rankings_parse(data)
    except EvaluationError as exc:
        raise EvaluationError(f"{path}: {exc}") from None


def rankings_sha256(rankings: RankingsByDirection) -> str:
    """Return a checksum of the rankings' content (the same for any JSON layout of it)."""
    canonical = {d: {str(q): r for q, r in sorted(rankings[d].items())} for d in DIRECTIONS}
    payload = json.dumps(canonical, separators=(",", ":")).encode()
    return hashlib.sha256(payload).hexdigest()


def evaluate(
    release: ReleaseTruth,
    rankings: RankingsByDirection,
    *,
    split: CaptionSplit | None = None,
) -> dict[str, dict[str, Any]]:
    """Return every metric per direction (see the module doc); raise EvaluationError."""
    covered = _check_queries(release, rankings, split)
    result: dict[str, dict[str, Any]] = {}
    for direction in DIRECTIONS:
        try:
            truth = release.prepared(direction)
            values = metrics.retrieval_metrics(truth, rankings[direction], ks=KS, ndcg_ks=(NDCG_K,))
        except metrics.MetricError as exc:
            raise EvaluationError(f"{direction}: {exc}") from None
        result[direction] = {key: _finite_or_none(value) for key, value in values.items()}
    if covered and split is not None and _has_coco_folds(split):
        try:
            coco = metrics.coco_recalls(
                rankings["i2t"],
                rankings["t2i"],
                caption_ids=split.caption_ids,
                caption_images=split.image_ids,
                ks=KS,
            )
        except metrics.MetricError as exc:
            raise EvaluationError(f"COCO recalls: {exc}") from None
        for direction in DIRECTIONS:
            result[direction].update(coco[direction])
    for direction in DIRECTIONS:
        scored = len(release.prepared(direction).queries)
        result[direction]["queries"] = scored
        result[direction]["queries_without_positives"] = len(release.positives[direction]) - scored
    return result


def _has_coco_folds(split: CaptionSplit) -> bool:
    """Say whether the split has an image for every COCO 1K fold (a tiny dataset may not)."""
    return len(set(split.image_ids)) >= metrics.COCO_FOLDS


def _check_queries(
    release: ReleaseTruth, rankings: RankingsByDirection, split: CaptionSplit | None
) -> bool:
    """Refuse unranked release queries and foreign ranked queries; say if the split is covered."""
    items = (
        {"i2t": set(split.image_ids), "t2i": set(split.caption_ids)} if split is not None else None
    )
    covered = items is not None and all(items[d].issubset(rankings[d]) for d in DIRECTIONS)
    for direction in DIRECTIONS:
        queries, ranked = release.positives[direction], rankings[direction]
        missing = [q for q in queries if q not in ranked]
        if missing:
            raise EvaluationError(
                f"{direction}: {len(missing)} of the release's {len(queries)} queries have no "
                f"ranking (first: {missing[0]})"
            )
        extra = [q for q in ranked if q not in queries]
        if not extra:
            continue
        kind = "images" if direction == "i2t" else "captions"
        if items is None:
            raise EvaluationError(
                f"{direction}: {len(extra)} ranked queries are not queries of the release "
                f"(first: {extra[0]})"
            )
        foreign = [q for q in extra if q not in items[direction]]
        if foreign:
            raise EvaluationError(
                f"{direction}: {len(foreign)} ranked queries are neither queries of the "
                f"release nor {kind} of its dataset (first: {foreign[0]})"
            )
        if not covered:
            raise EvaluationError(
                f"{direction}: {len(extra)} ranked queries are not queries of the release "
                f"(first: {extra[0]}); rank only its queries, or every image "
                f"({len(items['i2t'])}) and caption ({len(items['t2i'])}) of the dataset "
                "for the COCO 1K/5K recalls"
            )
    return covered


def _finite_or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


# Display order of the metric families; "@K" metrics follow K. A stored result's own key
# order is not kept (PostgreSQL's jsonb sorts keys), so the order is decided here.
METRIC_FAMILIES = (
    "recall",
    "r_precision",
    "map_at_r",
    "pmrp",
    "ndcg",
    "coco_5k_recall",
    "coco_1k_recall",
)


def _display_rank(key: str) -> tuple[int, int, str]:
    family, _, k = key.partition("@")
    rank = METRIC_FAMILIES.index(family) if family in METRIC_FAMILIES else len(METRIC_FAMILIES)
    return rank, int(k) if k.isdigit() else 0, key


def metric_keys(result: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Return the metric names of a result in display order (counts left out)."""
    keys = {key for direction in DIRECTIONS for key in result.get(direction, {})}
    return sorted(keys - set(COUNT_KEYS), key=_display_rank)


def format_table(result: Mapping[str, Mapping[str, Any]]) -> str:
    """Return the result as a plain-text table: one row per metric, one column per direction."""
    rows = [("metric", *DIRECTIONS)]
    for key in [*metric_keys(result), *COUNT_KEYS]:
        cells = []
        for direction in DIRECTIONS:
            value = result[direction].get(key)
            if value is None:
                cells.append("-")
            elif key in COUNT_KEYS:
                cells.append(str(value))
            else:
                cells.append(f"{value:.4f}")
        rows.append((key, *cells))
    width = max(len(row[0]) for row in rows)
    return "\n".join(
        f"{row[0]:<{width}}  " + "  ".join(f"{cell:>8}" for cell in row[1:]) for row in rows
    )
