"""A batch's HIT type: what workers see in MTurk's list, what they are paid, who may work,
and the CreateHITType request with MTurk's system qualifications.

Pure: no Django, no boto3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from .errors import MTurkInputError

# System qualification types (MTurk API reference, QualificationRequirement).
QUAL_PERCENT_APPROVED = "000000000000000000L0"  # Worker_PercentAssignmentsApproved
QUAL_NUMBER_HITS_APPROVED = "00000000000000000040"  # Worker_NumberHITsApproved
QUAL_LOCALE = "00000000000000000071"  # Worker_Locale
_LOCALE = re.compile(r"^[A-Z]{2}(-[A-Z0-9]{1,3})?$")
CENT = Decimal("0.01")
MONEY_DIGITS = 9  # whole-dollar digits an amount may have: less than a billion dollars
# How a batch's qualification round goes to MTurk (annotation.mturk.qualification):
# "test": a QualificationType with the round as its Test and AnswerKey, scored by MTurk;
# "granted": a QualificationType without a test, which the platform grants.
QUALIFICATION_MODES = ("test", "granted")
# Who the qualification requirement stops. Test: workers must find the HITs to find the
# test (MTurk offers it beside a HIT they cannot accept yet), so they still see and preview
# them. Granted: nobody can earn it on MTurk, so the HITs stay out of other workers' sight.
QUALIFICATION_GUARDS = {"test": "Accept", "granted": "DiscoverPreviewAndAccept"}


@dataclass(frozen=True)
class HitTypeSettings:
    """What workers see in MTurk's list of HITs, what they are paid, and who may work."""

    title: str = "Does the description match the image?"
    description: str = (
        "Look at image and description pairs and say whether each description is correct "
        "for its image; say why when it is only partly right."
    )
    keywords: str = "image, caption, description, matching, categorization"
    reward: Decimal = Decimal("0.50")  # per assignment, in USD
    assignment_minutes: int = 30  # time a worker has after accepting
    lifetime_hours: int = 72  # how long the HITs stay on the market
    auto_approval_hours: int = 72  # MTurk approves and pays by itself after this
    min_approval_rate: int | None = 95  # percent; None: no requirement
    min_approved_hits: int | None = 500  # None: no requirement
    locales: tuple[str, ...] = ("US",)  # ISO 3166 countries (or "US-CA"); empty: anywhere
    # Batches with a qualification round only: one of QUALIFICATION_MODES, and how long a
    # worker who failed MTurk's test waits before trying again (when the batch allows
    # more than one attempt).
    qualification_mode: str = "test"
    qualification_retry_minutes: int = 24 * 60
    # USD per hour of measured work (mitl.wages); None: no check. Not part of MTurk's HIT
    # type: it sets the publication warning and the top-ups proposed after review.
    min_hourly_wage: Decimal | None = Decimal("15.00")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["reward"] = str(self.reward)
        data["min_hourly_wage"] = _money_text(self.min_hourly_wage)
        data["locales"] = list(self.locales)
        return data


_TEXT_LIMITS = {"title": 128, "description": 2000, "keywords": 1000}
_INT_LIMITS = {
    "assignment_minutes": (1, 365 * 24 * 60),
    "lifetime_hours": (1, 365 * 24),
    "auto_approval_hours": (0, 30 * 24),
    "min_approval_rate": (0, 100),
    "min_approved_hits": (0, 1_000_000),
    # MTurk sets no minimum; each retry shows the worker a new score, so a short delay
    # would let a worker find the answer key by changing one answer at a time.
    "qualification_retry_minutes": (60, 30 * 24 * 60),
}


