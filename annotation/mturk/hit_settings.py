"""A batch's HIT type settings as stored (over the defaults), and what they will cost.

`Batch.mturk["settings"]` is the one place a batch's reward lives: the wizard writes it
when it creates the batch, the MTurk page and `mturk_publish --settings` change it, and
every page, estimate and publication reads it here (`batch_reward`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from annotation.models import Batch
from mitl.config import batch_config
from mitl.costs import CostEstimate, cost_estimate

from .errors import MTurkError, MTurkInputError
from .hit_type import HitTypeSettings, parse_hit_type_settings
from .state import state_update

# Settings the platform alone uses (the minimum hourly wage: warnings and top-ups), which
# may change after publication.
PLATFORM_SETTINGS = frozenset({"min_hourly_wage"})


def batch_hit_settings(batch: Batch) -> HitTypeSettings:
    """Return the batch's HIT type settings: the stored ones over the defaults."""
    defaults = HitTypeSettings(assignment_minutes=batch_config(batch).assignment_minutes)
    return parse_hit_type_settings((batch.mturk or {}).get("settings", {}), defaults=defaults)


def hit_settings_or_defaults(batch: Batch) -> HitTypeSettings:
    """Return the batch's HIT type settings; the defaults when the stored ones do not parse."""
    try:
        return batch_hit_settings(batch)
    except MTurkInputError:
        return HitTypeSettings(assignment_minutes=batch_config(batch).assignment_minutes)


def batch_reward(batch: Batch) -> Decimal:
    """Return the batch's reward per assignment in USD: stored, else the default."""
    return hit_settings_or_defaults(batch).reward


def mturk_batch_cost(*, batch: Batch, hit_settings: HitTypeSettings) -> CostEstimate:
    """Estimate the batch's MTurk bill: rewards of every assignment plus the commission."""
    return cost_estimate(
        config=batch_config(batch),
        reward_per_assignment=hit_settings.reward,
        hits=batch.hits.count(),
    ).cost


def batch_published(batch: Batch) -> bool:
    """Say whether any HIT of the batch is on MTurk (through the API or the offline path)."""
    return batch.hits.filter(external_id__isnull=False).exists()


def mturk_settings_save(*, batch: Batch, raw: dict[str, Any]) -> HitTypeSettings:
    """Validate and store (some of) the batch's HIT type settings, and the cost they give.

    Once a HIT is published only the platform's own settings (`PLATFORM_SETTINGS`, not part
    of MTurk's HIT type) may change.
    """
    if batch_published(batch) and set(raw) - PLATFORM_SETTINGS:
        raise MTurkError(
            f"batch {batch.pk} already has HITs on MTurk: its HIT type settings can no "
            "longer change (MTurk keeps one HIT type per batch); only "
            + ", ".join(f"`{name}`" for name in sorted(PLATFORM_SETTINGS))
            + " may"
        )
    try:  # keys left out keep their stored (or default) values
        hit_settings = parse_hit_type_settings(raw, defaults=batch_hit_settings(batch))
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    cost = mturk_batch_cost(batch=batch, hit_settings=hit_settings)

    def store(state: dict[str, Any]) -> None:
        state["settings"] = hit_settings.to_json()
        state["cost_estimate"] = cost.to_json()

    batch.mturk = state_update(batch.pk, store)
    return hit_settings
