"""The files of the offline path, which uses MTurk's web UI instead of its API: the
batch-input CSV (one row per HIT), the batch-results CSV that MTurk gives back (read into
answers in the platform's submit format, with `file:line: why` errors), and the results
CSV again with its Approve/Reject columns filled in.

Pure: no Django, no boto3.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from mitl.judgements import SHORTCOMINGS, WRONG_CONCEPTS, Level

from .errors import MTurkInputError
from .feedback import FEEDBACK_MAX, truncate
from .protocol import valid_id

# --- the batch-input CSV ----------------------------------------------------------------


@dataclass(frozen=True)
class InputItem:
    item_id: int
    image_url: str
    caption: str


@dataclass(frozen=True)
class InputHit:
    batch_id: int
    hit_id: int
    items: Sequence[InputItem]


def batch_input_csv(hits: Sequence[InputHit]) -> str:
    """Return MTurk's batch-input CSV: one row per HIT, every pair's item, image and caption.

    A HIT with fewer pairs than the longest leaves its last columns empty; the layout hides
    them. Nothing says which pairs are golden: they must look like the others.
    """
    width = max((len(hit.items) for hit in hits), default=0)
    header = ["batch_id", "hit_id"]
    for n in range(1, width + 1):
        header += [f"item_{n}", f"image_url_{n}", f"caption_{n}"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for hit in hits:
        row: list[object] = [hit.batch_id, hit.hit_id]
        for item in hit.items:
            row += [item.item_id, item.image_url, item.caption]
        row += [""] * (len(header) - len(row))
        writer.writerow(row)
    return out.getvalue()


# --- the batch-results CSV --------------------------------------------------------------


RESULT_COLUMNS = ("HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "Input.hit_id")
MTURK_STATUSES = ("Submitted", "Approved", "Rejected")


@dataclass(frozen=True)
class ResultRow:
    """One assignment of MTurk's batch-results CSV, with its answers in submit format."""

    line: int
    hit_external_id: str
    assignment_external_id: str
    worker_external_id: str
    status: str  # Submitted, Approved or Rejected
    hit_id: int  # the platform HIT, from the Input.hit_id column
    answers: list[dict[str, Any]] = field(default_factory=list)
    accept_time: datetime | None = None
    submit_time: datetime | None = None


def parse_results_csv(text: str, *, source: str) -> tuple[list[ResultRow], list[str]]:
    """Read MTurk's batch-results CSV; return the rows and `source:line: problem` errors.

    Columns: `HITId`, `AssignmentId`, `WorkerId`, `AssignmentStatus`, `AcceptTime`,
    `SubmitTime`, the batch-input columns as `Input.*` and the form's fields as `Answer.*`,
    or, with crowd-form, all of them as JSON in `Answer.taskAnswers`.
    """
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = reader.fieldnames or []
    missing = [column for column in RESULT_COLUMNS if column not in header]
    if missing:
        return [], [
            f"{source}:1: missing column {missing[0]!r}: is this the batch-results CSV of a "
            "batch made from `mturk_export`?"
        ]
    rows: list[ResultRow] = []
    errors: list[str] = []
    line = 2  # the header is line 1; a quoted cell may span several lines
    while True:
        try:
            raw = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a cell over the csv module's size limit
            errors.append(f"{source}:{line}: unreadable CSV ({exc}); the rest was not read")
            break
        start, line = line, reader.line_num + 1
        try:
            rows.append(_result_row(raw, start))
        except MTurkInputError as exc:
            errors.append(f"{source}:{start}: {exc}")
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            # A tampered file that slipped past the checks below must not stop the import.
            errors.append(f"{source}:{start}: unreadable answers ({type(exc).__name__})")
    return rows, errors


