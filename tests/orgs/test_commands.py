import io

import pytest
from django.core.management import CommandError, call_command

from orgs.models import IngestToken, Membership, Organization
from orgs.services import token_authenticate


def run(*args, stdin: str | None = None, monkeypatch=None) -> str:
    out = io.StringIO()
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_org_is_idempotent(db):
    run("create_org", "cloudops", "--name", "Cloud operator")
    output = run("create_org", "cloudops", "--name", "Cloud operator")
    assert "exists" in output
    assert Organization.objects.filter(slug="cloudops").count() == 1


def test_create_org_rejects_a_bad_slug_naming_the_field(db):
    with pytest.raises(CommandError, match="slug"):
        run("create_org", "Bad Slug", "--name", "x")


def test_create_user_reads_the_password_from_stdin(db, monkeypatch):
    run("create_org", "infra", "--name", "Infra")
    run(
        "create_user", "infra", "carol", "--role", "admin", stdin="a-long-password\n", monkeypatch=monkeypatch
    )
    membership = Membership.objects.select_related("user", "org").get(user__username="carol")
    assert membership.org.slug == "infra"
    assert membership.role == "admin"
    assert membership.user.check_password("a-long-password")


def test_create_user_refuses_a_short_password(db, monkeypatch):
    run("create_org", "infra", "--name", "Infra")
    with pytest.raises(CommandError, match="at least 8"):
        run("create_user", "infra", "carol", stdin="short\n", monkeypatch=monkeypatch)


def test_create_user_refuses_an_unknown_org(db, monkeypatch):
    with pytest.raises(CommandError, match="no organisation 'nowhere'"):
        run("create_user", "nowhere", "carol", stdin="a-long-password\n", monkeypatch=monkeypatch)


def test_create_user_refuses_moving_a_person_to_another_org(db, monkeypatch):
    run("create_org", "infra", "--name", "Infra")
    run("create_org", "storage", "--name", "Storage")
    run("create_user", "infra", "carol", stdin="a-long-password\n", monkeypatch=monkeypatch)
    with pytest.raises(CommandError, match="already belongs to infra"):
        run("create_user", "storage", "carol", stdin="a-long-password\n", monkeypatch=monkeypatch)


def test_create_token_prints_the_secret_last_and_stores_only_its_hash(db):
    run("create_org", "gpuvendor", "--name", "GPU vendor")
    output = run("create_token", "gpuvendor", "--name", "dcgm", "--expires", "30")
    secret = output.strip().splitlines()[-1]
    token = IngestToken.objects.get(name="dcgm")
    assert secret.startswith(f"jl_{token.prefix}_")
    assert secret not in token.token_hash
    assert token.expires_at is not None
    assert token_authenticate(secret) == token


def test_create_token_refuses_a_duplicate_name(db):
    run("create_org", "gpuvendor", "--name", "GPU vendor")
    run("create_token", "gpuvendor", "--name", "dcgm")
    with pytest.raises(CommandError, match="already has a token named 'dcgm'"):
        run("create_token", "gpuvendor", "--name", "dcgm")
