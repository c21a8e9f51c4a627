"""Read and check what an evaluation needs: a release's positives and a model's rankings.

Pure Python (no Django); `mitl.evaluation` scores what this module reads.

Inputs
    A release directory: `image_to_caption.json` = {"<image id>": [caption ids]} and
    `caption_to_image.json` = {"<caption id>": [image ids]}, whose keys are the queries
    (a query may have no positive), and optionally `verdicts.csv` (`mitl.release_files`).
    Rankings: {"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>":
    [image ids, best first]}}.

Checks (an `EvaluationError` that names the file and what is wrong): both directions are
present; ids are integers of at most 64 bits; no list holds an id twice; a key appears once;
a verdict's score is a number in [0, 1]. `rankings_parse` also caps how many queries and how
deep a ranking may be, with the limits every way in shares (`mitl.ranking_limits`).

Gains for nDCG
    With `verdicts.csv`, a pair that has a verdict row gains its `score` (the crowd's
    graded relevance in [0, 1]: 1 per "100% YES", 0.5 per "Partially YES", 0 otherwise,
    averaged; ECCV Caption eq. E.4), whether or not the verdict made it a positive, and a
    positive of the ECCV-format files without a verdict row (an original or imported
    positive) gains 1.0. Without `verdicts.csv` the gains are binary: 1 per positive.
    Positives for every other metric are the ECCV-format files, unchanged.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from mitl.id_lists import id_lists_fast
from mitl.metric_truth import Truth, prepare
from mitl.release_files import I2T_FILE, T2I_FILE, VERDICTS_FILE

DIRECTIONS: tuple[str, ...] = ("i2t", "t2i")
VERDICT_NEEDS: tuple[str, ...] = ("image_id", "caption_id", "score")
_ID = re.compile(r"-?[0-9]+")
ID_MIN, ID_MAX = -(2**63), 2**63 - 1  # ids are stored and ranked as int64

RankingsByDirection = dict[str, dict[int, list[int]]]  # {"i2t": {query: ranking}, "t2i": …}
T = TypeVar("T")


class EvaluationError(ValueError):
    """A release or rankings file that cannot be evaluated; the message says which and why."""


class RankingLimitError(EvaluationError):
    """Rankings over a limit (`mitl.ranking_limits`): `limit` names it ("size", "depth",
    "queries"), `value` is what the rankings have and `maximum` what the limit allows."""

    def __init__(self, message: str, *, limit: str, value: int, maximum: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
        self.maximum = maximum


@dataclass(eq=False)
class ReleaseTruth:
    """A release's positives per direction (every query, even without positives) and gains."""

    path: Path
    positives: dict[str, dict[int, list[int]]]
    gains: dict[tuple[int, int], float] | None  # (image id, caption id) -> graded relevance
    _prepared: dict[str, Truth] = field(default_factory=dict, repr=False)

    def prepared(self, direction: str) -> Truth:
        """Return the direction's positives and gains prepared for `mitl.metrics` (cached)."""
        if direction not in self._prepared:
            self._prepared[direction] = prepare(
                self.positives[direction], self.gains_by_query(direction)
            )
        return self._prepared[direction]

    def gains_by_query(self, direction: str) -> dict[int, dict[int, float]] | None:
        """Return {query: {target: gain}} of the direction's queries, None without gains."""
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


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise EvaluationError(f"{path}: file not found") from None
    except OSError as exc:
        raise EvaluationError(f"{path}: cannot read ({exc.strerror})") from None


