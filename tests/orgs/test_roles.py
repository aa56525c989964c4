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
