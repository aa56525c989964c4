"""Security headers of every answer: Content-Security-Policy, Permissions-Policy, Referrer-Policy, COOP.

tests/browser/test_warroom.py checks in Chromium that the pages run under this policy without a
violation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.test import override_settings

from tests.conftest import nic_batch, push

ROOT = Path(__file__).resolve().parents[2]


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for part in policy.split(";"):
        name, *sources = part.split()
        parsed[name] = sources
    return parsed


def assert_security_headers(response) -> None:
    policy = directives(response["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]  # no inline script, no eval
    assert policy["style-src"] == ["'self'", "'unsafe-inline'"]  # Plotly writes inline styles
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    features = dict(item.strip().split("=") for item in response["Permissions-Policy"].split(","))
    assert {"camera", "microphone", "geolocation", "usb"} <= set(features)
    assert set(features.values()) == {"()"}
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert response["X-Content-Type-Options"] == "nosniff"


def assert_resource_headers(response) -> None:
    """What a script, a stylesheet or a JSON answer carries: a policy under which, opened on its own,
    it loads nothing and cannot be framed; no Permissions-Policy (it governs documents only)."""
    assert directives(response["Content-Security-Policy"]) == {
        "default-src": ["'none'"],
        "frame-ancestors": ["'none'"],
    }
    assert "Permissions-Policy" not in response
    assert "Cross-Origin-Opener-Policy" not in response  # a document's header
    assert "Access-Control-Allow-Origin" not in response  # the pages load from their own origin
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_the_login_page_carries_the_security_headers(client, db):
    response = client.get("/login/")
    assert response.status_code == 200
    assert_security_headers(response)


def test_the_war_room_page_carries_the_security_headers(client_a):
    response = client_a.get("/timeline/")
    assert response.status_code == 200
    assert_security_headers(response)


def test_api_answers_carry_the_closed_policy(client_a, pusher_a):
    assert_resource_headers(client_a.get("/api/v1/series"))
    assert_resource_headers(push(pusher_a, nic_batch()))


def test_static_modules_carry_the_closed_policy_not_the_page_policy(client_a):
    """The page policy is ~500 bytes that a browser ignores on a script: not sent on the ~20 modules."""
    page = client_a.get("/timeline/")
    script = client_a.get("/static/timeline/first_request.js")
    assert script.status_code == 200
    assert_resource_headers(script)
    assert len(script["Content-Security-Policy"]) < len(page["Content-Security-Policy"]) // 4


def test_an_svg_opened_on_its_own_runs_nothing(client_a):
    """An SVG is a document when opened directly: the closed policy refuses its scripts."""
    from django.http import HttpResponse

    from config.security_headers import SecurityHeadersMiddleware

    svg = HttpResponse(b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>")
    svg["Content-Type"] = "image/svg+xml"
    answered = SecurityHeadersMiddleware(lambda request: svg)(None)
    assert directives(answered["Content-Security-Policy"])["default-src"] == ["'none'"]


def test_the_html_report_is_downloaded_not_rendered_under_the_policy(client_a, member_a):
    """The report inlines Plotly and its figure. It gets the policy like every answer, but as an
    attachment it is saved, not rendered, and opened from disk it carries no policy
    (tests/browser/test_incident_flow.py opens one there and sees its figure)."""
    from incidents.services import incident_create

    incident = incident_create(
        user=member_a, title="csp", window_start=1_781_485_200_000_000, window_end=1_781_488_800_000_000
    )
    response = client_a.get(f"/api/v1/incidents/{incident.pk}/export.html")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert b"<script>" in response.content  # would be refused by the policy, were it rendered here
    assert_security_headers(response)


@override_settings(JOINTLINE_CSP_REPORT_ONLY=True)
def test_report_only_mode_sends_the_policy_without_enforcing_it(client, db):
    response = client.get("/login/")
    assert "Content-Security-Policy" not in response
    assert "script-src 'self'" in response["Content-Security-Policy-Report-Only"]


def test_off_sends_no_policy_header_for_a_proxy_that_sets_its_own(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "JOINTLINE_"))}
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "JOINTLINE_DATA_DIR": str(tmp_path),
        "JOINTLINE_CONTENT_SECURITY_POLICY": "off",
        "JOINTLINE_PERMISSIONS_POLICY": "camera=()",
    }
    code = (
        "from django.conf import settings; "
        "print(repr(settings.JOINTLINE_CONTENT_SECURITY_POLICY), settings.JOINTLINE_PERMISSIONS_POLICY)"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1].split() == ["''", "camera=()"]
