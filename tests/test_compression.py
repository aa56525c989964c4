"""Compressed answers: gzip JSON, pages with a CSRF token only for the viewer's own navigations, hashed
and precompressed static files.

The rules are config/compression.py's and config/staticfiles.py's; the measured sizes are in
docs/decisions/0006-response-compression.md.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.test import override_settings
from rest_framework.test import APIClient

from core.timeparse import format_rfc3339
from incidents.services import incident_create
from tests.conftest import bearer_client, nic_batch, post_body
from tests.factories import HOUR, S, gauge, write
from timeline.models import Series

pytestmark = pytest.mark.services

T0 = 1_781_481_600 * S  # 2026-06-15T00:00:00Z
WINDOW = {"from": format_rfc3339(T0), "to": format_rfc3339(T0 + 2 * HOUR)}
PLOTLY_JS = (
    Path(__file__).parents[1]
    / "warroom"
    / "static"
    / "vendor"
    / "plotly-jointline"
    / "plotly-jointline.min.js"
)


@pytest.fixture
def slots(org_a) -> list[int]:
    """Four gauge series of A over two hours: enough JSON for compression to pay."""
    write(
        org_a,
        series=[
            gauge("nfs_rpc_slots_in_use", {"node": f"node-{n:02d}"}, [(i * 7 + n) % 128 for i in range(480)])
            for n in range(1, 5)
        ],
    )
    return sorted(
        Series.unscoped.filter(org=org_a, metric="nfs_rpc_slots_in_use").values_list("pk", flat=True)
    )


def _decoded(response) -> bytes:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return gzip.decompress(body) if response.get("Content-Encoding") == "gzip" else body


# ----------------------------------------------------------------------------- JSON


def test_api_lanes_with_a_read_token_come_back_gzipped_and_decode_to_the_same_json(read_token_a, slots):
    reader = bearer_client(read_token_a)
    params = {**WINDOW, "series": ",".join(map(str, slots)), "width": 400}
    plain = reader.get("/api/v1/lanes", params)
    packed = reader.get("/api/v1/lanes", params, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert plain.status_code == packed.status_code == 200
    assert "Content-Encoding" not in plain
    assert packed["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed["Vary"]
    assert len(packed.content) < len(plain.content) / 3
    unpacked = json.loads(gzip.decompress(packed.content))
    unpacked.pop("server_ms", None)
    expected = plain.json()
    expected.pop("server_ms", None)
    assert unpacked == expected and len(unpacked["lanes"]) == 4
    # A read token is a header no other site can make a browser send: compressed whatever the site.
    cross = reader.get("/api/v1/lanes", params, HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE="cross-site")
    assert cross["Content-Encoding"] == "gzip"


def test_war_room_json_is_compressed_for_its_own_page_and_not_for_another_sites(client_a, slots):
    params = {**WINDOW, "lane": "line:modeldev/storage/nfs_rpc_slots_in_use", "width": 400}
    own = client_a.get(
        "/timeline/api/lanes", params, HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE="same-origin"
    )
    assert own.status_code == 200 and own["Content-Encoding"] == "gzip"
    assert "Sec-Fetch-Site" in own["Vary"]
    typed = client_a.get(
        "/timeline/api/lanes", params, HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE="none"
    )
    assert typed["Content-Encoding"] == "gzip"
    for site in ("cross-site", "same-site"):
        # Another site's page navigating to the URL with the viewer's session (BREACH's setting).
        response = client_a.get(
            "/timeline/api/lanes", params, HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE=site
        )
        assert response.status_code == 200 and "Content-Encoding" not in response, site
        body, reference = response.json(), json.loads(gzip.decompress(own.content))
        assert body["lanes"] == reference["lanes"]


def test_the_live_lanes_cache_follows_the_same_rule(client_a, org_a):
    write(
        org_a,
        series=[gauge("nfs_rpc_slots_in_use", {"node": "node-01"}, [40.0 + i % 7 for i in range(400)])],
    )
    live = {"from": "now-3h", "to": "now", "lane": "line:modeldev/storage/nfs_rpc_slots_in_use", "width": 10}
    own = client_a.get(
        "/timeline/api/lanes", live, HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE="same-origin"
    )
    assert own["Content-Encoding"] == "gzip" and own["X-Jointline-Cache"] == "miss"
    cross = client_a.get(
        "/timeline/api/lanes", live, HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE="cross-site"
    )
    assert cross["X-Jointline-Cache"] == "hit" and "Content-Encoding" not in cross
    assert cross.content == gzip.decompress(own.content)


# ----------------------------------------------------------------------------- pages


def _csrf_field(page: bytes) -> str:
    return re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()


def test_pages_with_a_csrf_token_are_compressed_for_their_own_navigations_only(client_a):
    for page in ("/timeline/", "/sharing/", "/incidents/"):
        for site in ("same-origin", "none"):  # a link of Jointline's pages, a typed URL or bookmark
            response = client_a.get(page, HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE=site)
            assert response.status_code == 200 and response["Content-Encoding"] == "gzip", (page, site)
            assert b"csrfmiddlewaretoken" in gzip.decompress(response.content), page
            assert "Sec-Fetch-Site" in response["Vary"], page
        # Another site's page navigating the viewer's window there, or a browser that does not say.
        for site in ("cross-site", "same-site", None):
            headers = {"HTTP_SEC_FETCH_SITE": site} if site else {}
            response = client_a.get(page, HTTP_ACCEPT_ENCODING="gzip", **headers)
            assert response.status_code == 200 and "Content-Encoding" not in response, (page, site)
            assert "csrfmiddlewaretoken" in response.content.decode(), page
            assert "Sec-Fetch-Site" in response["Vary"], page


def test_the_csrf_token_a_page_carries_is_masked_afresh_in_every_answer(client_a):
    first, second = (
        gzip.decompress(
            client_a.get("/timeline/", HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE="none").content
        )
        for _ in range(2)
    )
    assert _csrf_field(first) != _csrf_field(second)
    assert client_a.cookies["csrftoken"].value not in (first + second).decode()


def test_the_sign_in_page_follows_the_page_rule_and_a_report_without_a_token_the_json_rule(
    client_a, member_a
):
    typed = APIClient().get("/login/", HTTP_ACCEPT_ENCODING="gzip", HTTP_SEC_FETCH_SITE="none")
    assert typed.status_code == 200 and typed["Content-Encoding"] == "gzip"
    for headers in ({"HTTP_SEC_FETCH_SITE": "cross-site"}, {}):
        login = APIClient().get("/login/", HTTP_ACCEPT_ENCODING="gzip", **headers)
        assert login.status_code == 200 and "Content-Encoding" not in login, headers
    incident = incident_create(
        user=member_a, title="slow init", window_start=T0, window_end=T0 + HOUR, participants=[]
    )
    report = client_a.get(
        f"/api/v1/incidents/{incident.pk}/export.html",
        HTTP_ACCEPT_ENCODING="gzip",
        HTTP_SEC_FETCH_SITE="none",
    )
    assert report.status_code == 200 and report["Content-Type"].startswith("text/html")
    assert report["Content-Encoding"] == "gzip" and b"slow init" in gzip.decompress(report.content)
    # no CSRF token in it: a browser that does not send Sec-Fetch-Site gets it compressed, as JSON
    quiet = client_a.get(f"/api/v1/incidents/{incident.pk}/export.html", HTTP_ACCEPT_ENCODING="gzip")
    assert quiet["Content-Encoding"] == "gzip"


# ----------------------------------------------------------------------------- static files


def test_collected_static_files_are_hashed_immutable_and_served_gzipped(client_a, tmp_path):
    with override_settings(STATIC_ROOT=tmp_path / "static"):
        call_command("collectstatic", interactive=False, verbosity=0)
        page = client_a.get("/timeline/").content.decode()
        plotly_url = re.search(
            r'href="(/static/vendor/plotly-jointline/plotly-jointline\.min\.[0-9a-f]{12}\.js)"', page
        ).group(1)
        module_url = re.search(r'src="(/static/timeline/timeline\.[0-9a-f]{12}\.js)"', page).group(1)

        browser = APIClient()  # static files need no session
        response = browser.get(plotly_url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
        assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
        assert "immutable" in response["Cache-Control"] and "Accept-Encoding" in response["Vary"]
        body = b"".join(response.streaming_content)
        assert len(body) < PLOTLY_JS.stat().st_size / 2
        assert gzip.decompress(body) == PLOTLY_JS.read_bytes()
        plain = browser.get(plotly_url)
        assert "Content-Encoding" not in plain and b"".join(plain.streaming_content) == PLOTLY_JS.read_bytes()

        # The modules import each other by hashed name, so a changed module changes its importers' names.
        module = _decoded(browser.get(module_url, HTTP_ACCEPT_ENCODING="gzip")).decode()
        imported = re.findall(r'from "\./([\w.]+)"', module)
        assert imported and all(re.fullmatch(r"\w+\.[0-9a-f]{12}\.js", name) for name in imported)
        for name in imported:
            dependency = browser.get(f"/static/timeline/{name}", HTTP_ACCEPT_ENCODING="gzip")
            assert dependency.status_code == 200 and "immutable" in dependency["Cache-Control"], name


def test_without_collected_files_pages_link_the_plain_names(client_a, tmp_path):
    (tmp_path / "empty").mkdir()
    with override_settings(STATIC_ROOT=tmp_path / "empty"):
        page = client_a.get("/timeline/").content.decode()
        assert 'href="/static/vendor/plotly-jointline/plotly-jointline.min.js"' in page
        served = APIClient().get("/static/vendor/plotly-jointline/plotly-jointline.min.js")
        assert served.status_code == 200


# ----------------------------------------------------------------------------- pushes


def test_push_endpoints_still_accept_gzip_bodies(pusher_a, read_token_a, org_a):
    body = gzip.compress(json.dumps(nic_batch(points=40)).encode())
    response = post_body(
        pusher_a,
        "/api/v1/push",
        body,
        "application/json",
        HTTP_CONTENT_ENCODING="gzip",
        HTTP_ACCEPT_ENCODING="gzip",
    )
    assert response.status_code == 202, _decoded(response)
    assert json.loads(_decoded(response))["status"] in {"accepted", "applied"}
    series = Series.unscoped.get(org=org_a, metric="node_network_receive_bytes_total")
    start = 1_781_485_200
    lanes = bearer_client(read_token_a).get(
        "/api/v1/lanes",
        {"series": series.pk, "from": start, "to": start + 40 * 15, "width": 40, "fn": "value"},
        HTTP_ACCEPT_ENCODING="gzip",
    )
    assert sum(json.loads(_decoded(lanes))["lanes"][0]["count"]) == 40


def test_json_answers_carry_a_random_length_name_in_their_gzip_header(read_token_a, slots):
    """The BREACH mitigation of Django's compression is kept at the faster level: the compressed length
    varies from answer to answer of the same body."""
    reader = bearer_client(read_token_a)
    params = {**WINDOW, "series": ",".join(map(str, slots)), "width": 400}
    answers = [reader.get("/api/v1/lanes", params, HTTP_ACCEPT_ENCODING="gzip") for _ in range(6)]
    assert all(answer.content[3] & 0x08 for answer in answers)  # FNAME set
    assert len({len(answer.content) for answer in answers}) > 1
    bodies = [json.loads(gzip.decompress(answer.content)) for answer in answers]
    for body in bodies:
        body.pop("server_ms", None)
    assert all(body == bodies[0] for body in bodies)


def test_answers_from_a_mebibyte_on_are_compressed_faster_smaller_ones_smaller():
    """Level 6 below LARGE_ANSWER_BYTES (the war room's first answers stay small on the wire), level 1 from
    it on (a long window's lanes answer): each answer decompresses to its body either way."""
    from config import compression

    rng = np.random.default_rng(5)
    row = json.dumps([round(float(v), 3) for v in rng.normal(50, 3, 64)]).encode()
    small = row * (compression.LARGE_ANSWER_BYTES // len(row) - 1)
    large = row * (compression.LARGE_ANSWER_BYTES // len(row) + 1)
    assert len(small) < compression.LARGE_ANSWER_BYTES <= len(large)
    for body in (small, large):
        assert gzip.decompress(compression.compress_answer(body, max_random_bytes=8)) == body
    level = {body: len(compression.compress_answer(body, max_random_bytes=1)) for body in (small, large)}
    for body in (small, large):  # the two levels are told apart by length on these bodies
        assert len(gzip.compress(body, compresslevel=6)) != len(gzip.compress(body, compresslevel=1))
    assert level[small] == len(gzip.compress(small, compresslevel=6, mtime=0)) + 2
    assert level[large] == len(gzip.compress(large, compresslevel=1, mtime=0)) + 2
