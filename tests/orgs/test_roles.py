"""One rule for writes: viewer < analyst < admin, with one wording (orgs.access.require_role)."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied

from orgs.access import require_role
from orgs.models import Role
from tests.conftest import _member


@pytest.mark.parametrize(
    ("has", "needs", "allowed"),
    [
        (Role.VIEWER, Role.VIEWER, True),
        (Role.VIEWER, Role.ANALYST, False),
        (Role.ANALYST, Role.ANALYST, True),
        (Role.ANALYST, Role.ADMIN, False),
        (Role.ADMIN, Role.ANALYST, True),
        (Role.ADMIN, Role.ADMIN, True),
    ],
)
def test_a_role_allows_what_is_at_or_below_it(org_a, has, needs, allowed):
    user = _member(org_a, f"person-{has}", role=has)
    if allowed:
        assert require_role(user, needs, action="change incidents").org_id == org_a.pk
    else:
        with pytest.raises(PermissionDenied) as refused:
            require_role(user, needs, action="change incidents")
        assert "can change incidents" in str(refused.value) and f"you are a {has}" in str(refused.value)


def test_someone_of_no_organisation_may_write_nothing(db):
    with pytest.raises(PermissionDenied, match="only people of an organisation can change incidents"):
        require_role(AnonymousUser(), Role.VIEWER, action="change incidents")


def test_every_incident_write_asks_the_one_rule(org_a):
    """A viewer is refused each analyst write with require_role's wording, never a wording of its own."""
    from incidents.services import annotation_create, incident_create, incident_update

    analyst = _member(org_a, "ana", role=Role.ANALYST)
    viewer = _member(org_a, "vic", role=Role.VIEWER)
    incident = incident_create(user=analyst, title="slow init", window_start=0, window_end=60_000_000)
    writes = {
        "open incidents": lambda: incident_create(user=viewer, title="x", window_start=0, window_end=1),
        "change incidents": lambda: incident_update(incident=incident, user=viewer, title="y"),
        "annotate incidents": lambda: annotation_create(incident=incident, user=viewer, ts=0, text="z"),
    }
    for action, write in writes.items():
        with pytest.raises(PermissionDenied) as refused:
            write()
        assert str(refused.value) == f"only analysts and admins can {action}; you are a viewer"


def test_a_detector_run_as_a_viewer_may_read_but_not_store(org_a):
    from analysis.detection import detection_run
    from orgs.access import Scope

    viewer = _member(org_a, "vic", role=Role.VIEWER)
    scope = Scope.for_user(viewer)
    found, written = detection_run(user=viewer, scope=scope, start=0, end=60_000_000, write=False)
    assert (found, written) == ([], 0)
    with pytest.raises(
        PermissionDenied, match="only analysts and admins can store detections; you are a viewer"
    ):
        detection_run(user=viewer, scope=scope, start=0, end=60_000_000, write=True)


# -- sharing: the services decide who may hand data to another organisation ----------------------------


@pytest.fixture
def sharing_cast(org_a, org_b):
    """The owner (modeldev) with a viewer, an analyst and an admin; storage with a viewer, an analyst and
    an admin; a grant and a pending access request of storage's."""
    from orgs.models import Grant
    from orgs.services import access_request_create

    people = {
        (org.slug, role): _member(org, f"{org.slug}-{role}", role=role)
        for org in (org_a, org_b)
        for role in (Role.VIEWER, Role.ANALYST, Role.ADMIN)
    }
    grant = Grant.objects.create(owner=org_a, grantee=org_b, name="network", signals=["network"])
    access_request = access_request_create(
        requester_user=people[("storage", Role.VIEWER)], owner=org_a, reason="NIC lanes for the war room"
    )
    return people, grant, access_request


def _sharing_writes(org_a, org_b, grant, access_request):
    """Each grant and access-request service as a person would call it, by ``action`` wording."""
    from orgs.services import access_request_decide, grant_create, grant_revoke

    return {
        "share data": lambda user: grant_create(
            owner=org_a, grantee=org_b, name="logs", signals=["application"], created_by=user
        ),
        "revoke grants": lambda user: grant_revoke(grant=grant, revoked_by=user),
        "decide access requests": lambda user: access_request_decide(
            access_request=access_request, decided_by=user, approve=True
        ),
    }


