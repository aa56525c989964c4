"""Everything that changes incidents, annotations, notes, permalinks and snapshots."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from core.canonical import canonical_json
from core.timeparse import TimestampError, format_rfc3339, now_us, parse_timestamp
from orgs.access import Scope, require_owner_or_admin, require_role
from orgs.models import Organization, Role
from timeline.models import (
    Annotation,
    Incident,
    IncidentInvitation,
    IncidentNote,
    IncidentSeverity,
    IncidentStatus,
    InvitationStatus,
    Permalink,
    Snapshot,
    SnapshotPart,
)

SHORT_ID_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"


def _system_note(incident: Incident, text: str) -> None:
    IncidentNote.objects.create(incident=incident, kind=IncidentNote.Kind.SYSTEM, text=text)


def _instant(field: str, value, *, now: int) -> int:
    """µs from RFC 3339, epoch, or ``now``/``now-3h`` (frozen to an absolute time here)."""
    if isinstance(value, int):
        return value
    from timeline.selectors import QueryError, parse_instant

    try:
        return parse_instant(field, str(value), now=now)
    except (QueryError, TimestampError) as exc:
        raise ValidationError({field: str(exc)}) from exc


@transaction.atomic
def incident_create(
    *,
    user,
    title: str,
    window_start,
    window_end=None,
    participants: list[str] | None = None,
    severity: str = IncidentSeverity.SEV2,
    lanes: list | None = None,
) -> Incident:
    """Open an incident owned by the user's organisation (analysts and admins). The organisations of
    ``participants`` are invited: each takes part once one of its analysts or admins accepts
    (:func:`incident_invitation_decide`)."""
    membership = require_role(user, Role.ANALYST, action="open incidents")
    if not title.strip():
        raise ValidationError({"title": "give the incident a title"})
    if severity not in IncidentSeverity.values:
        raise ValidationError({"severity": f"one of {', '.join(IncidentSeverity.values)}"})
    now = now_us()
    start = _instant("window_start", window_start, now=now)
    end = None if window_end in (None, "") else _instant("window_end", window_end, now=now)
    if end is not None and end <= start:
        raise ValidationError({"window_end": "must be after window_start"})
    incident = Incident.objects.create(
        title=title.strip()[:200],
        owner=membership.org,
        severity=severity,
        window_start=start,
        window_end=end,
        lanes=list(lanes or []),
        created_by=user,
        updated_by=user,
    )
    invited = _organisations(participants or [])
    incident.participants.set([membership.org])
    _system_note(incident, f"{user.get_username()} ({membership.org.slug}) opened the incident")
    asked = _invite(incident, user, invited)
    if asked:
        _system_note(incident, "invited " + ", ".join(org.slug for org in asked))
    return incident


def _organisations(slugs: list[str]) -> list[Organization]:
    orgs = list(Organization.objects.filter(slug__in=slugs))
    missing = sorted(set(slugs) - {org.slug for org in orgs})
    if missing:
        raise ValidationError({"participants": f"no organisation {missing[0]!r}"})
    return orgs


@transaction.atomic
def incident_update(*, incident: Incident, user, **changes) -> Incident:
    """Change status, severity, window, summary, root cause, title or lanes, or invite organisations
    (``participants``: each takes part once it accepts; none is removed).

    Status changes and invitations leave a system entry in the incident's notes."""
    require_role(user, Role.ANALYST, action="change incidents")
    allowed = {"status", "severity", "summary", "root_cause", "title", "window_start", "window_end", "lanes"}
    unknown = set(changes) - allowed - {"participants"}
    if unknown:
        raise ValidationError({sorted(unknown)[0]: "cannot be changed"})
    if "status" in changes and changes["status"] not in IncidentStatus.values:
        raise ValidationError({"status": f"one of {', '.join(IncidentStatus.values)}"})
    if "severity" in changes and changes["severity"] not in IncidentSeverity.values:
        raise ValidationError({"severity": f"one of {', '.join(IncidentSeverity.values)}"})
    now = now_us()
    for field in ("window_start", "window_end"):
        if field in changes and changes[field] not in (None, ""):
            changes[field] = _instant(field, changes[field], now=now)
    if changes.get("status") and changes["status"] != incident.status:
        _system_note(incident, f"{user.get_username()} set the status to {changes['status']}")
    if "participants" in changes:
        asked = _invite(incident, user, _organisations(list(changes.pop("participants"))))
        if asked:
            _system_note(incident, f"{user.get_username()} invited " + ", ".join(org.slug for org in asked))
    for field, value in changes.items():
        setattr(incident, field, value)
    incident.updated_by = user
    incident.save()
    return incident


