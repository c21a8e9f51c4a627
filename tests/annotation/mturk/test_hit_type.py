"""HIT type settings and their CreateHITType request, checked against botocore's real API
model."""

from __future__ import annotations

from decimal import Decimal

import botocore.session
import pytest
from botocore.validate import ParamValidator

from annotation.mturk.errors import MTurkInputError
from annotation.mturk.hit_type import (
    QUAL_LOCALE,
    HitTypeSettings,
    hit_type_request,
    parse_hit_type_settings,
    qualification_requirements,
)

MODEL = botocore.session.get_session().get_service_model("mturk")


def assert_valid_request(operation: str, params: dict) -> None:
    """Fail unless botocore's MTurk model accepts these parameters (types, enums, required)."""
    shape = MODEL.operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()


def test_settings_default_to_a_valid_hit_type():
    settings = parse_hit_type_settings({})
    assert settings == HitTypeSettings()
    request = hit_type_request(settings, sandbox=False)
    assert_valid_request("CreateHITType", request)
    assert request["Reward"] == "0.50"
    assert request["AssignmentDurationInSeconds"] == 30 * 60
    assert request["AutoApprovalDelayInSeconds"] == 72 * 3600


def test_settings_from_a_form_are_typed_and_normalised():
    settings = parse_hit_type_settings(
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
    assert parse_hit_type_settings(settings.to_json()) == settings  # round trip


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
        parse_hit_type_settings(raw)


def test_production_requires_history_and_locale_with_the_system_qualification_ids():
    settings = HitTypeSettings(min_approval_rate=97, min_approved_hits=1000, locales=("US",))
    requirements = qualification_requirements(settings, sandbox=False)
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
    (locale,) = qualification_requirements(
        HitTypeSettings(locales=("US-CA", "GB"), min_approval_rate=None, min_approved_hits=None),
        sandbox=False,
    )
    assert locale["Comparator"] == "In"
    assert locale["LocaleValues"] == [{"Country": "US", "Subdivision": "CA"}, {"Country": "GB"}]
    assert_valid_request("CreateHITType", hit_type_request(settings, sandbox=False))


def test_the_sandbox_leaves_out_the_worker_history_requirements():
    requirements = qualification_requirements(HitTypeSettings(), sandbox=True)
    assert [req["QualificationTypeId"] for req in requirements] == [QUAL_LOCALE]
    no_locale = HitTypeSettings(locales=())
    assert qualification_requirements(no_locale, sandbox=True) == []


def test_the_qualification_settings_are_checked_and_kept():
    settings = parse_hit_type_settings(
        {"qualification_mode": " Granted ", "qualification_retry_minutes": "90"}
    )
    assert (settings.qualification_mode, settings.qualification_retry_minutes) == ("granted", 90)
    assert parse_hit_type_settings(settings.to_json()) == settings  # as stored in batch.mturk
    assert HitTypeSettings().qualification_mode == "test"
    with pytest.raises(MTurkInputError, match="`qualification_mode` must be one of test, granted"):
        parse_hit_type_settings({"qualification_mode": "quiz"})
    with pytest.raises(MTurkInputError, match="between 60 and 43200 \\(got 30\\)"):
        parse_hit_type_settings({"qualification_retry_minutes": 30})


def test_the_batchs_qualification_comes_last_and_stays_in_the_sandbox():
    own = {
        "QualificationTypeId": "3QUAL1",
        "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [80],
        "ActionsGuarded": "Accept",
    }
    sandbox = qualification_requirements(HitTypeSettings(), sandbox=True, qualification=own)
    assert [req["QualificationTypeId"] for req in sandbox] == [QUAL_LOCALE, "3QUAL1"]
    request = hit_type_request(HitTypeSettings(), sandbox=False, qualification=own)
    assert request["QualificationRequirements"][-1] == own
    assert len(request["QualificationRequirements"]) == 4
    assert_valid_request("CreateHITType", request)
