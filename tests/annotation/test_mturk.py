"""The pure MTurk helpers: HIT type requests checked against botocore's real API model,
the ExternalQuestion, URL checks, rejection feedback, and the offline CSV files."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from decimal import Decimal

import botocore.session
import pytest
from botocore.validate import ParamValidator

from annotation import mturk
from annotation.mturk import HitTypeSettings, MTurkInputError
from mitl.judgements import Level
from mitl.quality import GoldenMiss

MODEL = botocore.session.get_session().get_service_model("mturk")


def assert_valid_request(operation: str, params: dict) -> None:
    """Fail unless botocore's MTurk model accepts these parameters (types, enums, required)."""
    shape = MODEL.operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()


# --- HIT type ---------------------------------------------------------------------------


def test_settings_default_to_a_valid_hit_type():
    settings = mturk.parse_hit_type_settings({})
    assert settings == HitTypeSettings()
    request = mturk.hit_type_request(settings, sandbox=False)
    assert_valid_request("CreateHITType", request)
    assert request["Reward"] == "0.50"
    assert request["AssignmentDurationInSeconds"] == 30 * 60
    assert request["AutoApprovalDelayInSeconds"] == 72 * 3600


def test_settings_from_a_form_are_typed_and_normalised():
    settings = mturk.parse_hit_type_settings(
        {
            "reward": "$1.2",
            "assignment_minutes": "45",
            "min_approval_rate": "",
            "min_approved_hits": "100",
            "locales": "us, gb US-ca",
            "title": "  Judge pairs  ",
        }
    )
    assert settings.reward == Decimal("1.20")
    assert settings.assignment_minutes == 45
    assert settings.min_approval_rate is None
    assert settings.min_approved_hits == 100
    assert settings.locales == ("US", "GB", "US-CA")
    assert settings.title == "Judge pairs"
    assert mturk.parse_hit_type_settings(settings.to_json()) == settings  # round trip


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"reward": "0.005"}, "at least $0.01"),
        ({"reward": "0.505"}, "whole cents"),
        ({"reward": "lots"}, "dollar amount"),
        ({"title": "x" * 129}, "MTurk allows 128"),
        ({"title": " "}, "`title` must not be empty"),
        ({"min_approval_rate": 101}, "between 0 and 100"),
        ({"lifetime_hours": "a week"}, "whole number"),
        ({"locales": ["USA"]}, "not a country code"),
        ({"rewards": "1"}, "unknown key 'rewards'"),
    ],
)
def test_bad_settings_say_how_to_fix_them(raw, message):
    with pytest.raises(MTurkInputError, match=message.replace("$", r"\$")):
        mturk.parse_hit_type_settings(raw)


def test_production_requires_history_and_locale_with_the_system_qualification_ids():
    settings = HitTypeSettings(min_approval_rate=97, min_approved_hits=1000, locales=("US",))
    requirements = mturk.qualification_requirements(settings, sandbox=False)
    by_id = {req["QualificationTypeId"]: req for req in requirements}
    assert by_id["000000000000000000L0"]["IntegerValues"] == [97]  # PercentAssignmentsApproved
    assert by_id["00000000000000000040"]["IntegerValues"] == [1000]  # NumberHITsApproved
    assert by_id["00000000000000000071"] == {  # Locale
        "QualificationTypeId": "00000000000000000071",
        "Comparator": "EqualTo",
        "LocaleValues": [{"Country": "US"}],
        "ActionsGuarded": "Accept",
    }
    assert all(req["Comparator"] == "GreaterThanOrEqualTo" for req in requirements[:2])


def test_several_locales_use_in_and_subdivisions():
    settings = HitTypeSettings(locales=("US-CA", "GB"), min_approval_rate=None)
    (locale,) = mturk.qualification_requirements(
        HitTypeSettings(locales=("US-CA", "GB"), min_approval_rate=None, min_approved_hits=None),
        sandbox=False,
    )
    assert locale["Comparator"] == "In"
    assert locale["LocaleValues"] == [{"Country": "US", "Subdivision": "CA"}, {"Country": "GB"}]
    assert_valid_request("CreateHITType", mturk.hit_type_request(settings, sandbox=False))