def _invite(incident: Incident, user, organisations: list[Organization]) -> list[Organization]:
    """Ask each of ``organisations`` that neither takes part nor is already asked to take part in
    ``incident`` (asking again one that declined); returns those asked."""
    taking_part = set(incident.participants.values_list("pk", flat=True))
    answers = dict(incident.invitations.values_list("org_id", "status"))
    asked = []
    now = timezone.now()
    for org in organisations:
        if org.pk in taking_part or answers.get(org.pk) == InvitationStatus.PENDING:
            continue
        IncidentInvitation.objects.update_or_create(
            incident=incident,
            org=org,
            defaults={
                "status": InvitationStatus.PENDING,
                "invited_by": user,
                "invited_at": now,
                "decided_by": None,
                "decided_at": None,
            },
        )
        asked.append(org)
    return asked


@transaction.atomic
def incident_invitation_decide(*, invitation: IncidentInvitation, user, accept: bool) -> IncidentInvitation:
    """Accept (the organisation takes part from now on) or decline an invitation to an incident. Only
    an analyst or admin of the invited organisation answers: an invitation is that organisation's
    consent to a war room, never the inviter's decision."""
    membership = require_role(user, Role.ANALYST, action="answer invitations to incidents")
    if membership.org_id != invitation.org_id:
        raise PermissionDenied("only the invited organisation can answer its invitation")
    invitation = IncidentInvitation.objects.select_for_update().get(pk=invitation.pk)
    if invitation.status != InvitationStatus.PENDING:
        raise ValidationError({"status": f"this invitation is already {invitation.status}"})
    invitation.status = InvitationStatus.ACCEPTED if accept else InvitationStatus.DECLINED
    invitation.decided_by = user
    invitation.decided_at = timezone.now()
    invitation.save(update_fields=["status", "decided_by", "decided_at"])
    if accept:
        invitation.incident.participants.add(invitation.org)
    _system_note(
        invitation.incident,
        f"{user.get_username()} ({membership.org.slug}) {invitation.status} the invitation",
    )
    return invitation


@transaction.atomic
def incident_participants_add_without_consent(*, incident: Incident, organisations: list[str]) -> None:
    """Make ``organisations`` take part in ``incident`` at once, as if each had accepted. Only for jobs
    no request reaches (the scenario loader recording a war room that already happened): a person's
    invitation waits for the other organisation's answer (:func:`incident_invitation_decide`)."""
    now = timezone.now()
    for org in _organisations(organisations):
        IncidentInvitation.objects.update_or_create(
            incident=incident,
            org=org,
            defaults={"status": InvitationStatus.ACCEPTED, "invited_at": now, "decided_at": now},
        )
        incident.participants.add(org)


def _check_participant(incident: Incident, org_id: int) -> None:
    if incident.owner_id != org_id and not incident.participants.filter(pk=org_id).exists():
        raise PermissionDenied("your organisation does not take part in this incident")