def _result_row(raw: Mapping[str, str | None], line: int) -> ResultRow:
    cell = {key: (value or "").strip() for key, value in raw.items() if key}
    for column in ("HITId", "AssignmentId", "WorkerId"):
        if not valid_id(cell[column]):
            raise MTurkInputError(f"{column} {cell[column]!r} is not an MTurk id")
    if cell["AssignmentStatus"] not in MTURK_STATUSES:
        raise MTurkInputError(
            f"AssignmentStatus {cell['AssignmentStatus']!r} is not one of "
            f"{', '.join(MTURK_STATUSES)}"
        )
    try:
        hit_id = int(cell["Input.hit_id"])
    except ValueError:
        raise MTurkInputError(f"Input.hit_id {cell['Input.hit_id']!r} is not a HIT id") from None
    return ResultRow(
        line=line,
        hit_external_id=cell["HITId"],
        assignment_external_id=cell["AssignmentId"],
        worker_external_id=cell["WorkerId"],
        status=cell["AssignmentStatus"],
        hit_id=hit_id,
        answers=answers_from_result(cell),
        accept_time=parse_mturk_time(cell.get("AcceptTime", "")),
        submit_time=parse_mturk_time(cell.get("SubmitTime", "")),
    )


def answers_from_result(cell: Mapping[str, str]) -> list[dict[str, Any]]:
    """Return a result row's answers: the `answers` JSON, or else the single fields."""
    fields = _answer_fields(cell)
    packed = fields.get("answers")
    if isinstance(packed, str) and packed.strip():
        try:
            packed = json.loads(packed)
        except json.JSONDecodeError as exc:
            raise MTurkInputError(f"the `answers` field is not JSON ({exc.msg})") from None
    if packed:
        if not isinstance(packed, list) or not all(isinstance(a, dict) for a in packed):
            raise MTurkInputError("the `answers` field must be a JSON list of answers")
        return [_clean_answer(answer) for answer in packed]
    return _answers_from_fields(cell, fields)


def _answer_fields(cell: Mapping[str, str]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        key.removeprefix("Answer."): value
        for key, value in cell.items()
        if key.startswith("Answer.") and key != "Answer.taskAnswers"
    }
    task_answers = cell.get("Answer.taskAnswers", "")
    if task_answers:
        try:
            decoded = json.loads(task_answers)
        except json.JSONDecodeError as exc:
            raise MTurkInputError(f"Answer.taskAnswers is not JSON ({exc.msg})") from None
        if isinstance(decoded, list):  # crowd-form: one object per submission
            decoded = decoded[0] if decoded else {}
        if not isinstance(decoded, dict):
            raise MTurkInputError("Answer.taskAnswers must hold a JSON object of fields")
        fields.update(decoded)
    return fields


def _answers_from_fields(cell: Mapping[str, str], fields: Mapping[str, Any]) -> list[dict]:
    answers = []
    n = 1
    while f"Input.item_{n}" in cell:
        item = cell[f"Input.item_{n}"]
        if item:
            level = _chosen(fields.get(f"level_{n}"))
            why = [code for code in SHORTCOMINGS if _truthy(fields.get(f"why_{n}_{code}"))]
            concepts = [c for c in WRONG_CONCEPTS if _truthy(fields.get(f"concept_{n}_{c}"))]
            other = _text(fields.get(f"other_{n}"))
            answers.append(
                _clean_answer(
                    {
                        "item": item,
                        "level": level,
                        "shortcomings": why,
                        "wrong_concepts": concepts,
                        "other_text": other if "other" in concepts else "",
                    }
                )
            )
        n += 1
    if not answers:
        raise MTurkInputError("no answers: neither an `answers` field nor `level_N` fields")
    return answers


def _chosen(value: Any) -> str | None:
    """Return a radio group's choice, as plain HTML forms or crowd-form serialize it."""
    if isinstance(value, dict):  # {"yes": true, "no": false} or {"label": "yes"}
        if isinstance(value.get("label"), str):
            return value["label"]
        chosen = [key for key, on in value.items() if _truthy(on)]
        return chosen[0] if len(chosen) == 1 else None
    text = _text(value)
    return text or None


