"""The minimum hourly wage among a batch's HIT type settings: parsed as money, empty for no
check, stored like the others, and never sent to MTurk."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.mturk.errors import MTurkInputError
from annotation.mturk.hit_type import HitTypeSettings, hit_type_request, parse_hit_type_settings


def test_the_minimum_wage_defaults_to_15_dollars_and_parses_as_money():
    assert HitTypeSettings().min_hourly_wage == Decimal("15.00")
    assert parse_hit_type_settings({"min_hourly_wage": "$12"}).min_hourly_wage == Decimal("12.00")
    assert parse_hit_type_settings({"min_hourly_wage": "7.25"}).min_hourly_wage == Decimal("7.25")
    for empty in ("", "  ", None):
        assert parse_hit_type_settings({"min_hourly_wage": empty}).min_hourly_wage is None
    with pytest.raises(MTurkInputError, match="`min_hourly_wage` must be in whole cents"):
        parse_hit_type_settings({"min_hourly_wage": "15.005"})
    with pytest.raises(MTurkInputError, match="`min_hourly_wage` must be a dollar amount"):
        parse_hit_type_settings({"min_hourly_wage": "fifteen"})
    # Too large to quantize to cents: a message, not decimal.InvalidOperation (a 500).
    with pytest.raises(MTurkInputError, match=r"`min_hourly_wage` must be below \$1,000,000,000"):
        parse_hit_type_settings({"min_hourly_wage": "1e100"})
    assert parse_hit_type_settings({"min_hourly_wage": "999999999.99"}).min_hourly_wage == (
        Decimal("999999999.99")
    )


def test_the_minimum_wage_round_trips_through_json_and_stays_off_mturk():
    for wage in (Decimal("15.00"), None):
        settings = HitTypeSettings(min_hourly_wage=wage)
        stored = settings.to_json()
        assert stored["min_hourly_wage"] == (None if wage is None else "15.00")
        assert parse_hit_type_settings(stored) == settings
    assert parse_hit_type_settings({}).min_hourly_wage == Decimal("15.00")  # stored before it
    request = hit_type_request(HitTypeSettings(min_hourly_wage=Decimal("30.00")), sandbox=True)
    assert request == hit_type_request(HitTypeSettings(), sandbox=True)