@transaction.atomic
def annotation_create(
    *, incident: Incident, user, ts, text: str, end_ts=None, tags: list[str] | None = None
) -> Annotation:
    membership = require_role(user, Role.ANALYST, action="annotate incidents")
    _check_participant(incident, membership.org_id)
    if not text.strip():
        raise ValidationError({"text": "an annotation needs text"})
    now = now_us()
    start = _instant("ts", ts, now=now)
    end = None if end_ts in (None, "") else _instant("end_ts", end_ts, now=now)
    if end is not None and end < start:
        raise ValidationError({"end_ts": "must not be before ts"})
    return Annotation.objects.create(
        incident=incident,
        org=membership.org,
        author=user,
        ts=start,
        end_ts=end,
        text=text.strip()[:2000],
        tags=[str(tag)[:40] for tag in (tags or [])][:20],
    )


@transaction.atomic
def annotation_update(*, annotation: Annotation, user, **changes) -> Annotation:
    if annotation.author_id != user.pk:
        raise PermissionDenied("only the author can edit an annotation")
    now = now_us()
    if "text" in changes:
        if not str(changes["text"]).strip():
            raise ValidationError({"text": "an annotation needs text"})
        annotation.text = str(changes["text"]).strip()[:2000]
    if "tags" in changes:
        annotation.tags = [str(tag)[:40] for tag in changes["tags"]][:20]
    if "ts" in changes:
        annotation.ts = _instant("ts", changes["ts"], now=now)
    if "end_ts" in changes:
        annotation.end_ts = (
            None if changes["end_ts"] in (None, "") else _instant("end_ts", changes["end_ts"], now=now)
        )
    annotation.save()
    return annotation


def note_add(*, incident: Incident, user, text: str) -> IncidentNote:
    membership = require_role(user, Role.VIEWER, action="add notes to incidents")
    _check_participant(incident, membership.org_id)
    if not text.strip():
        raise ValidationError({"text": "a note needs text"})
    return IncidentNote.objects.create(
        incident=incident, org=membership.org, author=user, text=text.strip()[:4000]
    )


def freeze_state(state: dict, *, now: int | None = None) -> dict:
    """A view state with relative times (``now-1h``) turned into absolute RFC 3339 times."""
    now = now_us() if now is None else now
    frozen = dict(state)
    for field in ("from", "to"):
        if field in frozen and frozen[field] not in (None, ""):
            frozen[field] = format_rfc3339(_instant(field, frozen[field], now=now))
    if "from" not in frozen or "to" not in frozen:
        raise ValidationError({"state": "a permalink needs 'from' and 'to'"})
    if parse_timestamp(frozen["from"]) >= parse_timestamp(frozen["to"]):
        raise ValidationError({"state": "'from' must be before 'to'"})
    frozen.pop("live", None)
    return frozen


def _short_id() -> str:
    return "".join(secrets.choice(SHORT_ID_ALPHABET) for _ in range(10))


@transaction.atomic
def permalink_create(*, user, state: dict, incident: Incident | None = None) -> Permalink:
    """A link to ``state`` with its times frozen and the clock corrections in force recorded (``clock``:
    aligned or not, each correction as its creator saw it), so the evidence says how times were shown."""
    from clock.model import aligned_param, clock_state, use_clock

    membership = require_role(user, Role.VIEWER, action="share links")
    if incident is not None:
        _check_participant(incident, membership.org_id)
    for _ in range(5):
        short_id = _short_id()
        if not Permalink.objects.filter(short_id=short_id).exists():
            break
    frozen = freeze_state(state)
    scope = Scope.for_user(user)
    with use_clock(scope, aligned=aligned_param(str(frozen.get("align") or ""))):
        frozen["clock"] = clock_state(scope)
    return Permalink.objects.create(
        short_id=short_id, org=membership.org, created_by=user, incident=incident, state=frozen
    )


def permalink_revoke(*, permalink: Permalink, user) -> Permalink:
    require_owner_or_admin(
        user, created_by_id=permalink.created_by_id, org_id=permalink.org_id, action="revoke a link"
    )
    if permalink.revoked_at is None:
        permalink.revoked_at = timezone.now()
        permalink.save(update_fields=["revoked_at"])
    return permalink


