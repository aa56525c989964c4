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
    from timeline.services import annotation_create, incident_create, incident_update

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
    from orgs.access import Scope
    from timeline.analysis.detection import detection_run

    viewer = _member(org_a, "vic", role=Role.VIEWER)
    scope = Scope.for_user(viewer)
    found, written = detection_run(user=viewer, scope=scope, start=0, end=60_000_000, write=False)
    assert (found, written) == ([], 0)
    with pytest.raises(
        PermissionDenied, match="only analysts and admins can store detections; you are a viewer"
    ):
        detection_run(user=viewer, scope=scope, start=0, end=60_000_000, write=True)