def test_the_sandbox_leaves_out_the_worker_history_requirements():
    requirements = mturk.qualification_requirements(HitTypeSettings(), sandbox=True)
    assert [req["QualificationTypeId"] for req in requirements] == [mturk.QUAL_LOCALE]
    no_locale = HitTypeSettings(locales=())
    assert mturk.qualification_requirements(no_locale, sandbox=True) == []


def test_the_external_question_frames_the_url_at_full_height():
    url = "https://mitl.example.org/mturk/hits/7/abc/?a=1&b=2"
    xml = mturk.external_question_xml(url)
    root = ET.fromstring(xml)
    ns = {"q": mturk.EXTERNAL_QUESTION_NS}
    assert root.tag == f"{{{mturk.EXTERNAL_QUESTION_NS}}}ExternalQuestion"
    assert root.find("q:ExternalURL", ns).text == url  # & escaped in the XML, intact once read
    assert root.find("q:FrameHeight", ns).text == "0"
    assert "&amp;" in xml


# --- URLs -------------------------------------------------------------------------------


def test_the_base_url_is_required_and_https_for_production():
    with pytest.raises(MTurkInputError, match="set MTURK_EXTERNAL_BASE_URL"):
        mturk.external_base_url("", production=False)
    with pytest.raises(MTurkInputError, match="production HITs need an HTTPS base URL"):
        mturk.external_base_url("http://mitl.example.org", production=True)
    with pytest.raises(MTurkInputError, match="must look like"):
        mturk.external_base_url("mitl.example.org", production=False)
    assert mturk.external_base_url("http://tunnel.test/", production=False) == "http://tunnel.test"
    assert (
        mturk.external_base_url(" https://mitl.example.org/app/ ", production=True)
        == "https://mitl.example.org/app"
    )


@pytest.mark.parametrize(
    ("turk_submit_to", "expected"),
    [
        ("https://www.mturk.com", "https://www.mturk.com/mturk/externalSubmit"),
        (
            "https://workersandbox.mturk.com/",
            "https://workersandbox.mturk.com/mturk/externalSubmit",
        ),
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765/mturk/externalSubmit"),  # allowed here
    ],
)
def test_turk_submit_to_from_an_allowed_host_gives_the_external_submit_url(
    turk_submit_to, expected
):
    allowed = (*mturk.SUBMIT_HOSTS, "http://127.0.0.1:8765")
    assert mturk.submit_url(turk_submit_to, allowed=allowed) == expected


@pytest.mark.parametrize(
    "turk_submit_to",
    [
        "",
        "https://www.mturk.com.evil.example",
        "http://www.mturk.com",  # not HTTPS
        "https://evil.example/?next=https://www.mturk.com",
        "https://www.mturk.com/somewhere/else",
        "javascript:alert(1)",
        "http://127.0.0.1:8765",  # a stand-in that is not configured
    ],
)
def test_turk_submit_to_elsewhere_is_refused(turk_submit_to):
    with pytest.raises(MTurkInputError, match="is not one of MTurk's sites"):
        mturk.submit_url(turk_submit_to, allowed=mturk.SUBMIT_HOSTS)


def test_request_tokens_stay_within_mturks_limit():
    assert mturk.request_token("mitl", "sandbox", 12, 3456) == "mitl-sandbox-12-3456"
    assert len(mturk.request_token("mitl-replace", "3" * 50)) <= mturk.TOKEN_MAX
    with pytest.raises(MTurkInputError, match="longer than 64"):
        mturk.request_token("x" * 65)


# --- feedback ---------------------------------------------------------------------------


def test_rejection_feedback_names_each_failed_check_pair_and_the_answer_given():
    text = mturk.rejection_feedback(
        reviewer_text="Rejected automatically: pair 3 is a known match but was answered no",
        misses=[GoldenMiss(3, True, Level.NO), GoldenMiss(9, False, Level.WEAK_YES)],
    )
    assert "Rejected automatically" not in text  # the friendlier wording replaces it
    assert "pair 3 matches its description, but you answered “100% NO”" in text
    assert "pair 9 does not match its description, but you answered “Partially YES, but…”" in text


def test_a_reviewers_words_come_first_and_the_text_fits_mturks_limit():
    text = mturk.rejection_feedback(
        reviewer_text="You answered every pair the same way.",
        misses=[GoldenMiss(n, True, Level.NO) for n in range(1, 80)],
    )
    assert text.startswith("You answered every pair the same way. Check pairs")
    assert len(text) == mturk.FEEDBACK_MAX
    assert text.endswith("…")
    alone = mturk.rejection_feedback(reviewer_text="Spam.", misses=[])
    assert alone == "Spam."