@pytest.mark.parametrize(
    ("org", "role", "wording"),
    [
        ("modeldev", Role.VIEWER, "only your organisation's admins can {action}; you are a viewer"),
        ("modeldev", Role.ANALYST, "only your organisation's admins can {action}; you are a analyst"),
        ("storage", Role.VIEWER, "only your organisation's admins can {action}; you are a viewer"),
        ("storage", Role.ANALYST, "only your organisation's admins can {action}; you are a analyst"),
        ("storage", Role.ADMIN, "only the owner's admins can {action}"),
    ],
)
def test_a_sharing_service_called_directly_refuses_anyone_but_the_owners_admins(
    org_a, org_b, sharing_cast, org, role, wording
):
    from orgs.models import AccessRequest, Grant

    people, grant, access_request = sharing_cast
    for action, write in _sharing_writes(org_a, org_b, grant, access_request).items():
        with pytest.raises(PermissionDenied) as refused:
            write(people[(org, role)])
        assert str(refused.value) == wording.format(action=action)
    assert Grant.objects.filter(owner=org_a).count() == 1
    assert Grant.objects.get(pk=grant.pk).revoked_at is None
    assert AccessRequest.objects.get(pk=access_request.pk).status == AccessRequest.Status.PENDING


def test_a_sharing_service_refuses_someone_of_no_organisation(org_a, org_b, sharing_cast):
    _, grant, access_request = sharing_cast
    for action, write in _sharing_writes(org_a, org_b, grant, access_request).items():
        with pytest.raises(PermissionDenied, match=f"only people of an organisation can {action}"):
            write(AnonymousUser())


def test_the_owners_admin_shares_revokes_and_decides(org_a, org_b, sharing_cast):
    from orgs.models import AccessRequest

    people, grant, access_request = sharing_cast
    admin = people[("modeldev", Role.ADMIN)]
    writes = _sharing_writes(org_a, org_b, grant, access_request)
    created = writes["share data"](admin)
    assert (created.owner_id, created.grantee_id, created.created_by_id) == (org_a.pk, org_b.pk, admin.pk)
    assert writes["revoke grants"](admin).revoked_at is not None
    decided = writes["decide access requests"](admin)
    assert decided.status == AccessRequest.Status.APPROVED and decided.grant.owner_id == org_a.pk


def test_the_api_answers_a_sharing_refusal_as_403_in_the_one_error_shape(org_a, org_b, sharing_cast):
    from tests.factories import signed_in

    people, grant, access_request = sharing_cast
    analyst = signed_in(people[("modeldev", Role.ANALYST)])
    refusals = [
        analyst.post("/api/v1/grants", {"grantee": "storage", "signals": ["network"]}, format="json"),
        analyst.delete(f"/api/v1/grants/{grant.pk}"),
        analyst.post(f"/api/v1/access-requests/{access_request.pk}/decide", {"approve": True}, format="json"),
        signed_in(people[("storage", Role.ADMIN)]).delete(f"/api/v1/grants/{grant.pk}"),
    ]
    assert [response.status_code for response in refusals] == [403, 403, 403, 403]
    assert [response.json() for response in refusals] == [
        {"error": "only your organisation's admins can share data; you are a analyst", "errors": []},
        {"error": "only your organisation's admins can revoke grants; you are a analyst", "errors": []},
        {
            "error": "only your organisation's admins can decide access requests; you are a analyst",
            "errors": [],
        },
        {"error": "only the owner's admins can revoke grants", "errors": []},
    ]


def test_the_sharing_page_shows_the_services_refusal(org_a, org_b, sharing_cast):
    from orgs.models import AccessRequest, Grant
    from tests.factories import signed_in

    people, grant, access_request = sharing_cast
    analyst = signed_in(people[("modeldev", Role.ANALYST)])
    for form in (
        {"action": "grant", "grantee": "storage", "signals": "network"},
        {"action": "revoke", "grant": grant.pk},
        {"action": "approve", "request": access_request.pk},
    ):
        page = analyst.post("/sharing/", form, follow=True).content.decode()
        assert "only your organisation&#x27;s admins can " in page, form
    assert Grant.objects.filter(owner=org_a, revoked_at__isnull=True).count() == 1
    assert AccessRequest.objects.get(pk=access_request.pk).status == AccessRequest.Status.PENDING