def _truthy(value: Any) -> bool:
    if isinstance(value, dict):  # crowd-form: {"on": true}
        return any(_truthy(v) for v in value.values())
    if isinstance(value, bool):
        return value
    return str(value or "").strip().lower() in ("on", "true", "1", "yes", "checked")


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _clean_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    """Return one answer in submit format, refusing values of the wrong type or size."""
    raw_item = answer.get("item")
    try:
        if isinstance(raw_item, bool):
            raise TypeError
        item = int(raw_item)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise MTurkInputError(f"answer for item {raw_item!r}: not an item id") from None
    level = answer.get("level")
    if not isinstance(level, str) or level not in {lv.value for lv in Level}:
        raise MTurkInputError(f"item {item}: no answer chosen (got {level!r})")
    other_text = answer.get("other_text")
    if other_text is not None and not isinstance(other_text, str):
        raise MTurkInputError(f"item {item}: `other_text` must be text (got {other_text!r})")
    return {
        "item": item,
        "level": level,
        "shortcomings": _codes(answer.get("shortcomings"), item, "shortcomings"),
        "wrong_concepts": _codes(answer.get("wrong_concepts"), item, "wrong_concepts"),
        "other_text": other_text or "",
        "elapsed_ms": _elapsed_ms(answer.get("elapsed_ms"), item),
    }


def _codes(value: Any, item: int, name: str) -> list[str]:
    """Return a list of reason codes; anything but a list of strings is refused."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(code, str) for code in value):
        raise MTurkInputError(f"item {item}: `{name}` must be a list of codes (got {value!r})")
    return list(value)


def _elapsed_ms(value: Any, item: int) -> int:
    """Return a time in whole milliseconds (0 when missing); NaN and infinity are refused."""
    if value is None or value == "":
        return 0
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value) if isinstance(value, str) else value
        elapsed = int(number)  # OverflowError for ±inf, ValueError for NaN
    except (TypeError, ValueError, OverflowError):
        raise MTurkInputError(
            f"item {item}: `elapsed_ms` must be a number of milliseconds (got {value!r})"
        ) from None
    return max(0, elapsed)


_TZ_OFFSETS = {"UTC": 0, "GMT": 0, "PST": -8, "PDT": -7, "EST": -5, "EDT": -4}


def parse_mturk_time(text: str) -> datetime | None:
    """Parse a results-CSV time like `Thu Oct 09 07:30:20 PDT 2025`; None when unreadable."""
    parts = text.split()
    if len(parts) != 6 or parts[4] not in _TZ_OFFSETS:
        return None
    try:
        naive = datetime.strptime(" ".join(parts[:4] + parts[5:]), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    offset = _TZ_OFFSETS[parts[4]]
    zone = UTC if offset == 0 else timezone(timedelta(hours=offset))
    return naive.replace(tzinfo=zone).astimezone(UTC)


# --- the decisions, for MTurk's "Upload CSV" -------------------------------------------


def decisions_csv(text: str, decisions: Mapping[str, tuple[bool, str] | None]) -> str:
    """Return the results CSV with its `Approve`/`Reject` columns filled in, for re-upload.

    MTurk's web UI approves a row with an `x` under `Approve` and rejects it with the
    feedback under `Reject`; rows without a decision (work that waits for a person) stay
    empty.
    """
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = list(reader.fieldnames or [])
    for column in ("Approve", "Reject"):
        if column not in header:
            header.append(column)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\r\n")
    writer.writeheader()
    for row in reader:
        decision = decisions.get((row.get("AssignmentId") or "").strip())
        row["Approve"], row["Reject"] = "", ""
        if decision is not None:
            approve, feedback = decision
            if approve:
                row["Approve"] = "x"
            else:
                row["Reject"] = truncate(feedback, FEEDBACK_MAX)
        writer.writerow(row)
    return out.getvalue()