# --- the offline path -------------------------------------------------------------------


def input_hits() -> list[mturk.InputHit]:
    def item(n: int) -> mturk.InputItem:
        return mturk.InputItem(n, f"https://mitl.example.org/i/{n}", f'caption "{n}", with comma')

    return [
        mturk.InputHit(batch_id=5, hit_id=10, items=[item(1), item(2), item(3)]),
        mturk.InputHit(batch_id=5, hit_id=11, items=[item(4), item(5)]),  # the short last one
    ]


def test_the_batch_input_csv_has_one_row_per_hit_and_pads_short_hits():
    rows = list(csv.DictReader(io.StringIO(mturk.batch_input_csv(input_hits()))))
    assert len(rows) == 2
    assert list(rows[0]) == [
        "batch_id",
        "hit_id",
        *[f"{col}_{n}" for n in (1, 2, 3) for col in ("item", "image_url", "caption")],
    ]
    assert rows[0]["caption_1"] == 'caption "1", with comma'
    assert rows[1]["hit_id"] == "11"
    assert (rows[1]["item_3"], rows[1]["image_url_3"], rows[1]["caption_3"]) == ("", "", "")


def test_the_layout_is_a_crowd_form_with_every_pairs_fields():
    html = mturk.layout_html(pairs=3, followups=True)
    assert '<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>' in html
    assert "<crowd-form>" in html and "</crowd-form>" in html
    assert 'name="answers"' in html and 'value="${hit_id}"' in html
    for n in (1, 2, 3):
        assert f'data-item="${{item_{n}}}"' in html
        assert f'<img src="${{image_url_{n}}}"' in html
        assert f"<blockquote>${{caption_{n}}}</blockquote>" in html
        for level in Level:
            assert f'name="level_{n}" value="{level.value}"' in html
        assert f'name="why_{n}_wrong_description"' in html
        assert f'name="concept_{n}_quantity"' in html
        assert f'name="other_{n}"' in html
    assert "pair_4" not in html and "level_4" not in html
    assert "golden" not in html.lower()
    assert "why_1_" not in mturk.layout_html(pairs=1, followups=False)


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
    (row,), errors = mturk.parse_results_csv(text, source="results.csv")
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
    rows, errors = mturk.parse_results_csv(text, source="r.csv")
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
    rows, errors = mturk.parse_results_csv(text, source="results.csv")
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
    rows, errors = mturk.parse_results_csv(text, source="results.csv")
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
    rows, errors = mturk.parse_results_csv("a,b\n1,2\n", source="x.csv")
    assert rows == []
    assert errors[0].startswith("x.csv:1: missing column 'HITId'")


def test_results_times_are_read_in_mturks_format():
    assert mturk.parse_mturk_time("Mon Jan 06 09:00:00 UTC 2025") == datetime(
        2025, 1, 6, 9, tzinfo=UTC
    )
    assert mturk.parse_mturk_time("Mon Jan 06 09:00:00 PST 2025").hour == 17
    assert mturk.parse_mturk_time("yesterday") is None


def test_the_decisions_csv_fills_approve_and_reject_for_reupload():
    text = results_csv(
        [
            {"AssignmentId": "3ASGA"},
            {"AssignmentId": "3ASGB"},
            {"AssignmentId": "3ASGC"},
        ]
    )
    out = mturk.decisions_csv(
        text, {"3ASGA": (True, ""), "3ASGB": (False, "pair 3 was wrong"), "3ASGC": None}
    )
    rows = {row["AssignmentId"]: row for row in csv.DictReader(io.StringIO(out))}
    assert (rows["3ASGA"]["Approve"], rows["3ASGA"]["Reject"]) == ("x", "")
    assert (rows["3ASGB"]["Approve"], rows["3ASGB"]["Reject"]) == ("", "pair 3 was wrong")
    assert (rows["3ASGC"]["Approve"], rows["3ASGC"]["Reject"]) == ("", "")
    assert rows["3ASGA"]["Input.caption_1"] == "a caption,\nover two lines"  # the rest intact
