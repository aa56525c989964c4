"""``manage.py check_grants`` lists the grants whose selection changed when label matchers took
PromQL's meaning (and those refused now), so an upgrade says what each owner now shares."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from orgs.models import Grant
from tests.factories import gauge, write
from timeline.management.commands import check_grants


@pytest.fixture
def storage(org_b):
    series = [gauge("nfs_read_latency_seconds", {"node": f"node-0{i}"}, (1.0,)) for i in range(1, 4)]
    series.append(gauge("nfs_read_latency_seconds", {}, (1.0,)))
    write(org_b, series=series, source="array")
    return org_b


def _grant(owner, grantee, name: str, matcher: str) -> Grant:
    # stored as an older release stored it: no validation of the pattern
    return Grant.objects.create(owner=owner, grantee=grantee, name=name, label_matchers=[matcher])


def _run(*args: str) -> str:
    out = StringIO()
    call_command("check_grants", *args, stdout=out)
    return out.getvalue()


def test_a_grant_whose_selection_changed_is_listed_and_an_unchanged_one_is_not(org_a, storage):
    _grant(storage, org_a, "empty node", 'node=""')
    _grant(storage, org_a, "two nodes", 'node=~"node-0[12]"')
    out = _run()
    assert "'empty node'" in out and "0 of the owner's series selected before, 1 now" in out
    assert "'two nodes'" not in out
    assert "check_grants: 1 grant(s)" in out


def test_a_grant_refused_now_is_listed_as_sharing_nothing(org_a, storage):
    _grant(storage, org_a, "backreference", 'node=~"(node)-\\1"')
    out = _run()
    assert "'backreference'" in out and "shares nothing now" in out
    with pytest.raises(CommandError):
        _run("--fail")


def test_a_pattern_that_stalled_the_old_rules_is_reported_not_waited_for(org_a, org_b, monkeypatch):
    write(org_b, series=[gauge("m", {"node": "a" * 40}, (1.0,))], source="array")
    _grant(org_b, org_a, "stalls", 'node=~"(a*)*b"')
    monkeypatch.setattr(check_grants, "OLD_RULES_SECONDS", 1.0)
    out = _run()
    assert "'stalls'" in out and "stalled readers" in out
