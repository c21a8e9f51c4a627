"""The limits on a rankings file, one set for every way in: the leaderboard page, the API
and the commands that score a file (`evaluate`, `explain`).

Pure Python (no Django). Scoring rankings costs time in proportion to their size, so a
file is refused, before any metric is computed, when it is

- larger than `max_bytes` (the size limit, setting EVALUATION_MAX_BODY_MB),
- ranks a query deeper than `max_depth` targets (the depth limit, setting
  EVALUATION_MAX_RANKING_LENGTH): R-Precision and mAP@R need as many as the query has
  positives, nDCG@10 and Recall@10 ten,
- or ranks more queries in a direction than there are to rank (`max_queries`: the
  dataset's images for i2t, its captions for t2i).

Each refusal is a `RankingLimitError` (`mitl.evaluation_inputs`) that names the limit and
the value seen, so every way in shows the same sentence. The size is checked before a
byte is parsed, the depth and the query count before any id is read
(`mitl.evaluation_inputs.rankings_parse`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitl.evaluation_inputs import (
    EvaluationError,
    RankingLimitError,
    RankingsByDirection,
    decode_checked,
    rankings_parse,
)

SIZE_SETTING = "EVALUATION_MAX_BODY_MB"
DEPTH_SETTING = "EVALUATION_MAX_RANKING_LENGTH"
OFFLINE_HINT = (
    "rank each query only as deep as the metrics need, or score large rankings offline "
    "with `python manage.py evaluate --release <release dir> --rankings <file> --no-limits`"
)


@dataclass(frozen=True)
class RankingLimits:
    """The caps a rankings file must stay within; None lifts one (the commands' --no-limits)."""

    max_bytes: int | None
    max_depth: int | None
    max_queries: Mapping[str, int] | None = None  # per direction

    def refuse_size(self, size: int) -> None:
        """Raise RankingLimitError when `size` bytes are over the size limit."""
        if self.max_bytes is not None and size > self.max_bytes:
            raise RankingLimitError(
                size_refusal(size, self.max_bytes), limit="size", value=size, maximum=self.max_bytes
            )


UNLIMITED = RankingLimits(max_bytes=None, max_depth=None)


def size_refusal(size: int, max_bytes: int) -> str:
    """Say that rankings of `size` bytes are over the size limit, and what to do instead."""
    return (
        f"the rankings have {size_text(size)}, over the size limit of {size_text(max_bytes)} "
        f"({SIZE_SETTING}); {OFFLINE_HINT}"
    )


def size_text(size: int) -> str:
    """Return a byte count the way the messages write it ("2.5 MB", "12.0 KB")."""
    return f"{size / 2**20:.1f} MB" if size >= 2**20 else f"{size / 2**10:.1f} KB"


def rankings_limited(data: Any, limits: RankingLimits) -> RankingsByDirection:
    """Check parsed rankings JSON against the depth and query limits, then its shape."""
    return rankings_parse(data, max_length=limits.max_depth, max_queries=limits.max_queries)


def rankings_from_bytes(content: bytes, limits: RankingLimits) -> RankingsByDirection:
    """Check a rankings file's bytes against every limit, parse them and check the shape."""
    limits.refuse_size(len(content))
    return decode_checked(
        content,
        lambda data: rankings_parse(
            data, max_length=limits.max_depth, max_queries=limits.max_queries, json_types=True
        ),
        _json_exact,
    )


def _json_exact(content: bytes) -> Any:
    """Decode with the standard library, whose messages the errors quote."""
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EvaluationError(f"not valid JSON ({exc})") from None
    except RecursionError:
        raise EvaluationError("not valid JSON (arrays or objects are nested too deeply)") from None


def rankings_file_limited(path: Path | str, limits: RankingLimits) -> RankingsByDirection:
    """Read a rankings file within the limits (its size before reading it); errors name it."""
    path = Path(path)
    try:
        limits.refuse_size(path.stat().st_size)
        content = path.read_bytes()
        return rankings_from_bytes(content, limits)
    except FileNotFoundError:
        raise EvaluationError(f"{path}: file not found") from None
    except OSError as exc:
        raise EvaluationError(f"{path}: cannot read ({exc.strerror})") from None
    except RankingLimitError as exc:
        raise RankingLimitError(
            f"{path}: {exc}", limit=exc.limit, value=exc.value, maximum=exc.maximum
        ) from None
    except EvaluationError as exc:
        raise EvaluationError(f"{path}: {exc}") from None
