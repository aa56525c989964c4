"""A compressed body inflates at most JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO times its size: a gzip bomb
stops after a few megabytes instead of inflating the absolute limit first."""

import gzip
import json
import zlib

import pytest
from django.test import override_settings

from ingest.protocols.decoding import decompress
from ingest.protocols.errors import PayloadTooLarge
from tests.conftest import nic_batch, post_body


def gzip_bomb(megabytes: int = 200) -> bytes:
    """About 199 KiB of gzip that inflates to ``megabytes`` MiB of zeros."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(2**20)
    return b"".join(packer.compress(zeros) for _ in range(megabytes)) + packer.flush()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip_bomb()


def test_a_gzip_bomb_stops_at_the_ratio_not_at_the_absolute_limit(bomb):
    with pytest.raises(PayloadTooLarge) as refused:
        decompress(bomb, "gzip", max_bytes=128 * 2**20, max_ratio=100)
    assert f"exceeds {100 * len(bomb)} bytes" in refused.value.message
    assert "JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO" in refused.value.message


def test_a_small_body_may_inflate_beyond_the_ratio_up_to_a_megabyte():
    from ingest.protocols.decoding import RATIO_FLOOR_BYTES

    body = gzip.compress(bytes(RATIO_FLOOR_BYTES))
    assert len(decompress(body, "gzip", max_bytes=128 * 2**20, max_ratio=10)) == RATIO_FLOOR_BYTES
    with pytest.raises(PayloadTooLarge):
        decompress(gzip.compress(bytes(RATIO_FLOOR_BYTES + 1)), "gzip", max_bytes=128 * 2**20, max_ratio=10)


def test_snappy_is_held_to_the_ratio_by_its_declared_length():
    import cramjam

    body = bytes(cramjam.snappy.compress_raw(bytes(8 * 2**20)))  # snappy: about 21x on zeros
    assert len(decompress(body, "snappy", max_bytes=128 * 2**20, max_ratio=100)) == 8 * 2**20
    with pytest.raises(PayloadTooLarge):
        decompress(body, "snappy", max_bytes=128 * 2**20, max_ratio=10)


@pytest.mark.parametrize("url", ["/api/v1/push", "/loki/api/v1/push", "/v1/logs"])
def test_a_gzip_bomb_push_is_refused_with_413_naming_the_ratio(pusher_a, bomb, url):
    response = post_body(pusher_a, url, bomb, "application/json", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert b"JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO" in response.content


@override_settings(JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO=2.0)
def test_an_ordinary_gzip_push_is_accepted_within_a_low_ratio(pusher_a):
    body = gzip.compress(json.dumps(nic_batch()).encode())
    response = post_body(pusher_a, "/api/v1/push", body, "application/json", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 202, response.content
