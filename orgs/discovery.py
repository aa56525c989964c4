"""What another organisation may learn about data it cannot read: the owner's decision.

A placeholder ("storage · storage: 126 series not shared with you — request access") tells a war room
that something exists and whom to ask. What it says is the owner's setting
(``Organization.unshared_disclosure``): ``none`` (that some data of a signal exists), ``counts`` (how
many series, the default) or ``described`` (the counts and the descriptions the owner published).
With ``announce_unshared`` off there is no placeholder at all.

A description (:class:`~orgs.models.UnsharedDescription`) is a name and a sentence the owner writes.
Its selector (signals, metric name globs) stays with the owner: it only decides to whom the
description is shown (a viewer with some of the selected series not shared with it) and is never
shown to anyone else. Nothing here derives text from metric names or labels.

Services change these settings and check the acting person's role themselves (admins of the owner);
selectors take a scope first and answer only the viewer's own organisation's descriptions.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet

from core.labels import glob_to_regex
from core.records import SIGNALS
from orgs.access import Scope, require_role, require_scope
from orgs.models import Organization, Role, UnsharedDescription, UnsharedDisclosure

MAX_PATTERNS = 20
MAX_PATTERN_LENGTH = 200
MAX_DESCRIPTIONS = 100
_ACTION = "decide what others learn of data not shared with them"


# ----------------------------------------------------------------------------- selectors


def descriptions_owned(scope: Scope) -> QuerySet[UnsharedDescription]:
    """The descriptions the viewer's own organisation wrote, selectors included (nobody else's)."""
    scope = require_scope(scope)
    if scope.viewer_org_id is None or not scope.own_org_ids:
        return UnsharedDescription.objects.none()
    return UnsharedDescription.objects.filter(owner_id=scope.viewer_org_id).select_related("owner")


def description_get(scope: Scope, description_id: int) -> UnsharedDescription | None:
    return descriptions_owned(scope).filter(pk=description_id).first()


def description_series_q(description: UnsharedDescription) -> Q:
    """The owner's series a description applies to, as a WHERE clause over ``Series`` fields (``org``,
    ``signal``, ``metric``): its signals (empty: all) and metric name globs (empty: all)."""
    q = Q(org_id=description.owner_id)
    if description.signals:
        q &= Q(signal__in=list(description.signals))
    if description.name_patterns:
        names = Q()
        for pattern in description.name_patterns:
            names |= Q(metric__regex=glob_to_regex(pattern))
        q &= names
    return q


# ----------------------------------------------------------------------------- services


@transaction.atomic
def disclosure_set(*, user, level: str) -> Organization:
    """Set what placeholders of the acting admin's organisation say (:class:`UnsharedDisclosure`)."""
    membership = require_role(user, Role.ADMIN, action=_ACTION)
    if level not in UnsharedDisclosure.values:
        raise ValidationError(
            {"unshared_disclosure": f"{level!r} is not one of {', '.join(UnsharedDisclosure.values)}"}
        )
    org = Organization.objects.select_for_update().get(pk=membership.org_id)
    if org.unshared_disclosure != level:
        org.unshared_disclosure = level
        org.save(update_fields=["unshared_disclosure"])
    return org


@transaction.atomic
def description_create(
    *,
    user,
    name: str,
    text: str = "",
    signals: list[str] | None = None,
    name_patterns: list[str] | None = None,
) -> UnsharedDescription:
    """Publish a description of a family of the acting admin's organisation's data."""
    membership = require_role(user, Role.ADMIN, action=_ACTION)
    fields = _validated(name=name, text=text, signals=signals or [], name_patterns=name_patterns or [])
    owned = UnsharedDescription.objects.filter(owner_id=membership.org_id)
    if owned.count() >= MAX_DESCRIPTIONS:
        raise ValidationError({"name": f"at most {MAX_DESCRIPTIONS} descriptions per organisation"})
    if owned.filter(name=fields["name"]).exists():
        raise ValidationError({"name": f"a description named {fields['name']!r} exists already"})
    return UnsharedDescription.objects.create(owner_id=membership.org_id, created_by=user, **fields)


@transaction.atomic
def description_update(
    *,
    user,
    description: UnsharedDescription,
    name: str | None = None,
    text: str | None = None,
    signals: list[str] | None = None,
    name_patterns: list[str] | None = None,
) -> UnsharedDescription:
    """Change a description of the acting admin's organisation; fields left None keep their value."""
    membership = require_role(user, Role.ADMIN, action=_ACTION)
    _require_owned(description, membership.org_id)
    fields = _validated(
        name=description.name if name is None else name,
        text=description.text if text is None else text,
        signals=description.signals if signals is None else signals,
        name_patterns=description.name_patterns if name_patterns is None else name_patterns,
    )
    clash = UnsharedDescription.objects.filter(owner_id=membership.org_id, name=fields["name"])
    if clash.exclude(pk=description.pk).exists():
        raise ValidationError({"name": f"a description named {fields['name']!r} exists already"})
    for field, value in fields.items():
        setattr(description, field, value)
    description.save()
    return description


@transaction.atomic
def description_delete(*, user, description: UnsharedDescription) -> None:
    """Withdraw a description of the acting admin's organisation."""
    membership = require_role(user, Role.ADMIN, action=_ACTION)
    _require_owned(description, membership.org_id)
    description.delete()


def _require_owned(description: UnsharedDescription, org_id: int) -> None:
    if description.owner_id != org_id:
        raise PermissionDenied(f"only the owner's admins can {_ACTION}")


def _validated(*, name: str, text: str, signals: list[str], name_patterns: list[str]) -> dict:
    name, text = " ".join(str(name).split()), " ".join(str(text).split())
    max_name = UnsharedDescription._meta.get_field("name").max_length
    max_text = UnsharedDescription._meta.get_field("text").max_length
    if not name:
        raise ValidationError({"name": "give the description a name others will read"})
    if len(name) > max_name:
        raise ValidationError({"name": f"at most {max_name} characters"})
    if len(text) > max_text:
        raise ValidationError({"text": f"at most {max_text} characters (one sentence)"})
    if not isinstance(signals, list) or not all(isinstance(s, str) for s in signals):
        raise ValidationError({"signals": "a list of signal names"})
    unknown = [s for s in signals if s not in SIGNALS]
    if unknown:
        raise ValidationError({"signals": f"unknown signal {unknown[0]!r}; choose from {', '.join(SIGNALS)}"})
    if not isinstance(name_patterns, list) or not all(isinstance(p, str) for p in name_patterns):
        raise ValidationError({"name_patterns": "a list of metric name globs"})
    patterns = [p.strip() for p in name_patterns if p.strip()]
    if len(patterns) > MAX_PATTERNS:
        raise ValidationError({"name_patterns": f"at most {MAX_PATTERNS} patterns"})
    for pattern in patterns:
        if len(pattern) > MAX_PATTERN_LENGTH or any(c.isspace() or c == "\x00" for c in pattern):
            raise ValidationError(
                {"name_patterns": f"{pattern[:40]!r} is not a metric name glob (no spaces, <= 200 chars)"}
            )
    return {
        "name": name,
        "text": text,
        "signals": sorted(set(signals)),
        "name_patterns": sorted(set(patterns)),
    }
