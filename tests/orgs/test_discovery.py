"""The owner decides what others learn of its unshared data: the services and the API.

``storage`` owns the settings; ``cloudops`` is another organisation. Services are called directly,
as each role of the owner and of the other organisation, and through ``/api/v1/unshared/*``."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from orgs.discovery import description_create, description_delete, description_update, disclosure_set
from orgs.models import Organization, Role, UnsharedDescription
from orgs.services import token_create
from tests.conftest import bearer_client
from tests.factories import member, member_client, organizations, signed_in


@pytest.fixture
def orgs(db) -> dict[str, Organization]:
    return organizations("storage", "cloudops")


@pytest.fixture
def admin(orgs):
    return member(orgs["storage"], "sven", Role.ADMIN)


@pytest.fixture
def description(admin) -> UnsharedDescription:
    return description_create(
        user=admin, name="Array capacity", text="How full each array is.", name_patterns=["array_*"]
    )


@pytest.mark.parametrize(
    ("org", "role"),
    [
        ("storage", Role.VIEWER),
        ("storage", Role.ANALYST),
        ("cloudops", Role.VIEWER),
        ("cloudops", Role.ADMIN),
    ],
)
def test_only_the_owners_admins_change_what_others_learn(orgs, description, org, role):
    someone = member(orgs[org], f"{org}-{role}", role)
    with pytest.raises(PermissionDenied):
        description_update(user=someone, description=description, name="Renamed")
    with pytest.raises(PermissionDenied):
        description_delete(user=someone, description=description)
    if org == "storage":  # another organisation's admin sets its own organisation's, never storage's
        with pytest.raises(PermissionDenied, match="only your organisation's admins can"):
            disclosure_set(user=someone, level="none")
        with pytest.raises(PermissionDenied, match="only your organisation's admins can"):
            description_create(user=someone, name="Other")
    description.refresh_from_db()
    assert description.name == "Array capacity"
    assert Organization.objects.get(slug="storage").unshared_disclosure == "counts"


def test_an_admin_sets_the_disclosure_of_its_own_organisation(orgs, admin):
    assert disclosure_set(user=admin, level="none").slug == "storage"
    assert Organization.objects.get(slug="storage").unshared_disclosure == "none"
    assert Organization.objects.get(slug="cloudops").unshared_disclosure == "counts"


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"name": "  "}, "name", "give the description a name"),
        ({"name": "x" * 81}, "name", "at most 80"),
        ({"name": "ok", "text": "x" * 301}, "text", "at most 300"),
        ({"name": "ok", "signals": ["storage", "disk"]}, "signals", "unknown signal 'disk'"),
        ({"name": "ok", "name_patterns": ["a b"]}, "name_patterns", "is not a metric name glob"),
        ({"name": "Array capacity"}, "name", "exists already"),
    ],
)
def test_a_bad_description_is_refused_naming_the_field(admin, description, fields, field, reason):
    with pytest.raises(ValidationError) as refused:
        description_create(user=admin, **fields)
    assert reason in " ".join(refused.value.message_dict[field])


def test_the_api_publishes_changes_and_withdraws_a_description(orgs):
    client = member_client(orgs["storage"], "sven")
    made = client.post(
        "/api/v1/unshared/descriptions",
        {"name": "Array capacity", "text": "How full.", "signals": ["storage"], "name_patterns": ["array_*"]},
        format="json",
    )
    assert made.status_code == 201, made.content
    url = f"/api/v1/unshared/descriptions/{made.json()['id']}"
    changed = client.patch(url, {"text": "How full each array is."}, format="json")
    assert changed.json()["text"] == "How full each array is." and changed.json()["name_patterns"] == [
        "array_*"
    ]
    assert [d["name"] for d in client.get("/api/v1/unshared/descriptions").json()["descriptions"]] == [
        "Array capacity"
    ]
    assert client.put(
        "/api/v1/unshared/disclosure", {"unshared_disclosure": "described"}, format="json"
    ).json() == {"unshared_disclosure": "described", "announce_unshared": True}
    assert client.delete(url).status_code == 204
    assert client.get(url).status_code == 404


def test_the_api_refuses_a_bad_level_and_a_bad_signal_naming_the_field(orgs):
    client = member_client(orgs["storage"], "sven")
    level = client.put("/api/v1/unshared/disclosure", {"unshared_disclosure": "all"}, format="json")
    assert level.status_code == 400 and "unshared_disclosure" in level.content.decode()
    signal = client.post("/api/v1/unshared/descriptions", {"name": "x", "signals": ["disk"]}, format="json")
    assert signal.status_code == 400 and "signals" in signal.content.decode()


def test_another_organisation_never_sees_a_description_or_its_selector(orgs, description):
    other = member_client(orgs["cloudops"], "carl")
    assert other.get("/api/v1/unshared/descriptions").json() == {"descriptions": []}
    url = f"/api/v1/unshared/descriptions/{description.pk}"
    assert other.get(url).status_code == 404
    assert other.patch(url, {"name": "mine"}, format="json").status_code == 404
    assert other.delete(url).status_code == 404
    reader = bearer_client(token_create(org=orgs["cloudops"], name="ro", purpose="read").secret)
    assert reader.get(url).status_code == 404
    assert (
        reader.put("/api/v1/unshared/disclosure", {"unshared_disclosure": "none"}, format="json").status_code
        == 403
    )  # a token acts for no person: no role to change settings


def test_a_viewer_of_the_owner_reads_but_does_not_change(orgs, description):
    viewer = signed_in(member(orgs["storage"], "vic", Role.VIEWER))
    assert viewer.get("/api/v1/unshared/descriptions").json()["descriptions"][0]["name_patterns"] == [
        "array_*"
    ]
    refused = viewer.delete(f"/api/v1/unshared/descriptions/{description.pk}")
    assert refused.status_code == 403 and "admins" in refused.content.decode()
    assert UnsharedDescription.objects.filter(pk=description.pk).exists()
