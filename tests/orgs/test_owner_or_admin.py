"""One rule for what its creator or their organisation's admins may do (orgs.access.require_owner_or_admin),
and the revocations that ask it."""

import pytest
from django.core.exceptions import PermissionDenied

from orgs.access import require_owner_or_admin
from orgs.models import Role
from tests.conftest import _member

ACTION = "revoke a link"


def test_the_creator_may(org_a):
    creator = _member(org_a, "creator", role=Role.VIEWER)
    allowed = require_owner_or_admin(creator, created_by_id=creator.pk, org_id=org_a.pk, action=ACTION)
    assert allowed.user_id == creator.pk


def test_an_admin_of_the_same_organisation_may(org_a):
    creator = _member(org_a, "creator", role=Role.VIEWER)
    admin = _member(org_a, "admin-a", role=Role.ADMIN)
    allowed = require_owner_or_admin(admin, created_by_id=creator.pk, org_id=org_a.pk, action=ACTION)
    assert allowed.user_id == admin.pk


def test_an_admin_of_another_organisation_may_not(org_a, org_b):
    creator = _member(org_a, "creator", role=Role.VIEWER)
    admin_b = _member(org_b, "admin-b", role=Role.ADMIN)
    with pytest.raises(
        PermissionDenied, match="only its creator or their organisation's admins can revoke a link"
    ):
        require_owner_or_admin(admin_b, created_by_id=creator.pk, org_id=org_a.pk, action=ACTION)


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ANALYST])
def test_another_member_who_is_not_an_admin_may_not(org_a, role):
    creator = _member(org_a, "creator", role=Role.VIEWER)
    member = _member(org_a, f"member-{role}", role=role)
    with pytest.raises(PermissionDenied, match="only its creator or their organisation's admins"):
        require_owner_or_admin(member, created_by_id=creator.pk, org_id=org_a.pk, action=ACTION)


def test_an_object_without_a_creator_is_left_to_the_admins(org_a):
    member = _member(org_a, "member", role=Role.ANALYST)
    admin = _member(org_a, "admin-a", role=Role.ADMIN)
    with pytest.raises(PermissionDenied):
        require_owner_or_admin(member, created_by_id=None, org_id=org_a.pk, action=ACTION)
    assert (
        require_owner_or_admin(admin, created_by_id=None, org_id=org_a.pk, action=ACTION).org_id == org_a.pk
    )


def test_a_permalink_is_revoked_by_its_creator_or_their_admins_only(org_a, org_b):
    from incidents.services import permalink_create, permalink_revoke

    creator = _member(org_a, "creator", role=Role.VIEWER)
    colleague = _member(org_a, "colleague", role=Role.ANALYST)
    admin_b = _member(org_b, "admin-b", role=Role.ADMIN)
    admin_a = _member(org_a, "admin-a", role=Role.ADMIN)
    link = permalink_create(user=creator, state={"from": "now-1h", "to": "now"})
    for outsider in (colleague, admin_b):
        with pytest.raises(PermissionDenied):
            permalink_revoke(permalink=link, user=outsider)
        link.refresh_from_db()
        assert link.revoked_at is None
    assert permalink_revoke(permalink=link, user=admin_a).revoked_at is not None
