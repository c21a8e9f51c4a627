"""The offline path's files: the batch-input CSV, the batch-results CSV read with
`file:line` errors, and the decisions CSV."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

from annotation.mturk.offline_csv import (
    InputHit,
    InputItem,
    batch_input_csv,
    decisions_csv,
    parse_mturk_time,
    parse_results_csv,
)


def input_hits() -> list[InputHit]:
    def item(n: int) -> InputItem:
        return InputItem(n, f"https://mitl.example.org/i/{n}", f'caption "{n}", with comma')

    return [
        InputHit(batch_id=5, hit_id=10, items=[item(1), item(2), item(3)]),
        InputHit(batch_id=5, hit_id=11, items=[item(4), item(5)]),  # the short last one
    ]


def test_the_batch_input_csv_has_one_row_per_hit_and_pads_short_hits():
    rows = list(csv.DictReader(io.StringIO(batch_input_csv(input_hits()))))
    assert len(rows) == 2
    assert list(rows[0]) == [
        "batch_id",
        "hit_id",
        *[f"{col}_{n}" for n in (1, 2, 3) for col in ("item", "image_url", "caption")],
    ]
    assert rows[0]["caption_1"] == 'caption "1", with comma'
    assert rows[1]["hit_id"] == "11"
    assert (rows[1]["item_3"], rows[1]["image_url_3"], rows[1]["caption_3"]) == ("", "", "")


RESULT_HEADER = [
    "HITId", "HITTypeId", "Title", "Description", "Keywords", "Reward", "CreationTime",
    "MaxAssignments", "RequesterAnnotation", "AssignmentDurationInSeconds",
    "AutoApprovalDelayInSeconds", "Expiration", "NumberOfSimilarHITs", "LifetimeInSeconds",
    "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime", "SubmitTime",
    "AutoApprovalTime", "ApprovalTime", "RejectionTime", "RequesterFeedback",
    "WorkTimeInSeconds", "LifetimeApprovalRate", "Last30DaysApprovalRate",
    "Last7DaysApprovalRate", "Input.batch_id", "Input.hit_id", "Input.item_1",
    "Input.image_url_1", "Input.caption_1", "Input.item_2", "Input.image_url_2",
    "Input.caption_2",
]  # fmt: skip


def results_csv(rows: list[dict], extra_columns: tuple[str, ...] = ()) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, [*RESULT_HEADER, *extra_columns, "Approve", "Reject"])
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                "HITId": "3HIT0000000000000000000000001",
                "AssignmentId": "3ASG0000000000000000000000001",
                "WorkerId": "A1WORKER00001",
                "AssignmentStatus": "Submitted",
                "AcceptTime": "Thu Oct 09 07:30:20 PDT 2025",
                "SubmitTime": "Thu Oct 09 07:35:20 PDT 2025",
                "Input.batch_id": "5",
                "Input.hit_id": "10",
                "Input.item_1": "101",
                "Input.item_2": "102",
                "Input.caption_1": "a caption,\nover two lines",
                **row,
            }
        )
    return out.getvalue()


def packed(*levels: str) -> str:
    return json.dumps(
        [{"item": 101 + i, "level": level, "elapsed_ms": 1500} for i, level in enumerate(levels)]
    )


def test_results_with_the_packed_answers_field_are_read_in_submit_format():
    text = results_csv([{"Answer.answers": packed("yes", "no")}], ("Answer.answers",))
    (row,), errors = parse_results_csv(text, source="results.csv")
    assert errors == []
    assert row.line == 2
    assert row.hit_external_id == "3HIT0000000000000000000000001"
    assert row.assignment_external_id == "3ASG0000000000000000000000001"
    assert row.worker_external_id == "A1WORKER00001"
    assert (row.status, row.hit_id) == ("Submitted", 10)
    assert [a["level"] for a in row.answers] == ["yes", "no"]
    assert row.answers[0] == {
        "item": 101,
        "level": "yes",
        "shortcomings": [],
        "wrong_concepts": [],
        "other_text": "",
        "elapsed_ms": 1500,
    }
    assert row.accept_time == datetime(2025, 10, 9, 14, 30, 20, tzinfo=UTC)  # PDT is UTC-7


def test_crowd_form_task_answers_are_read_from_the_packed_field_or_the_single_fields():
    packed_form = json.dumps([{"answers": packed("weak_no", "yes"), "hit_id": "10"}])
    fields_form = json.dumps(
        [
            {
                "level_1": {"weak_no": True, "yes": False},  # one way crowd-form writes radios
                "why_1_wrong_description": {"on": True},
                "concept_1_other": {"on": True},
                "other_1": "the clock",
                "level_2": "no",  # and the plain way
            }
        ]
    )
    text = results_csv(
        [{"Answer.taskAnswers": packed_form}, {"Answer.taskAnswers": fields_form}],
        ("Answer.taskAnswers",),
    )
    rows, errors = parse_results_csv(text, source="r.csv")
    assert errors == []
    assert [a["level"] for a in rows[0].answers] == ["weak_no", "yes"]
    first, second = rows[1].answers
    assert first["item"] == 101 and first["level"] == "weak_no"
    assert first["shortcomings"] == ["wrong_description"]
    assert (first["wrong_concepts"], first["other_text"]) == (["other"], "the clock")
    assert second == {**second, "item": 102, "level": "no", "shortcomings": []}


def test_result_problems_are_reported_with_file_and_line():
    text = results_csv(
        [
            {"Answer.answers": packed("yes", "no")},  # lines 2-3 (a caption spans two lines)
            {"Answer.answers": packed("yes", "no"), "AssignmentStatus": "Returned"},  # 4-5
            {"Answer.answers": "{not json", "AssignmentId": "3ASG2"},  # 6-7
            {"Answer.answers": packed("maybe", "no"), "AssignmentId": "3ASG3"},  # 8-9
            {"Answer.answers": "", "Input.item_1": "", "Input.item_2": ""},  # 10-11
        ],
        ("Answer.answers",),
    )
    rows, errors = parse_results_csv(text, source="results.csv")
    assert [row.line for row in rows] == [2]
    assert errors == [
        "results.csv:4: AssignmentStatus 'Returned' is not one of Submitted, Approved, Rejected",
        "results.csv:6: the `answers` field is not JSON (Expecting property name enclosed in "
        "double quotes)",
        "results.csv:8: item 101: no answer chosen (got 'maybe')",
        "results.csv:10: no answers: neither an `answers` field nor `level_N` fields",
    ]


def test_tampered_answers_are_file_and_line_errors_not_crashes():
    def answers(**first) -> str:
        return json.dumps([{"item": 101, "level": "yes", **first}, {"item": 102, "level": "no"}])

    text = results_csv(
        [
            {"Answer.answers": answers(level="weak_no", shortcomings=5)},  # lines 2-3
            {"Answer.answers": answers().replace('"yes"', '"yes", "elapsed_ms": 1e400')},  # 4-5
            {"Answer.answers": answers(level=["yes"])},  # 6-7
            {"Answer.answers": answers(wrong_concepts={"other": True})},  # 8-9
            {"Answer.answers": answers(elapsed_ms="NaN")},  # 10-11
            {"Answer.answers": answers().replace("101", "1e400")},  # 12-13
            {"Answer.answers": answers(elapsed_ms=1234.6)},  # 14-15: fine
        ],
        ("Answer.answers",),
    )
    rows, errors = parse_results_csv(text, source="results.csv")
    assert errors == [
        "results.csv:2: item 101: `shortcomings` must be a list of codes (got 5)",
        "results.csv:4: item 101: `elapsed_ms` must be a number of milliseconds (got inf)",
        "results.csv:6: item 101: no answer chosen (got ['yes'])",
        "results.csv:8: item 101: `wrong_concepts` must be a list of codes (got {'other': True})",
        "results.csv:10: item 101: `elapsed_ms` must be a number of milliseconds (got 'NaN')",
        "results.csv:12: answer for item inf: not an item id",
    ]
    assert [(row.line, row.answers[0]["elapsed_ms"]) for row in rows] == [(14, 1234)]


def test_a_file_that_is_not_a_results_csv_says_which_column_is_missing():
    rows, errors = parse_results_csv("a,b\n1,2\n", source="x.csv")
    assert rows == []
    assert errors[0].startswith("x.csv:1: missing column 'HITId'")


def test_results_times_are_read_in_mturks_format():
    assert parse_mturk_time("Mon Jan 06 09:00:00 UTC 2025") == datetime(2025, 1, 6, 9, tzinfo=UTC)
    assert parse_mturk_time("Mon Jan 06 09:00:00 PST 2025").hour == 17
    assert parse_mturk_time("yesterday") is None


def test_the_decisions_csv_fills_approve_and_reject_for_reupload():
    text = results_csv(
        [
            {"AssignmentId": "3ASGA"},
            {"AssignmentId": "3ASGB"},
            {"AssignmentId": "3ASGC"},
        ]
    )
    out = decisions_csv(
        text, {"3ASGA": (True, ""), "3ASGB": (False, "pair 3 was wrong"), "3ASGC": None}
    )
    rows = {row["AssignmentId"]: row for row in csv.DictReader(io.StringIO(out))}
    assert (rows["3ASGA"]["Approve"], rows["3ASGA"]["Reject"]) == ("x", "")
    assert (rows["3ASGB"]["Approve"], rows["3ASGB"]["Reject"]) == ("", "pair 3 was wrong")
    assert (rows["3ASGC"]["Approve"], rows["3ASGC"]["Reject"]) == ("", "")
    assert rows["3ASGA"]["Input.caption_1"] == "a caption,\nover two lines"  # the rest intact
