import pytest
from django.utils import timezone

from orgs.access import NoScope, Scope
from orgs.models import IngestToken
from orgs.services import token_authenticate, token_create, token_revoke
from timeline.models import Event, Series


def test_series_cannot_be_read_without_a_scope(db):
    with pytest.raises(NoScope):
        list(Series.objects.all())


def test_events_cannot_be_read_without_a_scope(db):
    with pytest.raises(NoScope):
        Event.objects.filter(signal="application").count()


def test_a_read_with_something_that_is_not_a_scope_raises(db):
    with pytest.raises(NoScope):
        Series.objects.scoped(None)


def test_a_push_token_gets_no_read_scope(org_a):
    token = token_create(org=org_a, name="agent").token
    with pytest.raises(NoScope, match="write-only"):
        Scope.for_token(token)


def test_a_read_token_sees_its_own_organisation(org_a):
    token = token_create(org=org_a, name="script", purpose="read").token
    assert Scope.for_token(token).own_org_ids == {org_a.pk}


def test_a_member_scope_covers_only_their_organisation(member_a, org_b):
    scope = Scope.for_user(member_a)
    assert set(scope.organizations()) == {member_a.membership.org}


def test_a_revoked_token_no_longer_authenticates(org_a):
    issued = token_create(org=org_a, name="agent")
    token_revoke(token=issued.token)
    assert token_authenticate(issued.secret) is None


def test_an_expired_token_no_longer_authenticates(org_a):
    issued = token_create(org=org_a, name="agent")
    IngestToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now())
    assert token_authenticate(issued.secret) is None


def test_a_token_with_a_wrong_secret_does_not_authenticate(org_a):
    issued = token_create(org=org_a, name="agent")
    assert token_authenticate(issued.secret[:-2] + "xx") is None