def parse_hit_type_settings(
    raw: Mapping[str, Any], *, defaults: HitTypeSettings | None = None
) -> HitTypeSettings:
    """Validate settings from a form or JSON; missing keys keep `defaults`."""
    base = defaults or HitTypeSettings()
    known = set(HitTypeSettings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise MTurkInputError(
            f"MTurk settings: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    values = base.to_json() | dict(raw)
    for name, limit in _TEXT_LIMITS.items():
        text = str(values[name]).strip()
        if not text and name != "keywords":
            raise MTurkInputError(f"MTurk settings: `{name}` must not be empty")
        if len(text) > limit:
            raise MTurkInputError(
                f"MTurk settings: `{name}` is {len(text)} characters long; MTurk allows {limit}"
            )
        values[name] = text
    values["reward"] = parse_money(values["reward"], what="`reward`")
    wage = values["min_hourly_wage"]
    values["min_hourly_wage"] = (
        None
        if wage is None or not str(wage).strip()
        else parse_money(wage, what="`min_hourly_wage`")
    )
    for name, (low, high) in _INT_LIMITS.items():
        value = values[name]
        if name.startswith("min_") and value in (None, ""):
            values[name] = None
            continue
        values[name] = _parse_int(name, value, low, high)
    values["locales"] = _parse_locales(values["locales"])
    mode = str(values["qualification_mode"]).strip().lower()
    if mode not in QUALIFICATION_MODES:
        raise MTurkInputError(
            f"MTurk settings: `qualification_mode` must be one of {', '.join(QUALIFICATION_MODES)}"
            f" (got {values['qualification_mode']!r}): test, MTurk scores its own test; "
            "granted, the platform grants the qualification"
        )
    values["qualification_mode"] = mode
    return HitTypeSettings(**values)


def parse_money(value: Any, *, what: str = "amount") -> Decimal:
    """Return a USD amount of at least one cent, in whole cents."""
    try:
        amount = Decimal(str(value).strip().lstrip("$"))
    except InvalidOperation:
        raise MTurkInputError(f"{what} must be a dollar amount like 0.50 (got {value!r})") from None
    if not amount.is_finite() or amount < CENT:
        raise MTurkInputError(f"{what} must be at least $0.01 (got {value!r})")
    if amount.adjusted() >= MONEY_DIGITS:  # 1e100 would not even quantize to cents
        raise MTurkInputError(f"{what} must be below $1,000,000,000 (got {value!r})")
    if amount != amount.quantize(CENT):
        raise MTurkInputError(f"{what} must be in whole cents (got {value!r})")
    return amount.quantize(CENT)


def _money_text(amount: Decimal | None) -> str | None:
    return None if amount is None else str(amount)


def _parse_int(name: str, value: Any, low: int, high: int) -> int:
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None:
        raise MTurkInputError(f"MTurk settings: `{name}` must be a whole number (got {value!r})")
    if not low <= number <= high:
        raise MTurkInputError(
            f"MTurk settings: `{name}` must be between {low} and {high} (got {number})"
        )
    return number


def _parse_locales(value: Any) -> tuple[str, ...]:
    items = value.replace(",", " ").split() if isinstance(value, str) else list(value or [])
    locales = tuple(dict.fromkeys(str(item).strip().upper() for item in items))
    bad = [locale for locale in locales if not _LOCALE.match(locale)]
    if bad:
        raise MTurkInputError(
            f"MTurk settings: {bad[0]!r} is not a country code (ISO 3166, e.g. US, GB or US-CA)"
        )
    return locales


def qualification_requirements(
    settings: HitTypeSettings, *, sandbox: bool, qualification: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Return MTurk's QualificationRequirements for the worker history and locale settings,
    and the batch's own `qualification` requirement, if any.

    In the sandbox, the worker-history requirements are left out: sandbox workers (the
    requester testing its own HITs, usually) have no approved work, so they could not
    accept anything. The batch's qualification stays: sandbox workers can pass its test.
    """
    requirements: list[dict[str, Any]] = []
    if not sandbox and settings.min_approval_rate is not None:
        requirements.append(_at_least(QUAL_PERCENT_APPROVED, settings.min_approval_rate))
    if not sandbox and settings.min_approved_hits is not None:
        requirements.append(_at_least(QUAL_NUMBER_HITS_APPROVED, settings.min_approved_hits))
    if settings.locales:
        locales = [_locale_value(locale) for locale in settings.locales]
        requirements.append(
            {
                "QualificationTypeId": QUAL_LOCALE,
                "Comparator": "EqualTo" if len(locales) == 1 else "In",
                "LocaleValues": locales,
                "ActionsGuarded": "Accept",
            }
        )
    if qualification is not None:
        requirements.append(qualification)
    return requirements


def _at_least(qualification: str, value: int) -> dict[str, Any]:
    """Return a requirement that a worker's system qualification be at least `value`."""
    return {
        "QualificationTypeId": qualification,
        "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [value],
        "ActionsGuarded": "Accept",
    }


def _locale_value(locale: str) -> dict[str, str]:
    country, _, subdivision = locale.partition("-")
    return {"Country": country, "Subdivision": subdivision} if subdivision else {"Country": country}


def hit_type_request(
    settings: HitTypeSettings, *, sandbox: bool, qualification: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return the keyword arguments of MTurk's CreateHITType for these settings.

    MTurk keys HIT types on these arguments: another `qualification` gives another HITTypeId.
    """
    return {
        "Title": settings.title,
        "Description": settings.description,
        "Keywords": settings.keywords,
        "Reward": str(settings.reward),
        "AssignmentDurationInSeconds": settings.assignment_minutes * 60,
        "AutoApprovalDelayInSeconds": settings.auto_approval_hours * 3600,
        "QualificationRequirements": qualification_requirements(
            settings, sandbox=sandbox, qualification=qualification
        ),
    }