def _json_exact(path: Path, raw: bytes) -> Any:
    """Decode with the standard library, whose messages the errors quote."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise EvaluationError(f"{path}: not valid JSON ({exc})") from None


def decode_checked(raw: bytes, check: Callable[[Any], T], exact: Callable[[bytes], Any]) -> T:
    """Return `check(data)` of the JSON `raw`, decoded by orjson (about twice as fast).

    Where orjson refuses the bytes (NaN, a byte order mark, UTF-16, invalid UTF-8) or
    `check` refuses the data, `exact` (the standard library's json) decodes them
    again and `check` runs on that: every error is then the one json's reading gives, word
    for word (orjson reads integers past 64 bits as floats and nests deeper than json).
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return check(exact(raw))
    try:
        return check(data)
    except (EvaluationError, RecursionError):  # the latter: quoting a list nested too deeply
        return check(exact(raw))


def _read_checked(path: Path, check: Callable[[Any], T]) -> T:
    """Read and decode a JSON file, then `check` it; errors name the file."""
    return decode_checked(_read_bytes(path), check, lambda raw: _json_exact(path, raw))


def _read_positives(path: Path) -> dict[int, list[int]]:
    def check(data: Any) -> dict[int, list[int]]:
        try:
            return _id_lists(data, what="positives", json_types=True)
        except EvaluationError as exc:
            raise EvaluationError(f"{path}: {exc}") from None

    return _read_checked(path, check)


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


_INT_ONLY = frozenset({int})


def _id_lists(
    data: Any,
    *,
    what: str,
    max_length: int | None = None,
    max_keys: int | None = None,
    json_types: bool = False,
) -> dict[int, list[int]]:
    """Check {"<id>": [ids]} and return it with integer keys; refuse repeated ids in a list.

    Ids are integers of 64 bits at most. With `max_keys` and `max_length`, more keys or a
    longer list are refused before any id is looked at. `json_types`: the data comes from
    a JSON decoder (see `mitl.id_lists`, which accepts the good maps in a few array passes;
    the checks below, one list at a time, find and name what is wrong).
    """
    accepted = id_lists_fast(data, max_length=max_length, max_keys=max_keys, json_types=json_types)
    if accepted is not None:
        return accepted
    return _id_lists_checked(data, what=what, max_length=max_length, max_keys=max_keys)


def _id_lists_checked(
    data: Any, *, what: str, max_length: int | None, max_keys: int | None
) -> dict[int, list[int]]:
    """`_id_lists` one key and list at a time, in order: the first fault found is named."""
    if not isinstance(data, dict):
        raise EvaluationError(f"{what} must be a JSON object of id lists, not {_kind(data)}")
    if max_keys is not None and len(data) > max_keys:
        raise RankingLimitError(
            f"{what} ranks {len(data)} queries, more than the {max_keys} there are to rank "
            "(the query limit: the dataset's images for i2t, its captions for t2i)",
            limit="queries",
            value=len(data),
            maximum=max_keys,
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
            raise RankingLimitError(
                f"{what}: the list of {key!r} has {len(values)} ids, more than the "
                f"{max_length} accepted (the depth limit, EVALUATION_MAX_RANKING_LENGTH); "
                "rank each query only as deep as the metrics need (its number of positives "
                "for R-Precision and mAP@R, 10 for nDCG@10)",
                limit="depth",
                value=len(values),
                maximum=max_length,
            )
        # One pass in C over the list's element types (a bool is not an id).
        if not isinstance(values, list) or not set(map(type, values)) <= _INT_ONLY:
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
    json_types: bool = False,
) -> RankingsByDirection:
    """Check the shape of parsed rankings JSON and return it with integer ids.

    With `max_length`, a ranking of more targets than that is refused; with `max_queries`
    (per direction), more ranked queries than that (`mitl.ranking_limits` passes both).
    `json_types`: `data` is what a JSON decoder returned (no other types in it).
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
            json_types=json_types,
        )
        for d in DIRECTIONS
    }


def rankings_read(path: Path | str) -> RankingsByDirection:
    """Read and check a rankings JSON file; errors name the file."""
    path = Path(path)

    def check(data: Any) -> RankingsByDirection:
        try:
            return rankings_parse(data, json_types=True)
        except EvaluationError as exc:
            raise EvaluationError(f"{path}: {exc}") from None

    return _read_checked(path, check)


def rankings_sha256(rankings: RankingsByDirection) -> str:
    """Return a checksum of the rankings' content (the same for any JSON layout of it)."""
    canonical = {d: {str(q): r for q, r in sorted(rankings[d].items())} for d in DIRECTIONS}
    payload = json.dumps(canonical, separators=(",", ":")).encode()
    return hashlib.sha256(payload).hexdigest()


def keyed_rankings_read(path: Path | str, keys: Sequence[str]) -> dict[str, dict[int, list[int]]]:
    """Read {"<key>": {"<query id>": [target ids]}} (e.g. rankings per perturbation kind).

    Only `keys` may appear; each value is checked as one direction of a rankings file.
    """
    path = Path(path)

    def check(data: Any) -> dict[str, dict[int, list[int]]]:
        if not isinstance(data, dict):
            raise EvaluationError(f"{path}: must be a JSON object keyed by {', '.join(keys)}")
        unknown = [repr(key) for key in data if key not in keys]
        if unknown:
            raise EvaluationError(
                f"{path}: unknown key {unknown[0]}; expected some of {', '.join(keys)}"
            )
        return {
            key: _id_lists(value, what=f"{path}: {key}", json_types=True)
            for key, value in data.items()
        }

    return _read_checked(path, check)
