"""Changing clock corrections: declare one, apply an estimate, switch one on or off.

Every change goes through ``orgs.access.require_role``: admins declare corrections and switch declared
ones; analysts (and admins) apply estimates of their own organisation's agents and switch those.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clock.estimators import HOUR_US, Estimate
from core.labels import SelectorError
from orgs.access import require_role
from orgs.grants import parse_sql_matcher
from orgs.models import Role
from timeline.models import ClockCorrection, ClockOrigin, Source

MAX_OFFSET_US = 24 * HOUR_US
MAX_DRIFT_US_PER_HOUR = 1_000_000  # 1 s per hour (278 ppm): far beyond a working oscillator


def _membership(user, *, admin: bool):
    if admin:
        return require_role(user, Role.ADMIN, action="declare or switch declared clock corrections")
    return require_role(user, Role.ANALYST, action="change clock corrections")


def _checked(
    *,
    offset_us: int,
    drift_us_per_hour: int,
    valid_from: int | None,
    valid_to: int | None,
    label_matcher: str,
) -> None:
    problems = {}
    if abs(offset_us) > MAX_OFFSET_US:
        problems["offset_us"] = "must be within 24 hours"
    if abs(drift_us_per_hour) > MAX_DRIFT_US_PER_HOUR:
        problems["drift_us_per_hour"] = "must be within 1 s per hour"
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        problems["valid_to"] = "must be after valid_from"
    if label_matcher:
        try:
            parse_sql_matcher(label_matcher)
        except SelectorError as exc:
            problems["labels"] = exc.reason
    if problems:
        raise ValidationError(problems)


def _source(org_id: int, name: str | None) -> Source | None:
    if not name:
        return None
    source = Source.objects.filter(org_id=org_id, name=name).first()
    if source is None:
        raise ValidationError({"source": f"your organisation has no source {name!r}"})
    return source


@transaction.atomic
def clock_correction_declare(
    *,
    user,
    offset_us: int,
    source: str | None = None,
    label_matcher: str = "",
    drift_us_per_hour: int = 0,
    reference_ts: int | None = None,
    valid_from: int | None = None,
    valid_to: int | None = None,
    uncertainty_us: int = 0,
    note: str = "",
) -> ClockCorrection:
    """An admin declares a correction of one of their organisation's agents; it is active at once."""
    membership = _membership(user, admin=True)
    _checked(
        offset_us=offset_us,
        drift_us_per_hour=drift_us_per_hour,
        valid_from=valid_from,
        valid_to=valid_to,
        label_matcher=label_matcher,
    )
    if drift_us_per_hour and reference_ts is None:
        reference_ts = valid_from
        if reference_ts is None:
            raise ValidationError({"reference": "a drift needs the time at which it is zero"})
    return ClockCorrection.objects.create(
        org=membership.org,
        source=_source(membership.org_id, source),
        label_matcher=label_matcher.strip(),
        offset_us=offset_us,
        drift_us_per_hour=drift_us_per_hour,
        reference_ts=reference_ts,
        valid_from=valid_from,
        valid_to=valid_to,
        origin=ClockOrigin.DECLARED,
        uncertainty_us=max(0, uncertainty_us),
        method="declared",
        note=note.strip()[:2000],
        created_by=user,
        changed_by=user,
    )


@transaction.atomic
def clock_correction_apply(*, user, estimate: Estimate, source: str, note: str = "") -> ClockCorrection:
    """An analyst or admin applies an estimate of one of their organisation's agents: it becomes an
    active correction that undoes the estimated error."""
    membership = _membership(user, admin=False)
    if estimate.org != membership.org.slug:
        raise PermissionDenied("only the organisation whose clock it is can apply an estimate")
    if estimate.bound:
        raise ValidationError({"estimate": "a bound is not an estimate; declare a correction instead"})
    matcher = f'node="{estimate.node}"' if estimate.node else ""
    offset, drift = -estimate.offset_us, -round(estimate.drift_us_per_hour)
    _checked(
        offset_us=offset,
        drift_us_per_hour=drift,
        valid_from=estimate.valid_from,
        valid_to=estimate.valid_to,
        label_matcher=matcher,
    )
    return ClockCorrection.objects.create(
        org=membership.org,
        source=_source(membership.org_id, source),
        label_matcher=matcher,
        offset_us=offset,
        drift_us_per_hour=drift,
        reference_ts=estimate.reference_us,
        valid_from=estimate.valid_from,
        valid_to=estimate.valid_to,
        origin=ClockOrigin.ESTIMATED,
        uncertainty_us=estimate.uncertainty_us,
        method=f"{estimate.method} ({estimate.pairs} pairs, against {estimate.against})"[:100],
        note=note.strip()[:2000],
        created_by=user,
        changed_by=user,
    )


@transaction.atomic
def clock_correction_set_active(*, user, correction: ClockCorrection, active: bool) -> ClockCorrection:
    """Switch a correction of the user's organisation on or off (admins; analysts for estimated ones)."""
    membership = _membership(user, admin=correction.origin == ClockOrigin.DECLARED)
    if correction.org_id != membership.org_id:
        raise PermissionDenied("only the organisation whose clock it is can switch its corrections")
    if correction.active != active:
        correction.active = active
        correction.changed_by = user
        correction.save(update_fields=["active", "changed_by", "changed_at"])
    return correction