def snapshot_allowed(permalink: Permalink, org_id: int | None) -> bool:
    """May a member of ``org_id`` freeze ``permalink``? Its creator's organisation may, and for a link
    of an incident the incident's participants; anyone else who opens the link reads it through their
    own scope but adds nothing to it (another organisation's request answers 404)."""
    if org_id is None:
        return False
    if permalink.org_id == org_id:
        return True
    incident = permalink.incident
    return incident is not None and (
        incident.owner_id == org_id or incident.participants.filter(pk=org_id).exists()
    )


@transaction.atomic
def snapshot_create(*, permalink: Permalink, user, expires_at: datetime | None = None) -> Snapshot:
    """Freeze what each organisation of the link's incident (or only the creator's) could see. Only a
    member of the link's organisation or of a participant of its incident may (:func:`snapshot_allowed`).

    Each part holds the data both the creator and that organisation may read, presented through
    that organisation's scope (its redaction), the grants in force and the alignment settings; its
    SHA-256 is what anyone allowed can verify later. A part is made from the link's state as that
    organisation may see it (``permalink_state``), so it names no lane the organisation cannot read."""
    from incidents.selectors import permalink_state
    from incidents.views_data import view_data

    membership = require_role(user, Role.VIEWER, action="take snapshots")
    if not snapshot_allowed(permalink, membership.org_id):
        raise PermissionDenied("only the link's organisation and its incident's participants can freeze it")
    creator_scope = Scope.for_user(user)
    orgs = [membership.org]
    if permalink.incident_id is not None:
        orgs += [org for org in permalink.incident.participants.all() if org.pk != membership.org_id]
    snapshot = Snapshot.objects.create(permalink=permalink, created_by=user, expires_at=expires_at)
    for org in orgs:
        scope = (
            creator_scope
            if org.pk == membership.org_id
            else Scope.dangerously_as_org(org.pk, f"snapshot:{org.slug}")
        )
        content = view_data(
            scope,
            permalink_state(scope, permalink),
            also_readable_by=creator_scope,
            incident=permalink.incident,
        )
        content["what_changed"] = _snapshot_ranking(
            scope,
            content["window"],
            aligned=content["clock"].get("aligned", True),
            also_readable_by=None if org.pk == membership.org_id else creator_scope,
        )
        content["snapshot"] = {
            "created_at": snapshot.created_at.isoformat(),
            "created_by": user.get_username(),
            "for_org": org.slug,
            "grants_in_force": scope.grants_in_force(),
        }
        body = canonical_json(content)
        SnapshotPart.objects.create(
            snapshot=snapshot, org=org, content=body, sha256=hashlib.sha256(body).hexdigest()
        )
    return snapshot


SNAPSHOT_RANKING_ENTRIES = 20


def _snapshot_ranking(scope: Scope, window: dict, *, aligned: bool, also_readable_by: Scope | None) -> dict:
    """What changed in the snapshot's window against the ranking's default baseline (as long, just
    before it, or the nearest stretch with data, and the same hours a day and a week before: what the
    war room's panel showed), ranked through ``scope``, keeping in a part for another organisation
    only the entries the creator may read too (``changes.also_readable``)."""
    from analysis.changes import Period, also_readable, rank_changes
    from analysis.presenters import ranking_json
    from clock.model import use_clock
    from timeline.selectors import Window

    shown = Window.from_params(window)
    period = Period(shown.start, shown.end)
    with use_clock(scope, aligned=aligned):
        ranking = rank_changes(scope, window=period, limit=SNAPSHOT_RANKING_ENTRIES)
    if also_readable_by is not None:
        with use_clock(also_readable_by, aligned=aligned):
            ranking.entries = also_readable(ranking.entries, also_readable_by, period)
    return ranking_json(ranking)


def snapshot_revoke(*, snapshot: Snapshot, user) -> Snapshot:
    require_owner_or_admin(
        user,
        created_by_id=snapshot.created_by_id,
        org_id=snapshot.permalink.org_id,
        action="revoke a snapshot",
    )
    if snapshot.revoked_at is None:
        snapshot.revoked_at = timezone.now()
        snapshot.save(update_fields=["revoked_at"])
    return snapshot
